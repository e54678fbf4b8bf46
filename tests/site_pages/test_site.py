"""The bilingual site. Figures on the pages and in summary.json against an oracle
computed from the raw rows, ordering, outcome states, the servers page, problems, build
options, links, determinism and the incremental rebuild."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import unquote
from zoneinfo import ZoneInfo

import pytest
from site_helpers import (
    CRAFTED_REJECTED,
    REPO,
    SAMPLE,
    SAMPLE_SERVERS,
    Node,
    build,
    build_ok,
    calls,
    cells,
    crafted_rows,
    flat,
    hrefs,
    html_pages,
    is_external,
    norm,
    number,
    oracle,
    page,
    read_jsonl,
    site_files,
    step,
    table_rows,
    tool,
    wilson,
    write_jsonl,
)

from nrllm_report.core.resources import PACKAGE_DIR, resource_path
from nrllm_report.site import pages, parallel

LABELS = {
    "en": {"ok": "ok", "failed": "failed", "cancelled": "cancelled"},
    "de": {"ok": "ok", "failed": "fehlgeschlagen", "cancelled": "abgebrochen"},
}
HAS_FAILED_CALL = {"en": "has a failed call", "de": "hat einen fehlgeschlagenen Aufruf"}
LANGUAGES = ("en", "de")


# ---------------------------------------------------------------- shared sites


@pytest.fixture(scope="module")
def sample_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample's events, as ``nrllm-report build --out DIR`` with no INPUT builds them
    (with its server list); its other tables' pages and figures are tests/readers/test_tables.py's."""
    out = tmp_path_factory.mktemp("sample") / "site"
    build_ok(SAMPLE, "--servers", ",".join(SAMPLE_SERVERS), "--out", out)
    return out


@pytest.fixture(scope="module")
def sample_oracle() -> Any:
    return oracle(read_jsonl(SAMPLE), SAMPLE_SERVERS)


@pytest.fixture(scope="module")
def crafted_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("crafted") / "crafted.jsonl", crafted_rows())


@pytest.fixture(scope="module")
def crafted_site(crafted_input: Path) -> Path:
    out = crafted_input.parent / "site"
    build_ok(crafted_input, "--out", out, "--min-calls", "5")
    return out


def index_rows(site: Path, language: str) -> list[Node]:
    rows: list[Node] = []
    for path in sorted((site / language).glob("index*.html"), key=lambda p: (len(p.name), p.name)):
        rows += table_rows(page(path), "runs")
    return rows


def run_id_of(row: Node) -> str:
    return row.find("a").text()


def server_table(site: Path, language: str) -> list[list[str]]:
    return [cells(row) for row in table_rows(page(site / language / "servers" / "index.html"), "servers")]


def timeline(site: Path, language: str, run: str) -> list[Node]:
    return table_rows(page(site / language / "runs" / f"{run}.html"), "timeline")


def outcome_badge(row: Node) -> tuple[str | None, str]:
    """(outcome class, label) of a timeline row's outcome cell; (None, text) when it states none."""
    badge = row.find("span", "outcome")
    states = [name[len("outcome-"):] for name in badge.classes if name.startswith("outcome-")]
    assert len(states) == 1, badge.classes
    return (None if states[0] == "none" else states[0]), badge.text()


# ---------------------------------------------------------------- summary.json


COUNT_KEYS = ("ok", "failed", "cancelled", "denied", "failed_in_0ms", "failure_rate")
HEALTH_KEYS = [
    "verdict", "failure_budget", "interval", "current", "changes", "cancelled_share",
    "failure_rate_if_cancels_failed", "cancellation_changes", "legacy_days",
]


def counts_only(summary: dict[str, Any]) -> dict[str, Any]:
    """summary.json with each server's counts and rate only (its health and the gate are tested on their own)."""
    servers = {server: {key: figures[key] for key in COUNT_KEYS if key in figures}
               for server, figures in summary["servers"].items()}
    return {**{key: value for key, value in summary.items() if key != "gate"}, "servers": servers}


@pytest.mark.slow
def test_summary_json_of_the_sample_is_what_the_rows_say(sample_site: Path, sample_oracle: Any) -> None:
    summary = json.loads((sample_site / "summary.json").read_text(encoding="utf-8"))
    assert counts_only(summary) == sample_oracle.summary()
    for figures in summary["servers"].values():
        assert list(figures) == [*COUNT_KEYS, *HEALTH_KEYS, "tools", "latency"]
    assert list(summary) == ["rows_read", "rows_rendered", "rows_rejected", "runs", "outcomes", "denied", "servers",
                             "languages", "gate"]
    assert summary["denied"] == sample_oracle.denied == 1  # the sample's one operator denial
    assert summary["gate"] == {"passed": True, "failures": []}  # present without a gate option


def test_summary_json_of_crafted_rows(crafted_site: Path, crafted_input: Path) -> None:
    summary = json.loads((crafted_site / "summary.json").read_text(encoding="utf-8"))
    expected = oracle(read_jsonl(crafted_input)).summary()
    assert counts_only(summary) == expected
    # Spelled out, so the oracle itself is checked: local tools count, cancelled never in the rate.
    assert summary["rows_rejected"] == 3 and summary["rows_read"] == 206 and summary["rows_rendered"] == 203
    assert summary["outcomes"] == {"ok": 100, "failed": 30, "cancelled": 54}
    assert set(summary["servers"]) == {"bigflaky", "tiny", "steady", "outage", "eighth", "idle"}
    summary = counts_only(summary)
    # No denial in these rows: the site says nothing of denials, as before they were told.
    assert summary["servers"]["steady"] == {"ok": 10, "failed": 0, "cancelled": 50, "failed_in_0ms": 0,
                                           "failure_rate": 0.0}
    assert summary["servers"]["idle"] == {"ok": 0, "failed": 0, "cancelled": 3, "failed_in_0ms": 0,
                                         "failure_rate": None}
    assert summary["servers"]["eighth"]["failure_rate"] == 0.125


def test_summary_json_counts_local_tools_but_lists_only_mcp_servers(tmp_path: Path) -> None:
    rows = [
        tool("local", 0, "kb_lookup", False, "ok", crdate=1_788_000_000),
        tool("local", 1, "current_time", True, "cancelled", crdate=1_788_000_001),
        tool("local", 2, "mcp_github_list", True, crdate=1_788_000_002),
    ]
    build_ok(write_jsonl(tmp_path / "rows.jsonl", rows), "--out", tmp_path / "site")
    summary = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))
    assert summary["outcomes"] == {"ok": 1, "failed": 1, "cancelled": 1}
    assert counts_only(summary)["servers"] == {
        "github": {"ok": 0, "failed": 1, "cancelled": 0, "failed_in_0ms": 0, "failure_rate": 1.0}}


# ---------------------------------------------------------------- the run index


@pytest.mark.parametrize("language", LANGUAGES)
def test_runs_are_listed_newest_first(sample_site: Path, sample_oracle: Any, language: str) -> None:
    shown = [run_id_of(row) for row in index_rows(sample_site, language)]
    assert shown == sample_oracle.newest_first()


def test_run_index_figures_are_what_the_rows_say(sample_site: Path, sample_oracle: Any) -> None:
    for row in index_rows(sample_site, "en"):
        facts = sample_oracle.runs[run_id_of(row)]
        figures = [number(text) for text in cells(row)[3:8]]
        assert figures == [
            facts.steps, facts.tool_calls, facts.counts["ok"], facts.counts["failed"], facts.counts["cancelled"]
        ], facts.run


@pytest.mark.parametrize("language", LANGUAGES)
def test_run_index_totals_are_what_the_rows_say(sample_site: Path, sample_oracle: Any, language: str) -> None:
    totals = page(sample_site / language / "index.html").find("p", "outcome-totals")
    shown = {}
    for badge in totals.find_all("span", "outcome"):
        outcome = next(name[8:] for name in badge.classes if name.startswith("outcome-"))
        label, _, count = badge.text().rpartition(" ")
        assert label == LABELS[language][outcome]
        shown[outcome] = number(count, language)
    assert shown == sample_oracle.outcomes


@pytest.mark.parametrize("site_name", ["sample_site", "crafted_site"])
@pytest.mark.parametrize("language", LANGUAGES)
def test_a_run_with_a_failed_call_is_marked_and_one_with_only_cancellations_is_not(
    request: pytest.FixtureRequest, site_name: str, language: str, crafted_input: Path
) -> None:
    site: Path = request.getfixturevalue(site_name)
    rows = read_jsonl(SAMPLE) if site_name == "sample_site" else read_jsonl(crafted_input)
    facts = oracle(rows, SAMPLE_SERVERS).runs
    only_cancelled = [run for run, fact in facts.items() if fact.counts["cancelled"] and not fact.counts["failed"]]
    assert only_cancelled, "the input must hold a run whose only non-ok calls are cancellations"
    for row in index_rows(site, language):
        failed = facts[run_id_of(row)].counts["failed"] > 0
        assert ("run-failed" in row.classes) == failed, run_id_of(row)
        assert (HAS_FAILED_CALL[language] in cells(row)[0]) == failed, run_id_of(row)


# ---------------------------------------------------------------- the timeline


@pytest.mark.parametrize("language", LANGUAGES)
def test_timeline_shows_ok_failed_cancelled_as_three_labelled_states(crafted_site: Path, language: str) -> None:
    rows = timeline(crafted_site, language, "mixed-run")
    badges = [outcome_badge(row) for row in rows]
    states = [state for state, _label in badges]
    assert states == [None, "ok", "failed", "cancelled", "failed", None, None]
    for (state, label), row in zip(badges, rows):
        if state is None:
            assert label == "–"
            continue
        assert label == LABELS[language][state]
        assert row.find("span", f"outcome-{state}").find_all("span", "outcome-mark"), "a mark, not colour alone"
    labelled = {state: label for state, label in badges if state}
    assert len(set(labelled.values())) == 3


def test_timeline_lists_steps_in_sequence_order_when_the_input_is_shuffled(tmp_path: Path) -> None:
    sequences = [0, 1, 2, 3, 9, 10, 11, 100]
    rows = [step("shuffled", sequence, crdate=1_788_000_000 + sequence) for sequence in sequences]
    random.Random(191).shuffle(rows)
    first = write_jsonl(tmp_path / "a.jsonl", rows[:4])
    second = write_jsonl(tmp_path / "b.jsonl", rows[4:])
    build_ok(second, first, "--out", tmp_path / "site", "--lang", "en")
    shown = [int(cells(row)[0]) for row in timeline(tmp_path / "site", "en", "shuffled")]
    assert shown == sequences


@pytest.mark.parametrize("language", LANGUAGES)
def test_run_page_facts_are_what_the_rows_say(crafted_site: Path, language: str) -> None:
    facts = page(crafted_site / language / "runs" / "mixed-run.html").find("dl", "facts")
    values = [norm(node.text()) for node in facts.find_all("dd")]
    # Started, last step, duration, steps, tool calls, then ok / failed / cancelled.
    assert values[3:8] == ["7", "5", "1", "2", "1"]


# ---------------------------------------------------------------- servers


VERDICT_ORDER = ["down", "flaky", "uncertain", "too-few-calls", "reliable"]


def test_servers_are_sorted_worst_verdict_first_then_by_the_wilson_lower_bound(
    crafted_site: Path, crafted_input: Path
) -> None:
    servers = oracle(read_jsonl(crafted_input)).servers
    summary = json.loads((crafted_site / "summary.json").read_text(encoding="utf-8"))["servers"]

    def rank(server: str) -> tuple[int, bool, float, str]:
        ok, failed = servers[server]["ok"], servers[server]["failed"]
        lower = wilson(failed, ok + failed)[0] if ok + failed else 0.0
        return VERDICT_ORDER.index(summary[server]["verdict"]), not ok + failed, -lower, server

    shown = [row[0] for row in server_table(crafted_site, "en")]
    assert shown == sorted(servers, key=rank)
    # A 3-call server with one failure (33 %) does not top a 100-call server with 20 (20 %).
    assert shown.index("bigflaky") < shown.index("tiny")


@pytest.mark.parametrize(
    ("min_calls", "verdicts"),
    [
        # Against the default budget of 5 %: 10 ok calls cannot show that a server stays under
        # it (their interval reaches 28 %), 80 ok of 100 show that it does not.
        pytest.param(
            "5",
            {
                "bigflaky": "flaky",
                "tiny": "too-few-calls",
                "steady": "uncertain",
                "outage": "down",
                "eighth": "uncertain",
                "idle": "too-few-calls",
            },
            id="min-5",
        ),
        pytest.param(
            "10",
            {
                "bigflaky": "flaky",
                "tiny": "too-few-calls",
                "steady": "uncertain",
                "outage": "too-few-calls",
                "eighth": "too-few-calls",
                "idle": "too-few-calls",
            },
            id="min-10",
        ),
        pytest.param(
            "11",
            {
                "bigflaky": "flaky",
                "tiny": "too-few-calls",
                "steady": "too-few-calls",
                "outage": "too-few-calls",
                "eighth": "too-few-calls",
                "idle": "too-few-calls",
            },
            id="min-11",
        ),
    ],
)
def test_verdicts_and_the_minimum_number_of_calls(
    tmp_path: Path, crafted_input: Path, min_calls: str, verdicts: dict[str, str]
) -> None:
    # steady has 10 ok and 50 cancelled calls: the cancelled ones count toward no minimum.
    build_ok(crafted_input, "--out", tmp_path / "site", "--lang", "en", "--min-calls", min_calls)
    document = page(tmp_path / "site" / "en" / "servers" / "index.html")
    shown = {}
    for row in table_rows(document, "servers"):
        verdict = row.find("span", "verdict")
        state = next(name[8:] for name in verdict.classes if name.startswith("verdict-"))
        shown[cells(row)[0]] = state
        assert verdict.text() == {"too-few-calls": "too few calls"}.get(state, state)
    assert shown == verdicts


@pytest.mark.parametrize(
    ("language", "server", "rate"),
    [
        pytest.param("de", "eighth", "12,5 %", id="de-12,5"),
        pytest.param("en", "eighth", "12.5%", id="en-12.5"),
        pytest.param("de", "tiny", "33,3 %", id="de-33,3"),
        pytest.param("en", "bigflaky", "20%", id="en-20"),
        pytest.param("de", "steady", "0 %", id="de-cancelled-not-counted"),
        pytest.param("en", "idle", "–", id="en-only-cancelled-has-no-rate"),
    ],
)
def test_failure_rate_is_formatted_for_the_page_language(
    crafted_site: Path, language: str, server: str, rate: str
) -> None:
    row = next(row for row in server_table(crafted_site, language) if row[0] == server)
    assert row[3] == rate  # the current period: all days, as no server of these rows changed
    own_page = page(crafted_site / language / "servers" / f"{server}.html").find("dl", "facts")
    assert rate in [node.text().split(" (")[0] for node in own_page.find_all("dd")]


def test_cancelled_calls_never_count_against_a_server(crafted_site: Path) -> None:
    rows = {row[0]: row for row in server_table(crafted_site, "en")}
    # verdict, budget, rate, interval, change, calls, ok, failed, cancelled, failed in 0 ms, cancelled
    # share (no Denied column: these rows hold no denial): 50 cancellations and still 0 % failed; only
    # too few calls keep it from "reliable".
    low, high = wilson(0, 10)
    interval = f"{round(low * 100)}% – {round(high * 100, 1)}%"
    assert rows["steady"][1:12] == ["uncertain", "5%", "0%", interval, "–", "60", "10", "0", "50", "0", "83.3%"]


def test_server_page_links_the_runs_where_it_failed_or_was_cancelled(crafted_site: Path) -> None:
    lists = page(crafted_site / "en" / "servers" / "steady.html").find("ul", "run-lists")
    counts = {link.text(): link.attrs["href"] for link in lists.find_all("a")}
    assert counts["Runs with a failed call to steady"] == "steady/failed.html"
    assert "(0)" in lists.text(), "steady never failed"
    cancelled = page(crafted_site / "en" / "servers" / "steady" / "cancelled.html")
    assert [(row.find("a").text(), row.find("a").attrs["href"]) for row in table_rows(cancelled, "runs")] == [
        ("steady-cancelled", "../../runs/steady-cancelled.html")
    ]
    assert cells(table_rows(cancelled, "runs")[0])[-1] == "50"  # its 50 cancelled calls to steady
    failed = page(crafted_site / "en" / "servers" / "bigflaky" / "failed.html")
    assert sorted(row.find("a").text() for row in table_rows(failed, "runs")) == [f"big-{block}" for block in range(10)]


# ---------------------------------------------------------------- problems


@pytest.mark.parametrize(
    ("language", "messages"),
    [
        pytest.param("de", {41: "toolIsError muss ein Wahrheitswert sein, ist aber 'false'",
                            42: "toolIsError ist false, toolOutcome aber 'cancelled'",
                            43: "run fehlt oder ist null"}, id="de"),
        pytest.param("en", {41: "toolIsError must be a boolean, got 'false'",
                            43: "run is missing or null"}, id="en"),
    ],
)
def test_problems_page_lists_every_rejected_row(
    crafted_site: Path, crafted_input: Path, language: str, messages: dict[int, str]
) -> None:
    rows = [cells(row) for row in table_rows(page(crafted_site / language / "problems.html"), "problems")]
    rejected = {int(row[1]): row for row in rows if row[3] in CRAFTED_REJECTED.values()}
    assert {line: row[3] for line, row in rejected.items()} == CRAFTED_REJECTED
    assert all(row[0] == str(crafted_input) for row in rows)
    for line, message in messages.items():
        assert rejected[line][6] == message


@pytest.mark.parametrize(
    ("language", "text"),
    [
        pytest.param("en", "No problems: every row was read and passed every rule.", id="en"),
        pytest.param("de", "Keine Probleme: Jede Zeile wurde gelesen und hat jede Regel erfüllt.", id="de"),
    ],
)
def test_problems_page_says_so_when_there_are_none(tmp_path: Path, language: str, text: str) -> None:
    rows = calls("clean", 1_788_000_000, "mcp_github_list", ["ok", "failed", "cancelled"])
    build_ok(write_jsonl(tmp_path / "rows.jsonl", rows), "--out", tmp_path / "site")
    document = page(tmp_path / "site" / language / "problems.html")
    assert document.find("p", "no-problems").text() == text
    assert not document.find_all("table", "problems")


@pytest.mark.parametrize(
    ("language", "index_phrases", "problems_phrases"),
    [
        pytest.param("en", ["1 run", "1 step", "0 rows rejected"], ["0 rows rejected", "1 warning"], id="en"),
        pytest.param(
            "de", ["1 Lauf", "1 Schritt", "0 Zeilen abgewiesen"], ["0 Zeilen abgewiesen", "1 Warnung"], id="de"
        ),
    ],
)
def test_counts_of_one_are_singular(
    tmp_path: Path, language: str, index_phrases: list[str], problems_phrases: list[str]
) -> None:
    build_ok(write_jsonl(tmp_path / "rows.jsonl", [tool("only", 0, "kb_lookup", None, crdate=1)]),
             "--out", tmp_path / "site")
    for name, phrases in (("index.html", index_phrases), ("problems.html", problems_phrases)):
        lead = page(tmp_path / "site" / language / name).find("p", "lead").text()
        for phrase in phrases:
            assert re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", lead), (phrase, lead)


# ---------------------------------------------------------------- options


@pytest.mark.parametrize(
    ("rows", "options", "exit_code"),
    [
        pytest.param("rejected", ["--strict"], 1, id="strict-rejected"),
        pytest.param("rejected", [], 0, id="rejected"),
        pytest.param("warnings", ["--strict"], 0, id="strict-warnings-only"),
        pytest.param("clean", ["--strict"], 0, id="strict-clean"),
    ],
)
def test_strict_exits_1_on_rejected_rows_and_still_writes_the_site(
    tmp_path: Path, rows: str, options: list[str], exit_code: int
) -> None:
    kept = calls("kept", 1_788_000_000, "mcp_github_list", ["ok"])
    extra = {
        "rejected": [tool("bad", 0, "kb_lookup", "true", crdate=1)],
        "warnings": [tool("flagless", 0, "kb_lookup", None, crdate=1)],
        "clean": [],
    }[rows]
    out = tmp_path / "site"
    result = build(write_jsonl(tmp_path / "rows.jsonl", kept + extra), "--out", out, *options)
    assert result.exit_code == exit_code, result.output
    assert str(out) in result.stderr.strip().splitlines()[-1], "the closing line says where the site is"
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["rows_rejected"] == (1 if rows == "rejected" else 0)
    assert (out / "en" / "runs" / "kept.html").is_file() and (out / "de" / "runs" / "kept.html").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(("language", "other"), [pytest.param("en", "de", id="en"), pytest.param("de", "en", id="de")])
def test_one_language_builds_only_that_language(tmp_path: Path, crafted_input: Path, language: str, other: str) -> None:
    out = tmp_path / "site"
    build_ok(crafted_input, "--out", out, "--lang", language)
    assert not (out / other).exists()
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["languages"] == [language]
    assert (out / language / "index.html").is_file()
    for path in html_pages(out):
        document = page(path)
        assert document.find("html").attrs["lang"] == language, path
        assert not document.find_all("a", "language-switch"), path
        assert not [link for link in hrefs(document) if f"{other}/" in link], path
    assert broken_links(out) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("zone", "said"),
    [pytest.param("UTC", "UTC", id="utc-default"), pytest.param("Europe/Berlin", "Europe/Berlin", id="berlin")],
)
def test_timezone_shifts_shown_times_and_the_page_says_which(
    tmp_path: Path, sample_oracle: Any, zone: str, said: str
) -> None:
    out = tmp_path / "site"
    build_ok("--out", out, *(["--timezone", zone] if zone != "UTC" else []))
    for path in html_pages(out / "de"):
        assert f"Zeiten in {said}" in page(path).find("div", "site-meta").text(), path
    assert f"Times in {said}" in page(out / "en" / "index.html").find("div", "site-meta").text()
    for row in index_rows(out, "de"):
        start = sample_oracle.runs[run_id_of(row)].start
        local = datetime.fromtimestamp(start, timezone.utc).astimezone(ZoneInfo(zone))
        assert cells(row)[1] == local.strftime("%d.%m.%Y, %H:%M:%S")


@pytest.mark.parametrize(
    ("zone", "start", "day"),
    [
        pytest.param("UTC", "29.08.2026, 22:30:05", "29.08.2026", id="utc"),
        pytest.param("Europe/Berlin", "30.08.2026, 00:30:05", "30.08.2026", id="berlin-next-day"),
    ],
)
def test_timezone_moves_a_late_call_to_the_next_day(tmp_path: Path, zone: str, start: str, day: str) -> None:
    rows = [tool("late", 0, "mcp_late_call", True, crdate=1_788_042_605)]  # 2026-08-29 22:30:05 UTC
    build_ok(write_jsonl(tmp_path / "rows.jsonl", rows), "--out", tmp_path / "site", "--lang", "de", "--timezone", zone)
    assert cells(index_rows(tmp_path / "site", "de")[0])[1] == start
    assert timeline(tmp_path / "site", "de", "late")[0].find_all("td")[1].text() == start.split(", ")[1]
    chart = page(tmp_path / "site" / "de" / "servers" / "late.html").find("svg")
    bars = [group.find("title").text() for group in chart.find_all("g")]
    assert bars == [f"{day}: 0 ok, 1 fehlgeschlagen, 0 abgebrochen"]


@pytest.mark.slow
def test_title_is_shown_on_every_page(tmp_path: Path) -> None:
    title = "Incident 4711 – Übersicht"
    out = tmp_path / "site"
    build_ok("--out", out, "--title", title)
    pages = html_pages(out)
    assert len(pages) > 80
    for path in pages:
        document = page(path)
        assert title in document.find("title").text(), path
        heading = document.find_all("div", "site-title") or document.find_all("h1")
        assert heading[0].text() == title, path


# ---------------------------------------------------------------- every page


@pytest.mark.slow
def test_every_page_has_its_language_a_title_and_a_switch_to_the_same_page(
    sample_site: Path, sample_oracle: Any
) -> None:
    root = page(sample_site / "index.html")
    assert root.find("html").attrs["lang"] in LANGUAGES and root.find("title").text()
    choices = root.find("div", "language-choice")
    assert sorted(link.attrs["href"] for link in choices.find_all("a")) == ["de/index.html", "en/index.html"]
    assert "Data from" in root.find("header").text() and "Times in UTC" in root.find("header").text()
    checked = 0
    for language, other in (("en", "de"), ("de", "en")):
        for path in html_pages(sample_site / language):
            document = page(path)
            assert document.find("html").attrs["lang"] == language, path
            assert document.find("title").text(), path
            switches = document.find_all("a", "language-switch")
            assert len(switches) == 1, path
            target = (path.parent / switches[0].attrs["href"]).resolve()
            same = sample_site / other / path.relative_to(sample_site / language)
            assert target == same.resolve() and target.is_file(), path
            checked += 1
    in_english = {path.relative_to(sample_site / "en") for path in html_pages(sample_site / "en")}
    assert in_english == {path.relative_to(sample_site / "de") for path in html_pages(sample_site / "de")}
    runs = len(list((sample_site / "en" / "runs").glob("*.html")))
    assert runs == len(sample_oracle.runs) and checked == 2 * len(in_english) > 2 * (runs + 4)


def broken_links(site: Path) -> list[tuple[str, str]]:
    broken = []
    root = site.resolve()
    for path in html_pages(site):
        for link in hrefs(page(path)):
            if is_external(link) or link.startswith("#"):
                continue
            target = (path.parent / unquote(link.split("#")[0].split("?")[0])).resolve()
            if root not in target.parents or not target.is_file():
                broken.append((path.relative_to(site).as_posix(), link))
    return broken


@pytest.mark.slow
@pytest.mark.parametrize("site_name", ["sample_site", "crafted_site"])
def test_every_relative_link_resolves(request: pytest.FixtureRequest, site_name: str) -> None:
    site: Path = request.getfixturevalue(site_name)
    assert len(html_pages(site)) > 30
    assert broken_links(site) == []


RUNS_FOR_THREE_INDEX_PAGES = 501


@pytest.fixture(scope="module")
def paginated_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("paginated")
    rows = [
        step(f"run-{index:04d}", 0, crdate=1_788_000_000 + 60 * index) for index in range(RUNS_FOR_THREE_INDEX_PAGES)
    ]
    build_ok(write_jsonl(folder / "rows.jsonl", rows), "--out", folder / "site", "--lang", "en")
    return folder / "site"


@pytest.mark.slow
def test_the_paginated_index_links_every_run_exactly_once(paginated_site: Path) -> None:
    index_pages = sorted(path.name for path in (paginated_site / "en").glob("index*.html"))
    assert index_pages == ["index-2.html", "index-3.html", "index.html"]
    links: list[str] = []
    for name in ("index.html", "index-2.html", "index-3.html"):
        document = page(paginated_site / "en" / name)
        links += [row.find("a").attrs["href"] for row in table_rows(document, "runs")]
        pagination = {link.attrs["href"] for link in document.find("nav", "pagination").find_all("a")}
        assert pagination == {"index.html", "index-2.html", "index-3.html"} - {name}
    expected = [f"runs/run-{index:04d}.html" for index in reversed(range(RUNS_FOR_THREE_INDEX_PAGES))]
    assert links == expected  # every run once, newest first across the pages
    assert broken_links(paginated_site) == []


RUNS_PER_PAGE = 10


def test_a_long_index_links_neighbours_first_and_last_and_every_run_is_reached_by_next(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(pages, "RUNS_PER_INDEX_PAGE", RUNS_PER_PAGE)
    runs = 13 * RUNS_PER_PAGE - 4  # 13 pages
    rows = [step(f"run-{index:04d}", 0, crdate=1_788_000_000 + 60 * index) for index in range(runs)]
    build_ok(write_jsonl(tmp_path / "rows.jsonl", rows), "--out", tmp_path / "site", "--lang", "en")
    folder = tmp_path / "site" / "en"
    assert len(list(folder.glob("index*.html"))) == 13
    seen: list[str] = []
    name: str | None = "index.html"
    visited = 0
    while name is not None:
        document = page(folder / name)
        visited += 1
        seen += [row.find("a").attrs["href"] for row in table_rows(document, "runs")]
        nav = document.find("nav", "pagination")
        numbers = [link.text() for link in nav.find_all("a") if "rel" not in link.attrs]
        current = int(nav.find("span", "current").text())
        expected = sorted((({1, 13} | set(range(current - 2, current + 3))) & set(range(1, 14))) - {current})
        assert [int(number) for number in numbers] == expected
        following = [link for link in nav.find_all("a") if link.attrs.get("rel") == "next"]
        name = following[0].attrs["href"] if following else None
    assert visited == 13
    assert seen == [f"runs/run-{index:04d}.html" for index in reversed(range(runs))]
    middle = page(folder / "index-7.html").find("nav", "pagination")
    assert middle.text().count("…") == 2
    assert [link.attrs["href"] for link in middle.find_all("a") if link.attrs.get("rel") == "prev"] == ["index-6.html"]


# ---------------------------------------------------------------- determinism


def test_two_builds_of_the_same_input_are_byte_identical(tmp_path: Path, sample_site: Path) -> None:
    build_ok(SAMPLE, "--servers", ",".join(SAMPLE_SERVERS), "--out", tmp_path / "again")
    assert site_files(tmp_path / "again") == site_files(sample_site)


SERVERS_OPTION = ["--servers", ",".join(SAMPLE_SERVERS)]


def ordered_rows() -> list[dict[str, Any]]:
    """The sample without its flagless steps (their warnings name row numbers), plus ties."""
    rows = [row for row in read_jsonl(SAMPLE) if not (row["kind"] == "tool" and flat(row, "toolIsError") is None)]
    tie = 1_788_000_000
    rows += [tool(f"tie-{name}", 0, f"mcp_tie{name}_get", False, "ok", crdate=tie) for name in "bca"]
    return rows


@pytest.mark.slow
def test_the_order_of_the_input_rows_does_not_change_a_byte(tmp_path: Path) -> None:
    rows = ordered_rows()
    build_ok(write_jsonl(tmp_path / "in-order" / "rows.jsonl", rows), "--out", tmp_path / "a", *SERVERS_OPTION)
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    half = len(shuffled) // 2
    second = write_jsonl(tmp_path / "shuffled" / "second.jsonl", shuffled[half:])
    first = write_jsonl(tmp_path / "shuffled" / "first.jsonl", shuffled[:half])
    build_ok(second, first, "--out", tmp_path / "b", *SERVERS_OPTION)
    assert site_files(tmp_path / "b") == site_files(tmp_path / "a")



def generated_rows(runs: int, seed: int) -> list[dict[str, Any]]:
    """Rows from the repository's seeded export generator."""
    spec = importlib.util.spec_from_file_location("generate_export", REPO / "scripts" / "generate_export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.generate_rows(runs, seed=seed))


PARALLEL_BUILD = """
import os, sys
from nrllm_report.site import parallel as sitebuild
from nrllm_report.cli import main

assert hasattr(sitebuild, "PARALLEL_THRESHOLD"), "sitebuild.PARALLEL_THRESHOLD is gone: update this test"
sitebuild.PARALLEL_THRESHOLD = 10
sitebuild.BATCH_ROWS = 200  # several batches, so that two workers have work to share
parent, forks, fork = os.getpid(), [], os.fork

def counting_fork():
    forks.append(1)
    return fork()

os.fork = counting_fork
try:
    main(sys.argv[1:])
finally:
    if os.getpid() == parent:
        sys.stderr.write(f"forks={len(forks)}\\n")
"""


@pytest.mark.slow
@pytest.mark.parametrize("languages", ["en,de", "de"], ids=["each-worker-a-language", "one-language"])
def test_one_job_and_two_jobs_build_the_same_bytes(tmp_path: Path, languages: str) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", generated_rows(120, seed=3))
    sites, forks = {}, {}
    for jobs in ("1", "2"):
        out = tmp_path / f"site-{jobs}"
        completed = subprocess.run(
            [sys.executable, "-c", PARALLEL_BUILD, "build", str(source), "--out", str(out), "--jobs", jobs,
             "--lang", languages],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )
        assert completed.returncode == 0, completed.stderr
        found = re.search(r"forks=(\d+)", completed.stderr)
        assert found, completed.stderr
        sites[jobs], forks[jobs] = site_files(out), int(found.group(1))
    assert forks["1"] == 0, "one job renders in the one process"
    assert forks["2"] >= 2, "two jobs render in two worker processes: the parallel path ran"
    assert sites["2"] == sites["1"]


# ---------------------------------------------------------------- incremental rebuild

RENDERED_REUSED = re.compile(r"(\d+) run pages rendered, (\d+) reused")


def runs_of(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(row["run"]) for row in rows))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """200 runs, and the same 200 runs with 1 % more: (smaller input, larger input, the added runs)."""
    folder = tmp_path_factory.mktemp("generated")
    rows = generated_rows(202, seed=11)
    runs = runs_of(rows)
    kept = set(runs[:200])
    smaller = write_jsonl(folder / "smaller" / "runs.jsonl", [row for row in rows if row["run"] in kept])
    larger = write_jsonl(folder / "larger" / "runs.jsonl", rows)
    return smaller, larger, runs[200:]


def rendered_and_reused(stderr: str) -> tuple[int, int]:
    found = RENDERED_REUSED.search(stderr)
    assert found, stderr
    return int(found.group(1)), int(found.group(2))


@pytest.mark.slow
def test_an_incremental_rebuild_equals_a_fresh_build(tmp_path: Path, generated: tuple[Path, Path, list[str]]) -> None:
    smaller, larger, added = generated
    out = tmp_path / "site"
    build_ok(smaller, "--out", out)
    incremental = build_ok(larger, "--out", out)
    build_ok(larger, "--out", tmp_path / "fresh")
    assert rendered_and_reused(incremental.stderr) == (2 * len(added), 2 * 200)
    assert site_files(out) == site_files(tmp_path / "fresh")
    assert all((out / language / "runs" / f"{run}.html").is_file() for run in added for language in LANGUAGES)


@pytest.mark.slow
def test_pages_of_runs_that_vanished_are_removed(tmp_path: Path, generated: tuple[Path, Path, list[str]]) -> None:
    smaller, larger, vanished = generated
    out = tmp_path / "site"
    build_ok(larger, "--out", out)
    assert all((out / "en" / "runs" / f"{run}.html").is_file() for run in vanished)
    rebuilt = build_ok(smaller, "--out", out)
    build_ok(smaller, "--out", tmp_path / "fresh")
    assert rendered_and_reused(rebuilt.stderr) == (0, 2 * 200)
    assert not [run for run in vanished for language in LANGUAGES if (out / language / "runs" / f"{run}.html").exists()]
    assert site_files(out) == site_files(tmp_path / "fresh")


@pytest.mark.slow
def test_a_rebuild_with_another_title_renders_every_page_again(
    tmp_path: Path, generated: tuple[Path, Path, list[str]]
) -> None:
    smaller, _larger, _added = generated
    out = tmp_path / "site"
    build_ok(smaller, "--out", out, "--lang", "en")
    retitled = build_ok(smaller, "--out", out, "--lang", "en", "--title", "Another title")
    build_ok(smaller, "--out", tmp_path / "fresh", "--lang", "en", "--title", "Another title")
    assert rendered_and_reused(retitled.stderr) == (200, 0)
    assert site_files(out) == site_files(tmp_path / "fresh")


def test_a_wheel_and_a_checkout_of_the_same_files_key_their_pages_alike(tmp_path: Path) -> None:
    """A wheel copies the templates and catalogs into the package; a checkout keeps them beside it.
    Both layouts of the same files give one version key (so one page key per page, and one marker
    file), whichever of the two layouts this test runs from; a changed template gives another."""
    code_only = shutil.ignore_patterns("templates", "translations", "sample_data", "__pycache__")
    resources = {"templates": resource_path("templates"), "translations": resource_path("translations")}
    checkout, wheel = tmp_path / "checkout", tmp_path / "wheel" / "nrllm_report"
    shutil.copytree(PACKAGE_DIR, checkout / "nrllm_report", ignore=code_only)
    shutil.copytree(PACKAGE_DIR, wheel, ignore=code_only)
    for name, folder in resources.items():
        shutil.copytree(folder, checkout / name)
        shutil.copytree(folder, wheel / name)

    def key_of(package: Path, beside: Path) -> str:
        return parallel.layout_key(package, templates=beside / "templates", translations=beside / "translations")

    as_installed = key_of(wheel, wheel)
    assert key_of(checkout / "nrllm_report", checkout) == as_installed == parallel.version_key()
    (wheel / "templates" / "run.html").write_text("changed", encoding="utf-8")
    assert key_of(wheel, wheel) != as_installed
