"""Each tool of a server has its list of the runs that called it, linked from the server page."""

from __future__ import annotations

from pathlib import Path

import pytest
from markup import norm
from site_helpers import (
    OUTCOMES,
    SAMPLE,
    SAMPLE_SERVERS,
    build_ok,
    cells,
    flat,
    number,
    operator_denied,
    oracle_valid,
    outcome_of,
    page,
    read_jsonl,
    server_of,
    table_rows,
)

from nrllm_report.core.slugs import slug
from nrllm_report.site import pages
from site_pages.test_run_lists import list_runs

RUNS_PER_PAGE = 10  # the sample's busiest tools then fill several pages
CALLS = (*OUTCOMES, "denied")
WORDS = {"en": {"ok": "ok", "failed": "failed", "cancelled": "cancelled", "denied": "Denied", "at": "at",
                "runs": "Runs"},
         "de": {"ok": "ok", "failed": "fehlgeschlagen", "cancelled": "abgebrochen", "denied": "Verweigert",
                "at": "bei", "runs": "Läufe"}}

Calls = dict[str, dict[str, dict[str, dict[str, int]]]]  # server -> tool -> run -> calls by outcome


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tool-lists") / "site"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pages, "RUNS_PER_INDEX_PAGE", RUNS_PER_PAGE)
        build_ok(SAMPLE, "--out", out, "--servers", ",".join(SAMPLE_SERVERS), "--jobs", "1")
    return out


def calls_from_rows() -> Calls:
    """Each server's tools' calls by run and outcome (a denial apart from failed), from the sample's rows."""
    rows = [row for row in read_jsonl(SAMPLE) if oracle_valid(row)]
    denied = operator_denied(rows)
    found: Calls = {}
    for row in rows:
        name = flat(row, "toolName")
        server = server_of(name, SAMPLE_SERVERS) if row["kind"] == "tool" else None
        if server is None:
            continue
        counts = found.setdefault(server, {}).setdefault(name, {}).setdefault(str(row["run"]), dict.fromkeys(CALLS, 0))
        outcome = "denied" if (str(row["run"]), row["sequence"]) in denied else outcome_of(row)
        if outcome is not None:
            counts[outcome] += 1
    return found


def tool_links(server_page: Path, language: str) -> dict[str, tuple[str, str]]:
    """Each tool's name -> the href and text of its link in the Runs column of the server page's tools table."""
    document = page(server_page)
    headers = [norm(cell.text()) for cell in document.find("table", "tools").find_all("th")]
    column = headers.index(WORDS[language]["runs"])
    links = {}
    for row in table_rows(document, "tools"):
        cell = [child for child in row.children if getattr(child, "tag", None) == "td"][column]
        [link] = cell.find_all("a")
        links[cells(row)[0]] = (link.attrs["href"], link.text())
    return links


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "de"])
def test_each_tool_lists_exactly_the_runs_that_called_it_newest_first(site: Path, language: str) -> None:
    index_order = list_runs(site / language / "index.html")
    found = calls_from_rows()
    assert len(found) == len(SAMPLE_SERVERS)
    paginated = 0
    for server, tools in found.items():
        server_page = site / language / "servers" / f"{slug(server)}.html"
        links = tool_links(server_page, language)
        assert {name: href for name, (href, _count) in links.items()} == {
            name: f"{slug(server)}/tools/{slug(name)}/runs.html" for name in tools}
        for name, runs in tools.items():
            href, count = links[name]
            assert number(count, language) == len(runs)
            assert list_runs(server_page.parent / href) == [run for run in index_order if run in runs]
            paginated += len(runs) > RUNS_PER_PAGE
        folders = (server_page.parent / slug(server) / "tools").iterdir()
        assert sorted(folder.name for folder in folders) == sorted(slug(name) for name in tools)
    assert paginated, "no tool list has a second page"


@pytest.mark.parametrize("language", ["en", "de"])
def test_a_tool_list_shows_each_runs_calls_of_that_tool_and_links_its_server(site: Path, language: str) -> None:
    found = calls_from_rows()
    words = WORDS[language]
    denied_somewhere = False
    for server, tools in found.items():
        for name, runs in tools.items():
            first = site / language / "servers" / slug(server) / "tools" / slug(name) / "runs.html"
            document = page(first)
            header = [norm(cell.text()) for cell in document.find("table", "runs").find("thead").find_all("th")]
            assert header[-4:] == [f"{words[outcome]} {words['at']} {name}" for outcome in CALLS]
            rows = {row.find("a").text(): cells(row)[-4:] for row in table_rows(document, "runs")}
            assert rows and all(shown == [str(runs[run][outcome]) for outcome in CALLS] for run, shown in rows.items())
            denied_somewhere |= any(shown[-1] != "0" for shown in rows.values())
            [up] = document.find("nav", "list-links").find_all("a")
            assert (up.text(), up.attrs["href"]) == (server, f"../../../{slug(server)}.html")
            run_link = table_rows(document, "runs")[0].find("a").attrs["href"]
            assert (first.parent / run_link).resolve() == (site / language / "runs" / run_link.split("/")[-1]).resolve()
            assert (first.parent / run_link).is_file()
    assert denied_somewhere, "the sample's denied call is in no tool list"
