"""The run index's filter in Chromium from file://: each filter alone and combined
shows exactly the runs the data says, newest first, with their count; a filtered URL opened
fresh shows the same; without JavaScript the form is hidden and the lists stay; axe is clean
with the filter open.

The site is the sample with its other tables, its filter data cut into shards of
``SHARD_RUNS`` runs, so that a time range loads only some of them.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import Visit, serving
from playwright.sync_api import Page
from site_helpers import REPO, SAMPLE, SAMPLE_SERVERS, build_ok, payload_of, read_jsonl, server_of
from site_pages.test_run_lists import list_runs

from browser.test_accessibility import AXE, AXE_OPTIONS, describe
from nrllm_report.site import filter_data

SHARD_RUNS = 12  # the sample's 120 runs in about ten shards
RUN_ROWS = REPO / "sample_data" / "tx_nrllm_agentrun.jsonl"
Opener = Callable[..., Visit]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("filter") / "site"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(filter_data, "SHARD_RUNS", SHARD_RUNS)
        build_ok("--out", out, "--jobs", "1")  # no INPUT: the sample's events with its other tables
    assert len(list((out / "filter").glob("runs-*.js"))) >= 5
    return out


def facts() -> dict[str, dict[str, Any]]:
    """Each run's start, duration, tools and servers from the sample's rows, and its run row."""
    runs: dict[str, dict[str, Any]] = defaultdict(lambda: {"start": None, "duration": 0.0, "tools": set()})
    for row in read_jsonl(SAMPLE):
        run = runs[str(row["run"])]
        run["start"] = row["crdate"] if run["start"] is None else min(run["start"], row["crdate"])
        run["duration"] += float(row.get("duration_ms") or 0)
        name = payload_of(row).get("toolName") if row["kind"] == "tool" else None
        if name:
            run["tools"].add(name)
    rows = {str(row["uuid"]): row for row in read_jsonl(RUN_ROWS)}
    for run_id, run in runs.items():
        run["servers"] = {server_of(tool, SAMPLE_SERVERS) for tool in run["tools"]} - {None}
        run["row"] = rows.get(run_id, {})
    return dict(runs)


def iso(moment: str) -> int:
    from datetime import datetime, timezone
    return int(datetime.fromisoformat(moment).replace(tzinfo=timezone.utc).timestamp())


FROM, TO = "2026-09-10T00:00:00", "2026-09-14T23:59:59"  # the sample's site is in UTC


def expected(site: Path, language: str, query: dict[str, str]) -> list[str]:
    """The runs of the index (newest first) that the query's filters all keep, from the data."""
    known = facts()
    index = list_runs(site / language / "index.html")
    failed = set(list_runs(site / language / "runs-with-failed-calls.html"))
    cancelled = set(list_runs(site / language / "runs-with-cancelled-calls.html"))
    tests: list[Callable[[str], bool]] = []
    if "run" in query:
        tests.append(lambda run: run.lower().startswith(query["run"].lower()))
    if "server" in query:
        tests.append(lambda run: query["server"] in known[run]["servers"])
    if "tool" in query:
        tests.append(lambda run: query["tool"] in known[run]["tools"])
    if "outcome" in query:
        tests.append(lambda run: run in (failed if query["outcome"] == "failed" else cancelled))
    if "status" in query:
        tests.append(lambda run: known[run]["row"].get("status") == query["status"])
    if "configuration" in query:
        tests.append(lambda run: known[run]["row"].get("configuration_identifier") == query["configuration"])
    if "from" in query:
        tests.append(lambda run: known[run]["start"] >= iso(query["from"]))
    if "to" in query:
        tests.append(lambda run: known[run]["start"] <= iso(query["to"]))
    if "over" in query:
        tests.append(lambda run: known[run]["duration"] > float(query["over"]) * 1000)
    return [run for run in index if all(test(run) for test in tests)]


def settled(page: Page) -> None:
    """Wait until the filter has read every shard it needs."""
    page.wait_for_function("""() => { const line = document.querySelector('.filter-count');
        return line && line.textContent !== '' && !/Searching|Suche/.test(line.textContent); }""")


def shown_runs(page: Page) -> list[str]:
    return page.eval_on_selector_all(
        "table.filter-results tbody tr td.run-id a", "links => links.map(a => a.textContent)"
    )


QUERIES = {
    "run-prefix": {"run": "4D"},
    "server": {"server": "github"},
    "tool": {"tool": "mcp_weather_forecast"},
    "failed": {"outcome": "failed"},
    "cancelled": {"outcome": "cancelled"},
    "status": {"status": "completed"},
    "configuration": {"configuration": "sales-desk"},
    "time-range": {"from": FROM, "to": TO},
    "from-only": {"from": "2026-09-25T12:00:00"},
    "duration": {"over": "40"},
    "server-and-days": {"server": "github", "from": FROM, "to": TO},
    "combined": {"server": "jira_cloud", "outcome": "failed", "status": "completed", "over": "20"},
    "everything": {"run": "", "tool": "mcp_github_list_issues", "configuration": "dev-assistant", "from": FROM,
                   "to": "2026-09-30T23:59:59", "over": "1"},
    "nothing": {"server": "github", "run": "zz"},
}


def fragment(query: dict[str, str]) -> str:
    from urllib.parse import urlencode
    return "#" + urlencode({key: value for key, value in query.items() if value})


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("name", list(QUERIES))
def test_a_filter_shows_exactly_the_runs_the_data_says(visit: Opener, site: Path, name: str, language: str) -> None:
    query = {key: value for key, value in QUERIES[name].items() if value}
    runs = expected(site, language, query)
    if name != "nothing":
        assert runs, f"the sample has no run for {query}: the test would prove nothing"
    page = visit((site / language / "index.html").resolve().as_uri() + fragment(query)).page
    settled(page)
    assert shown_runs(page) == runs
    count = page.locator(".filter-count").text_content() or ""
    assert re.search(rf"\b{len(runs)}\b", count), count
    for key, value in query.items():  # the form shows the filter (a browser drops a time's ":00" seconds)
        shown = page.locator(f'[name="{key}"]').input_value()
        assert iso(shown) == iso(value) if key in ("from", "to") else shown == value


@pytest.mark.slow
def test_a_filter_typed_in_goes_into_the_url_and_the_url_opens_filtered(visit: Opener, site: Path) -> None:
    page = visit((site / "en" / "index.html").resolve().as_uri()).page
    page.wait_for_selector("#run-filter:not([hidden])")
    page.select_option("#filter-server", "github")
    page.select_option("#filter-outcome", "cancelled")
    page.fill("#filter-over", "25")
    settled(page)
    shown = shown_runs(page)
    assert shown == expected(site, "en", {"server": "github", "outcome": "cancelled", "over": "25"}) and shown
    url = page.url
    assert "server=github" in url and "outcome=cancelled" in url and "over=25" in url
    fresh = visit(url).page
    settled(fresh)
    assert shown_runs(fresh) == shown
    assert fresh.locator("#filter-server").input_value() == "github"
    page.click(".filter-clear")
    assert page.url.split("#")[0] == page.url and shown_runs(page) == []


@pytest.mark.slow
def test_the_rows_link_their_run_pages_and_show_the_index_columns(visit: Opener, site: Path) -> None:
    page = visit((site / "de" / "index.html").resolve().as_uri() + "#status=failed").page
    settled(page)
    filtered = page.locator("table.filter-results tbody tr").first
    run = filtered.locator("a").first.text_content() or ""
    index_row = page.locator("table.runs tbody tr", has=page.locator(f'a:text-is("{run}")'))
    if index_row.count():  # the run is on the first page of the index: the same cells, but the time's spaces
        assert [cell.strip() for cell in filtered.locator("td").all_inner_texts()[2:]] == [
            cell.strip() for cell in index_row.locator("td").all_inner_texts()[2:]]
    href = filtered.locator("a").first.get_attribute("href") or ""
    assert (site / "de" / href).is_file()


def test_without_javascript_the_filter_is_hidden_and_the_lists_stay(visit: Opener, site: Path) -> None:
    page = visit((site / "en" / "index.html").resolve().as_uri(), java_script_enabled=False).page
    assert page.locator("#run-filter").count() == 1 and not page.locator("#run-filter").is_visible()
    assert page.locator('nav.list-links a[href="runs-with-failed-calls.html"]').is_visible()


@pytest.mark.slow
def test_the_data_is_scripts_of_the_site_and_the_same_build_to_build(site: Path, tmp_path: Path) -> None:
    index = (site / "filter" / "index.js").read_text(encoding="utf-8")
    assert index.startswith("nrllmFilter.index(")
    listed = json.loads(index[len("nrllmFilter.index("):-3])
    assert sum(shard[3] for shard in listed["shards"]) == len(facts())
    assert all((site / "filter" / shard[0]).is_file() for shard in listed["shards"])
    again = tmp_path / "again"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(filter_data, "SHARD_RUNS", SHARD_RUNS)
        build_ok("--out", again, "--jobs", "2")
    for path in [*(site / "filter").iterdir(), site / "assets" / "filter.js", site / "en" / "index.html"]:
        assert (again / path.relative_to(site)).read_bytes() == path.read_bytes(), path


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    with serving(site) as origin:
        yield origin


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "de"])
def test_axe_finds_nothing_with_the_filter_open(visit: Opener, served: str, language: str) -> None:
    page = visit(f"{served}/{language}/index.html" + fragment(QUERIES["server-and-days"])).page
    settled(page)
    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        found[scheme] = AXE.run(page, options=AXE_OPTIONS).response["violations"]
    assert found == {"light": [], "dark": []}, "\n".join(
        f"{scheme}: {describe(violations)}" for scheme, violations in found.items() if violations)
