"""Privacy: content never reaches a page, the summary or the single-file timeline, whatever key it hides under."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from command_line import invoke
from safety_helpers import FIRST_CRDATE, write_jsonl

# Plain letters and digits: no escaping (HTML, JSON, URL) can disguise it on a page.
MARKER = "Zq7PRIVATEmarker3141"
RUN = "private-run"


def secret(place: str) -> str:
    """The content planted at ``place``: the marker first, so a shortened repr still shows it."""
    return f"{MARKER} planted in {place}: the patient's file, the customer's address"


def nested(place: str) -> dict[str, Any]:
    return {"level1": [{"level2": {"text": secret(place)}}], "note": secret(place)}


def content_rows() -> list[dict[str, Any]]:
    """One valid run whose every content place, and unknown keys at every level, hold the marker."""
    rows: list[dict[str, Any]] = [
        {"run": RUN, "sequence": 0, "kind": "context", "round": 0, "crdate": FIRST_CRDATE,
         "payload": {"messageCount": 2, "futureSecret": nested("context futureSecret"), "content": secret("context")}},
        {"run": RUN, "sequence": 1, "kind": "request", "round": 1, "crdate": FIRST_CRDATE + 1,
         "payload": {
             "messagesSent": [
                 {"role": "system", "content": secret("messagesSent system")},
                 {"role": "user", "content": secret("messagesSent user"), "attachments": [secret("attachment")]},
             ],
             "toolSpecs": [{"name": "mcp_github_create_issue", "description": secret("toolSpecs description")}],
         }},
        {"run": RUN, "sequence": 2, "kind": "llm", "round": 1, "duration_ms": 812.5, "crdate": FIRST_CRDATE + 2,
         "payload": {
             "finishReason": "tool_calls", "promptTokens": 410, "completionTokens": 52, "totalTokens": 462,
             "estimatedCost": 0.0031,
             "content": secret("content"),
             "thinking": secret("thinking"),
             "raw": {"choices": [{"message": {"content": secret("raw")}}], "id": secret("raw id")},
             "requestedToolCalls": [
                 {"id": "call_1", "name": "mcp_github_create_issue",
                  "arguments": {"title": secret("requestedToolCalls arguments"), "body": nested("arguments")}},
                 {"id": "call_2", "name": "kb_lookup", "arguments": json.dumps({"query": secret("arguments as text")})},
             ],
             "futureSecret": nested("llm futureSecret"),
         }},
        {"run": RUN, "sequence": 3, "kind": "tool", "round": 1, "duration_ms": 120.0, "crdate": FIRST_CRDATE + 3,
         "payload": {
             "toolName": "mcp_github_create_issue", "toolIsError": False, "toolOutcome": "ok",
             "toolArguments": {"title": secret("toolArguments"), "labels": [secret("toolArguments list")]},
             "toolResult": secret("toolResult"),
             "toolArtifacts": [{"type": "text", "data": secret("toolArtifacts data")},
                               {"type": "file", "name": "a.txt", "data": nested("artifact")}],
             "futureSecret": secret("tool futureSecret"),
         }},
        {"run": RUN, "sequence": 4, "kind": "tool", "round": 1, "duration_ms": 75.0, "crdate": FIRST_CRDATE + 4,
         "payload": {
             "toolName": "kb_lookup", "toolIsError": True, "toolOutcome": "failed",
             "toolArguments": json.dumps({"query": secret("toolArguments as text")}),
             "toolResult": {"error": secret("toolResult error object")},
         }},
        {"run": RUN, "sequence": 5, "kind": "dropped", "round": 2, "crdate": FIRST_CRDATE + 5,
         # droppedSources ("kind#uid reason") are on nr-llm's allow-list and shown: the plant goes beside them.
         "payload": {"droppedSources": ["tool#12 context_budget"], "droppedContent": secret("dropped content")}},
        {"run": RUN, "sequence": 6, "kind": "approval", "round": 2, "crdate": FIRST_CRDATE + 6,
         "payload": {"approved": True, "decidedBy": 3, "comment": secret("approval comment")}},
        {"run": RUN, "sequence": 7, "kind": "input", "round": 2, "crdate": FIRST_CRDATE + 7,
         "payload": {"answer": secret("input answer")}},
        {"run": RUN, "sequence": 8, "kind": "assembled", "round": 3, "crdate": FIRST_CRDATE + 8,
         "payload": {"messagesSent": [{"role": "user", "content": secret("assembled messages")}],
                     "toolSpecs": ["kb_lookup"]}},
        {"run": RUN, "sequence": 9, "kind": "llm", "round": 3, "duration_ms": 1500.0, "crdate": FIRST_CRDATE + 9,
         "payload": {"finishReason": "stop", "promptTokens": 600, "completionTokens": 90, "totalTokens": 690,
                     "content": secret("final answer"), "thinking": nested("final thinking")}},
    ]
    # Flattened exports: unknown top-level columns beside the known ones, flat and nested.
    rows[3].update(futureColumn=secret("top-level column"), tool_arguments=secret("top-level tool_arguments"),
                   tool_result=secret("top-level tool_result"))
    rows[2].update(content=secret("top-level content"), futureSecret=nested("top-level futureSecret"))
    return rows


def as_json_text(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """As the database stores it: the payload as a string holding JSON."""
    return [{**row, "payload": json.dumps(row["payload"])} for row in rows]


def write_jsonl_input(folder: Path) -> Path:
    return write_jsonl(folder / "export.jsonl", content_rows())


def write_json_array_input(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "export.json"
    path.write_text(json.dumps(as_json_text(content_rows())), encoding="utf-8")
    return path


def write_parquet_input(folder: Path) -> Path:
    """A Parquet export: payload as JSON text, the unknown columns as text columns."""
    rows = as_json_text(content_rows())
    for row in rows:
        for key, value in list(row.items()):
            if isinstance(value, (dict, list)):
                row[key] = json.dumps(value)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "export.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


INPUTS = [
    pytest.param(write_jsonl_input, id="jsonl-payload-object"),
    pytest.param(write_json_array_input, id="json-array-payload-text"),
    pytest.param(write_parquet_input, id="parquet"),
]



def files_with_marker(folder: Path) -> dict[str, str]:
    """Each file under ``folder`` whose bytes hold the marker, with the text around its first one."""
    found = {}
    for path in sorted(folder.rglob("*")):
        data = path.read_bytes() if path.is_file() else b""
        at = data.find(MARKER.encode())
        if at >= 0:
            found[path.relative_to(folder).as_posix()] = data[max(0, at - 80) : at + 60].decode("utf-8", "replace")
    return found


@pytest.mark.parametrize("write_input", INPUTS)
def test_no_content_reaches_any_file_of_the_site_or_the_single_file_timeline(
    tmp_path: Path, write_input: Callable[[Path], Path]
) -> None:
    source = write_input(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()

    built = invoke("build", source, "--out", out / "site", "--jobs", "1")
    timelines = [invoke("timeline", RUN, source, "--out", out / f"timeline-{lang}.html", "--lang", lang)
                 for lang in ("en", "de")]

    assert built.exit_code == 0, built.output
    assert all(result.exit_code == 0 for result in timelines), [result.output for result in timelines]
    summary = json.loads((out / "site" / "summary.json").read_text(encoding="utf-8"))
    assert (summary["rows_read"], summary["rows_rejected"], summary["runs"]) == (10, 0, 1)
    # The run is there, with the metadata it may show: the build did read the rows.
    run_page = (out / "site" / "en" / "runs" / f"{RUN}.html").read_text(encoding="utf-8")
    assert "mcp_github_create_issue" in run_page and "tool_calls" in run_page
    assert (out / "site" / ".nrllm-report-site.json").is_file()
    written = sorted(path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file())
    assert "timeline-en.html" in written and "site/summary.json" in written
    assert files_with_marker(out) == {}
    assert MARKER not in built.output + "".join(result.output for result in timelines)
    assert files_with_marker(tmp_path / "in"), "the marker must be planted in the input"


# --------------------------------------------------------------------------- rejected rows


def rejected(payload: dict[str, Any], kind: str = "tool") -> dict[str, Any]:
    return {"run": "rejected-run", "sequence": 1, "kind": kind, "round": 1, "crdate": FIRST_CRDATE, "payload": payload}


REJECTED_ROWS = [
    pytest.param(
        rejected({"toolName": "kb_lookup", "toolIsError": "false", "toolResult": secret("toolResult"),
                  "toolArguments": {"q": secret("toolArguments")}}),
        "flag-not-boolean", id="flag-not-boolean-beside-content",
    ),
    pytest.param(
        rejected({"toolName": "kb_lookup", "toolIsError": True, "toolOutcome": "ok", "toolResult": secret("result")}),
        "flag-contradicts-outcome", id="contradiction-beside-content",
    ),
    pytest.param(rejected({"content": secret("content")}, kind="llm") | {"sequence": "one"},
                 "bad-type", id="bad-sequence-beside-content"),
    pytest.param(rejected({"messagesSent": secret("messagesSent as a string")}, kind="request"),
                 "bad-type", id="messagesSent-not-a-list"),
    pytest.param(rejected({"messagesSent": 0, "content": secret("content")}, kind="request"),
                 "bad-type", id="messagesSent-a-number-beside-content"),
    pytest.param(rejected({"toolName": "kb_lookup", "toolIsError": False, "toolArtifacts": secret("artifact text")}),
                 "bad-type", id="toolArtifacts-not-a-list"),
    pytest.param(rejected({"finishReason": "stop", "requestedToolCalls": secret("calls as text")}, kind="llm"),
                 "bad-type", id="requestedToolCalls-not-a-list"),
    pytest.param(rejected({}) | {"payload": json.dumps({"content": secret("cut off")})[:-5]},
                 "bad-type", id="payload-text-cut-off"),
    pytest.param(rejected({}) | {"payload": secret("payload is plain text")},
                 "bad-type", id="payload-plain-text"),
]


@pytest.mark.parametrize(("row", "rule"), REJECTED_ROWS)
def test_the_problems_page_names_a_rejected_row_without_echoing_its_content(
    tmp_path: Path, row: dict[str, Any], rule: str
) -> None:
    good = [{"run": "good-run", "sequence": 0, "kind": "llm", "round": 1, "crdate": FIRST_CRDATE,
             "payload": {"finishReason": "stop"}}]
    source = write_jsonl(tmp_path / "in" / "export.jsonl", good + [row])
    out = tmp_path / "site"

    result = invoke("build", source, "--out", out, "--jobs", "1")

    assert result.exit_code == 0, result.output
    problems = (out / "en" / "problems.html").read_text(encoding="utf-8")
    assert f"<code>{rule}</code>" in problems, "the rejected row must be listed with its rule"
    assert files_with_marker(out) == {}
