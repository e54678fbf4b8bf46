"""Every run is reachable without JavaScript: by day, by outcome class, by server."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest
from command_line import run_cli
from site_helpers import calls, cells, page, table_rows, write_jsonl

DAY = 86_400
FIRST_DAY = 1_788_220_800  # 2026-09-01 00:00 UTC
BUSY_RUNS = 1_100  # more runs with a failed github call than a server page ever listed (1,000)


def day_of(start: int) -> str:
    return datetime.fromtimestamp(start, timezone.utc).date().isoformat()


def export_rows() -> tuple[list[dict], dict[str, tuple[int, list[str], list[str]]]]:
    """Runs over five days (none on the third): github fails in every busy run, weather is
    cancelled in some; returns the rows and each run's start, github's and weather's outcomes."""
    rows: list[dict] = []
    facts: dict[str, tuple[int, list[str], list[str]]] = {}
    for number in range(BUSY_RUNS):
        day = [0, 1, 3, 4][number % 4]
        start = FIRST_DAY + day * DAY + 60 * (number // 4)
        github = ["ok", "failed"] if number % 3 else ["failed"]
        weather = ["cancelled"] if number % 5 == 0 else (["ok"] if number % 2 else [])
        run = f"run-{number:05d}"
        rows += calls(run, start, "mcp_github_search", github)
        rows += [{**row, "sequence": row["sequence"] + 10} for row in calls(run, start + 5, "mcp_weather_now", weather)
                 if row["kind"] == "tool"]
        facts[run] = (start, github, weather)
    return rows, facts


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[int, list[str], list[str]]]]:
    rows, facts = export_rows()
    folder = tmp_path_factory.mktemp("lists")
    export = write_jsonl(folder / "runs.jsonl", rows)
    result = run_cli("build", export, "--out", folder / "site", "--servers", "github,weather", "--jobs", "2")
    assert result.returncode == 0, result.stderr
    return folder / "site", facts


def list_run_links(first_page: Path) -> list[tuple[str, Path]]:
    """The runs of a paginated list and the files their links lead to, following its "Next"
    links from the first page."""
    runs: list[tuple[str, Path]] = []
    here: Path | None = first_page
    while here is not None:
        document = page(here)
        if document.find_all("table", "runs"):
            runs += [(link.text(), (here.parent / link.attrs["href"]).resolve())
                     for link in (row.find("a") for row in table_rows(document, "runs"))]
        navigation = document.find_all("nav", "pagination")[:1]
        following = [link for nav in navigation for link in nav.find_all("a") if link.attrs.get("rel") == "next"]
        here = (here.parent / following[0].attrs["href"]).resolve() if following else None
    return runs


def list_runs(first_page: Path) -> list[str]:
    """The runs of a paginated list, in its order."""
    return [run for run, _target in list_run_links(first_page)]


def newest_first(runs: list[str], facts: dict[str, tuple[int, list[str], list[str]]]) -> list[str]:
    return sorted(runs, key=lambda run: (-facts[run][0], run))


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "de"])
def test_every_day_lists_exactly_the_runs_that_started_on_it(built, language: str) -> None:  # type: ignore[no-untyped-def]
    site, facts = built
    by_day: dict[str, list[str]] = {}
    for run, (start, _github, _weather) in facts.items():
        by_day.setdefault(day_of(start), []).append(run)
    pages = sorted((site / language / "days").glob("????-??-??.html"))
    assert [path.stem for path in pages] == sorted(by_day)
    for day, runs in by_day.items():
        assert list_runs(site / language / "days" / f"{day}.html") == newest_first(runs, facts)


def test_a_day_links_the_days_before_and_after_it_that_have_runs(built) -> None:  # type: ignore[no-untyped-def]
    site, _facts = built
    document = page(site / "en" / "days" / "2026-09-04.html")  # 2026-09-03 has no runs
    around = {link.attrs["rel"]: link.attrs["href"] for link in document.find("nav", "list-links").find_all("a")
              if "rel" in link.attrs}
    assert around == {"prev": "2026-09-02.html", "next": "2026-09-05.html"}
    first = page(site / "en" / "days" / "2026-09-01.html").find("nav", "list-links")
    assert [link.attrs.get("rel") for link in first.find_all("a")] == [None, "next"]  # up to the index; no earlier day


def test_the_run_index_lists_every_day_with_its_counts(built) -> None:  # type: ignore[no-untyped-def]
    site, facts = built
    expected = Counter(day_of(start) for start, _github, _weather in facts.values())
    failed = Counter(day_of(start) for start, github, weather in facts.values() if "failed" in github + weather)
    cancelled = Counter(day_of(start) for start, github, weather in facts.values() if "cancelled" in github + weather)
    rows = table_rows(page(site / "en" / "index.html"), "days")
    found = {row.find("a").attrs["href"]: cells(row)[1:] for row in rows}
    assert found == {f"days/{day}.html": [f"{expected[day]:,}", f"{failed[day]:,}", f"{cancelled[day]:,}"]
                     for day in sorted(expected, reverse=True)}
    assert page(site / "en" / "index-2.html").find_all("table", "days") == []  # the day list is on the first page


@pytest.mark.parametrize(("stem", "outcome"), [("runs-with-failed-calls", "failed"),
                                               ("runs-with-cancelled-calls", "cancelled")])
def test_the_outcome_lists_hold_every_run_with_such_a_call(built, stem: str, outcome: str) -> None:  # type: ignore[no-untyped-def]
    site, facts = built
    expected = [run for run, (_start, github, weather) in facts.items() if outcome in github + weather]
    assert list_runs(site / "en" / f"{stem}.html") == newest_first(expected, facts)


def test_the_server_page_reaches_every_run_with_a_failed_call_however_many(built) -> None:  # type: ignore[no-untyped-def]
    site, facts = built
    failing = [run for run, (_start, github, _weather) in facts.items() if "failed" in github]
    assert len(failing) > 1_000
    server_page = site / "en" / "servers" / "github.html"
    links = {link.text(): link.attrs["href"] for link in page(server_page).find("ul", "run-lists").find_all("a")}
    assert links == {"Runs that called github": "github/runs.html",
                     "Runs with a failed call to github": "github/failed.html",
                     "Runs with a cancelled call to github": "github/cancelled.html"}
    assert f"({len(failing):,})" in page(server_page).find("ul", "run-lists").text()
    reached = list_run_links(server_page.parent / links["Runs with a failed call to github"])
    assert [run for run, _target in reached] == newest_first(failing, facts)
    runs_folder = (site / "en" / "runs").resolve()
    assert [target for _run, target in reached] == [runs_folder / f"{run}.html" for run in newest_first(failing, facts)]
    assert all(target.is_file() for _run, target in reached)
    assert list_runs(server_page.parent / links["Runs with a cancelled call to github"]) == []


def test_a_servers_list_shows_the_runs_calls_to_that_server(built) -> None:  # type: ignore[no-untyped-def]
    site, facts = built
    document = page(site / "de" / "servers" / "weather" / "runs.html")
    header = [cell.text() for cell in document.find("table", "runs").find("thead").find_all("th")]
    assert header[-3:] == ["ok bei weather", "fehlgeschlagen bei weather", "abgebrochen bei weather"]
    called = [run for run, (_start, _github, weather) in facts.items() if weather]
    rows = {row.find("a").text(): cells(row)[-3:] for row in table_rows(document, "runs")}
    first_page = newest_first(called, facts)[:250]
    assert list(rows) == first_page
    for run in first_page:
        weather = facts[run][2]
        assert rows[run] == [str(weather.count("ok")), str(weather.count("failed")), str(weather.count("cancelled"))]
    run_link = table_rows(document, "runs")[0].find("a").attrs["href"]
    assert (document_path := site / "de" / "servers" / "weather" / run_link).resolve().is_file(), document_path
