"""Calls nr-llm refused itself (a denied approval, a tool no longer permitted,
an unknown tool, a spent call budget) are recorded as failed in 0 ms. They stay failed; the
server and tool tables and summary.json say how many of the failed calls took 0 ms. Since
issue 20, one an operator's denial explains (the approval step before it) is counted as
denied instead (tests/aggregate/test_denied.py); these rows have no approval steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from site_helpers import SAMPLE, SAMPLE_SERVERS, build_ok, cells, norm, page, read_jsonl, table_rows, write_jsonl

from nrllm_report.site.i18n import translations

SENTENCE = (
    "A failed call that took 0 ms usually never reached the server: nr-llm refused it itself (a tool no longer "
    "permitted, a missing input, an unknown tool or a spent call budget), and it still counts as failed here because "
    "the rows cannot tell it from the server's failure; an operator's denial the rows explain is counted as denied "
    "instead."
)
# Where the site knows no denial (these rows hold none), the sentence it said before denials were told.
SENTENCE_WITHOUT_DENIALS = (
    "A failed call that took 0 ms usually never reached the server: nr-llm refused it itself (an operator's denial, "
    "a tool no longer permitted, an unknown tool or a spent call budget), and it still counts as failed here because "
    "the rows cannot tell it from the server's failure."
)


def call(sequence: int, tool: str, outcome: str, duration_ms: Any) -> dict[str, Any]:
    return {"run": "refusals", "sequence": sequence, "kind": "tool", "round": 1, "duration_ms": duration_ms,
            "crdate": 1_788_000_000 + sequence,
            "payload": {"toolName": tool, "toolIsError": outcome != "ok", "toolOutcome": outcome}}


ROWS = [
    call(0, "mcp_github_create_issue", "failed", 0.0),  # an operator denied the approval
    call(1, "mcp_github_create_issue", "failed", "0.00"),  # as PHP's driver returns a decimal
    call(2, "mcp_github_list", "failed", 1250.0),  # the server failed
    call(3, "mcp_github_list", "ok", 310.0),
    call(4, "mcp_github_list", "cancelled", 0.0),  # cancelled at once: not a failure at all
    call(5, "mcp_jira_search", "failed", None),  # no duration recorded: 0 ms
    call(6, "kb_lookup", "failed", 0.0),  # a local tool: in no server's figures
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("refusals")
    build_ok(write_jsonl(folder / "rows.jsonl", ROWS), "--out", folder / "site")
    return folder / "site"


def test_summary_counts_the_failed_calls_that_took_0ms_per_server(site: Path) -> None:
    servers = json.loads((site / "summary.json").read_text(encoding="utf-8"))["servers"]
    assert {server: (figures["failed"], figures["failed_in_0ms"]) for server, figures in servers.items()} == {
        "github": (3, 2), "jira": (1, 1),
    }
    assert servers["github"]["failure_rate"] == 3 / 4, "they still count as failed"


@pytest.mark.parametrize(("language", "label"), [("en", "Failed in 0 ms"), ("de", "In 0 ms fehlgeschlagen")])
def test_the_server_and_tool_tables_show_them(site: Path, language: str, label: str) -> None:
    servers = page(site / language / "servers" / "index.html")
    headers = [norm(cell.text()) for cell in servers.find("table", "servers").find_all("th")]
    rows = {row[0]: row for row in map(cells, table_rows(servers, "servers"))}
    assert rows["github"][headers.index(label)] == "2"
    server = page(site / language / "servers" / "github.html")
    tool_headers = [norm(cell.text()) for cell in server.find("table", "tools").find_all("th")]
    tools = {row[0]: row for row in map(cells, table_rows(server, "tools"))}
    assert tools["mcp_github_create_issue"][tool_headers.index(label)] == "2"
    assert tools["mcp_github_list"][tool_headers.index(label)] == "0"


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "de"])
def test_the_server_page_says_what_0ms_failures_usually_mean(site: Path, language: str, tmp_path: Path) -> None:
    before = translations(language).gettext(SENTENCE_WITHOUT_DENIALS)
    sentence = translations(language).gettext(SENTENCE)
    assert language == "en" or (sentence != SENTENCE and before != SENTENCE_WITHOUT_DENIALS), "translated into German"
    assert sentence.count(". ") == 0 and sentence.endswith("."), "one sentence"
    text = norm(page(site / language / "servers" / "github.html").text())
    assert norm(before) in text and norm(sentence) not in text
    build_ok("--out", tmp_path / "site")  # the sample: an operator's denial, and its tables
    text = norm(page(tmp_path / "site" / language / "servers" / "github.html").text())
    assert norm(sentence) in text and norm(before) not in text


@pytest.mark.slow
def test_the_samples_denied_approval_is_a_failed_call_of_0ms_counted_as_denied(tmp_path: Path) -> None:
    """Issue 20: the denial explains the 0 ms failure, so it is denied, not among the unexplained ones."""
    rows = read_jsonl(SAMPLE)
    denied = [index for index, row in enumerate(rows)
              if row["kind"] == "approval" and json.loads(row["payload"])["approved"] is False]
    assert denied
    for index in denied:
        refused = rows[index + 1]
        assert (refused["kind"], refused["duration_ms"], json.loads(refused["payload"])["toolIsError"]) == \
            ("tool", 0.0, True)
    build_ok(SAMPLE, "--servers", ",".join(SAMPLE_SERVERS), "--out", tmp_path / "site")  # the events alone
    servers = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))["servers"]
    assert sum(figures["denied"] for figures in servers.values()) == len(denied)
    assert sum(figures["failed_in_0ms"] for figures in servers.values()) == 0, "the sample's only ones are denials"
