"""Valid, near-valid and garbage rows through reader, normalizer, validator and writer.

Whatever the rows: no exception escapes, every row is accounted for
(rows read = valid + rejected), and every rejected row has exactly one error
with a rule code.
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from command_line import invoke
from conftest import read_steps
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nrllm_report.core.model import KNOWN_KINDS, Outcome, Rule, Severity
from nrllm_report.core.schema import Step
from nrllm_report.output.writer import write_records_jsonl, write_records_parquet
from nrllm_report.pipeline import CheckedRows

FUZZ_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BOM = b"\xef\xbb\xbf"

# --- what rows are made of ------------------------------------------------------------------------------------

# JSON's \uXXXX escapes can carry lone surrogates that no UTF-8 output can hold.
LONE_SURROGATES = st.sampled_from(["\ud800", "run-\udfff", "mcp_\udc80_tool"])
texts = st.one_of(
    st.text(max_size=20), st.text(max_size=20), LONE_SURROGATES, st.sampled_from(["", "..", "CON", "<b>", "a/b\\c"])
)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), texts,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)
# Tool steps are what the rules are about, so they come up most.
kinds = st.sampled_from(["tool"] * 8 + sorted(KNOWN_KINDS) + ["thought", "Tool", ""])
tool_names = st.one_of(
    st.sampled_from(["mcp_github_create_issue", "mcp_jira_cloud_search", "mcp_docs-search_q", "read_file", "mcp_"]),
    texts,
)


@st.composite
def tool_fields(draw: st.DrawFn) -> dict[str, Any]:
    """A tool payload as nr-llm writes it: legacy, ADR-191, or without a flag."""
    fields: dict[str, Any] = {"toolName": draw(tool_names)}
    style = draw(st.sampled_from(["legacy", "adr191", "flagless"]))
    if style == "legacy":
        fields["toolIsError"] = draw(st.booleans())
    elif style == "adr191":
        outcome = draw(st.sampled_from(list(Outcome)))
        fields["toolIsError"] = outcome.is_error
        fields["toolOutcome"] = outcome.value
    if draw(st.booleans()):
        fields["toolArguments"] = draw(json_values)
    return fields


@st.composite
def valid_rows(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(kinds.filter(bool))
    payload = draw(tool_fields()) if kind == "tool" else {}
    if kind == "llm":
        payload = {"finishReason": "stop", "promptTokens": draw(st.integers(0, 10_000)), "content": draw(texts)}
    row: dict[str, Any] = {
        "run": draw(st.one_of(st.integers(0, 50), st.text(min_size=1, max_size=12))),
        "sequence": draw(st.integers(0, 30)),
        "kind": kind,
        "round": draw(st.integers(0, 5)),
        draw(st.sampled_from(["duration_ms", "durationMs"])): draw(st.floats(0, 1e6)),
        "crdate": draw(st.integers(0, 2**40)),
    }
    if payload and draw(st.booleans()):  # flatten some keys into columns
        for key in draw(st.lists(st.sampled_from(sorted(payload)), max_size=3, unique=True)):
            if key in ("toolName", "toolIsError", "toolOutcome"):
                row[key] = payload.pop(key) if draw(st.booleans()) else payload[key]
    row["payload"] = json.dumps(payload) if draw(st.booleans()) else payload
    return row


@st.composite
def near_valid_rows(draw: st.DrawFn) -> dict[str, Any]:
    """A valid row with one thing wrong: a key dropped, nulled, or given another value."""
    row = draw(valid_rows())
    payload = row["payload"] if isinstance(row["payload"], dict) else None
    target = payload if payload is not None and draw(st.booleans()) else row
    keys = sorted(target) + ["toolIsError", "toolOutcome", "server", "toolName"] * 2
    key = draw(st.sampled_from(keys))
    change = draw(st.sampled_from(["drop", "null", "value", "near-value", "near-value"]))
    if change == "drop":
        target.pop(key, None)
    elif change == "null":
        target[key] = None
    elif change == "value":
        target[key] = draw(json_values)
    else:
        target[key] = draw(NEAR_VALUES.get(key, json_scalars))
    return row


NEAR_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "toolIsError": st.sampled_from([True, False, "false", "true", 0, 1]),
    "toolOutcome": st.sampled_from([outcome.value for outcome in Outcome] + ["OK", "error", ""]),
    "toolName": tool_names,
    "server": st.sampled_from(["github", "jira_cloud", "", 5]),
    "sequence": st.sampled_from([-1, "3", 3.0, 2**64, True]),
    "run": st.sampled_from(["", 1.5, True, [1], "\ud800"]),
    "kind": kinds,
    "duration_ms": st.sampled_from([-1, float("nan"), float("inf"), "5", 5]),
    "durationMs": st.sampled_from([-1, float("nan"), "5", 5, 0.0]),
    "payload": st.sampled_from(["{", "[]", "null", 5, [], '{"toolIsError": "x"}']),
}


def _line(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")


garbage_lines = st.one_of(
    st.binary(max_size=40),
    json_values.map(_line),
    valid_rows().map(_line).flatmap(lambda line: st.integers(0, len(line)).map(lambda cut: line[:cut])),
    st.sampled_from([b"NaN", b"[]", b"{}", b'"text"', b"\xef\xbb\xbf", b"{" * 3000, b"1" * 5000]),
)
# Two parts rows, two parts near-valid rows, one part garbage.
lines = st.lists(
    st.one_of(valid_rows().map(_line), near_valid_rows().map(_line), valid_rows().map(_line),
              near_valid_rows().map(_line), garbage_lines).map(
        lambda line: line.replace(b"\n", b" ")
    ),
    max_size=12,
)


# --- what must hold for any input --------------------------------------------------------------------------------


def _expected_rows(line_list: list[bytes]) -> int:
    """Non-blank lines; a byte-order mark opens the first line and is not a row."""
    count = 0
    for index, line in enumerate(line_list):
        if index == 0 and line.startswith(BOM):
            line = line[len(BOM):]
        count += bool(line.strip())
    return count


def _assert_accounted_for(steps: list[Step], tally: CheckedRows) -> None:
    assert tally.rows_read == len(steps) + tally.rows_rejected
    errors = [problem for problem in tally.problems if problem.severity is Severity.ERROR]
    assert len(errors) == tally.rows_rejected
    assert len({(problem.input, problem.row) for problem in errors}) == len(errors), "one error per rejected row"
    for problem in tally.problems:
        assert isinstance(problem.rule, Rule)
        assert problem.text()
    warned = [(problem.input, problem.row) for problem in tally.problems if problem.severity is Severity.WARNING]
    assert not set(warned) & {(problem.input, problem.row) for problem in errors}, "warnings only on kept rows"
    assert len(warned) <= len(steps)


def _assert_outputs_can_be_written(steps: list[Step], tally: CheckedRows) -> None:
    json.dumps(tally.to_json(), ensure_ascii=False).encode("utf-8")
    with tempfile.TemporaryDirectory() as folder:
        write_records_jsonl(Path(folder) / "out.jsonl", steps)
        write_records_parquet(Path(folder) / "out.parquet", steps)
        assert pq.read_table(Path(folder) / "out.parquet").num_rows == len(steps)
        written = (Path(folder) / "out.jsonl").read_bytes().split(b"\n")
        assert written.pop() == b""
        assert [json.loads(line)["run"] for line in written] == [step.run for step in steps]


@pytest.mark.slow
@FUZZ_SETTINGS
@given(lines)
def test_json_lines_on_stdin(line_list: list[bytes]) -> None:
    data = b"".join(line + b"\n" for line in line_list)
    steps, tally = read_steps("-", stdin=io.BytesIO(data))
    assert tally.rows_read == _expected_rows(line_list)
    _assert_accounted_for(steps, tally)
    for step in steps:
        assert step.outcome is None or step.outcome.is_error is step.tool_is_error
    _assert_outputs_can_be_written(steps, tally)


@pytest.mark.slow
@FUZZ_SETTINGS
@given(st.lists(st.one_of(valid_rows(), near_valid_rows(), json_values), max_size=12))
def test_json_array_file(records: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.json"
        path.write_text(json.dumps(records), encoding="utf-8")
        steps, tally = read_steps(path)
    assert tally.rows_read == len(records)
    _assert_accounted_for(steps, tally)
    _assert_outputs_can_be_written(steps, tally)


parquet_columns = st.fixed_dictionaries({
    "run": st.one_of(st.none(), st.text(max_size=8)),
    "sequence": st.one_of(st.none(), st.integers(-3, 20)),
    "kind": st.one_of(st.none(), kinds),
    "duration_ms": st.one_of(st.none(), st.floats()),
    "toolIsError": st.one_of(st.none(), st.booleans()),
    "toolOutcome": st.one_of(st.none(), st.sampled_from(["ok", "failed", "cancelled", "error"])),
    "payload": st.one_of(st.none(), json_values.map(json.dumps), st.text(max_size=10)),
})


@pytest.mark.slow
@FUZZ_SETTINGS
@given(st.lists(parquet_columns, min_size=1, max_size=12))
def test_parquet_file(rows: list[dict[str, Any]]) -> None:
    schema = pa.schema([("run", pa.string()), ("sequence", pa.int64()), ("kind", pa.string()),
                        ("duration_ms", pa.float64()), ("toolIsError", pa.bool_()), ("toolOutcome", pa.string()),
                        ("payload", pa.string())])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.parquet"
        try:
            table = pa.Table.from_pylist(rows, schema=schema)
        except UnicodeEncodeError:  # Parquet itself cannot hold a lone surrogate
            return
        pq.write_table(table, path)
        steps, tally = read_steps(path)
    assert tally.rows_read == len(rows)
    _assert_accounted_for(steps, tally)
    _assert_outputs_can_be_written(steps, tally)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(lines)
def test_validate_command_prints_a_report_for_any_input(line_list: list[bytes]) -> None:
    data = b"".join(line + b"\n" for line in line_list)
    result = invoke("validate", "-", "--format", "json", input=data)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 1)
    report = json.loads(result.stdout)
    assert report["rows_read"] == report["rows_valid"] + report["rows_rejected"] == _expected_rows(line_list)
    assert result.exit_code == (1 if report["rows_rejected"] else 0)
