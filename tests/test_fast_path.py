"""The columnar fast path gives exactly what the row-by-row checker gives.

``checked_steps`` (one row at a time through ``RowChecker``) is the definition of
the rules; ``check_inputs`` (Arrow batches, falling back row by row) is what the
commands run. For any input the two must keep the same canonical records and
report the same problems at the same rows.
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nrllm_report.check import fastpath as columnar
from nrllm_report.check.checked import CheckedRows, check_inputs, checked_steps
from nrllm_report.core.model import Outcome
from nrllm_report.readers import resolve_inputs
from nrllm_report.check.rows import RowChecker
from nrllm_report.core.schema import CANONICAL_SCHEMA
from test_fuzz import near_valid_rows, valid_rows

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SERVERS = ("jira_cloud", "github")


def reference(names: list[str], stdin: bytes | None = None) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]], CheckedRows]:
    tally = CheckedRows()
    stream = io.BytesIO(stdin) if stdin is not None else None
    steps = list(checked_steps(resolve_inputs(names), RowChecker(SERVERS), tally, stream))
    return [step.to_record() for step in steps], located(tally), tally


def fast(names: list[str], stdin: bytes | None = None) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]], CheckedRows]:
    stream = io.BytesIO(stdin) if stdin is not None else None
    checked = check_inputs(resolve_inputs(names), SERVERS, stream)
    in_reading_order = checked.steps.sort_by([("input_index", "ascending"), ("row", "ascending")])
    return in_reading_order.select(CANONICAL_SCHEMA.names).to_pylist(), located(checked.tally), checked.tally


def located(tally: CheckedRows) -> list[tuple[Any, ...]]:
    return sorted((p.input, p.row, p.rule.value, p.text(), p.run, p.sequence) for p in tally.problems)


def assert_same(names: list[str], stdin: bytes | None = None) -> None:
    expected_records, expected_problems, expected = reference(names, stdin)
    records, problems, tally = fast(names, stdin)
    assert records == expected_records
    assert problems == expected_problems
    assert (tally.rows_read, tally.rows_rejected) == (expected.rows_read, expected.rows_rejected)


def _line(row: Any) -> bytes:
    return json.dumps(row).encode("utf-8").replace(b"\n", b" ")


mostly_valid = st.lists(st.one_of(valid_rows(), valid_rows(), valid_rows(), near_valid_rows()), min_size=1, max_size=25)


@SETTINGS
@given(mostly_valid)
def test_json_lines_give_what_the_row_checker_gives(rows: list[dict[str, Any]]) -> None:
    data = b"".join(_line(row) + b"\n" for row in rows)
    assert_same(["-"], stdin=data)


def _as_database_dump(row: dict[str, Any]) -> dict[str, Any]:
    """Rows as one export writes them all: run as text, payload as JSON text, one spelling."""
    row = dict(row)
    if isinstance(row.get("run"), int) and not isinstance(row.get("run"), bool):
        row["run"] = f"run-{row['run']}"
    if isinstance(row.get("payload"), dict):
        row["payload"] = json.dumps(row["payload"])
    if "durationMs" in row:
        row["duration_ms"] = row.pop("durationMs")
    return row


dump_rows = st.lists(
    st.one_of(valid_rows(), valid_rows(), valid_rows(), near_valid_rows()).map(_as_database_dump),
    min_size=1, max_size=25,
)


@SETTINGS
@given(dump_rows)
def test_database_dumps_give_what_the_row_checker_gives(rows: list[dict[str, Any]]) -> None:
    data = b"".join(_line(row) + b"\n" for row in rows)
    assert_same(["-"], stdin=data)


# Parquet: one column type per batch, with values that break each rule now and then.
flags = st.one_of(st.none(), st.booleans())
outcome_texts = st.one_of(st.none(), st.sampled_from([o.value for o in Outcome] + ["OK", "error", ""]))


@st.composite
def parquet_rows(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["tool", "tool", "tool", "llm", "request", "thought", ""]))
    payload: dict[str, Any] = {}
    for key, values in (
        ("toolName", st.sampled_from(["mcp_jira_cloud_search", "mcp_github_x", "mcp_a_b", "local", "mcp_", "mcp_x"])),
        ("toolIsError", flags),
        ("toolOutcome", outcome_texts),
        ("server", st.sampled_from(["github", "weird<server>"])),
        ("promptTokens", st.integers(-2, 5000)),
        ("estimatedCost", st.sampled_from([0.5, -1.0, float("nan"), 0.0])),
        ("messagesSent", st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": st.text(max_size=5)}), max_size=3)),
        ("toolSpecs", st.lists(st.sampled_from(["a", "b"]), max_size=3)),
        ("approved", st.booleans()),
    ):
        if draw(st.integers(0, 3)) == 0:
            payload[key] = draw(values)
    payload_text = draw(st.sampled_from(["object", "object", "object", "broken", "array", "empty", "null", "pretty"]))
    text = {
        "object": json.dumps(payload),
        "pretty": json.dumps(payload, indent=1),
        "broken": "{",
        "array": "[1]",
        "empty": "",
        "null": None,
    }[payload_text]
    return {
        "run": draw(st.sampled_from(["r1", "r2", "R1", "", "ü"])),
        "sequence": draw(st.one_of(st.none(), st.integers(-1, 6))),
        "kind": kind if draw(st.integers(0, 9)) else None,
        "round": draw(st.one_of(st.none(), st.integers(-1, 3))),
        "duration_ms": draw(st.one_of(st.none(), st.sampled_from([0.0, 12.5, -1.0, float("nan"), float("inf")]))),
        "crdate": draw(st.one_of(st.none(), st.integers(-5, 2_000_000_000))),
        "payload": text,
        "toolIsError": draw(flags) if draw(st.integers(0, 4)) == 0 else None,
        "toolOutcome": draw(outcome_texts) if draw(st.integers(0, 4)) == 0 else None,
    }


PARQUET_SCHEMA = pa.schema([
    ("run", pa.string()), ("sequence", pa.int64()), ("kind", pa.string()), ("round", pa.int64()),
    ("duration_ms", pa.float64()), ("crdate", pa.int64()), ("payload", pa.string()),
    ("toolIsError", pa.bool_()), ("toolOutcome", pa.string()),
])


@SETTINGS
@given(st.lists(parquet_rows(), min_size=1, max_size=30))
def test_parquet_gives_what_the_row_checker_gives(rows: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA), path)
        assert_same([str(path)])


def test_the_fast_path_really_takes_clean_batches(tmp_path: Path) -> None:
    """Guards the test above: a clean batch is vouched for whole, not handed back row by row."""
    rows = [
        {"run": "r", "sequence": index, "kind": "tool", "round": 1, "duration_ms": 1.5, "crdate": 1_757_000_000,
         "payload": json.dumps({"toolName": "mcp_jira_cloud_search", "toolIsError": index % 2 == 1}),
         "toolIsError": None, "toolOutcome": None}
        for index in range(50)
    ]
    table = pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA)
    result = columnar.check_batch(table, 0, 1, SERVERS)
    assert result.unclean == []
    assert result.clean.num_rows == 50
    assert result.clean.column("server").to_pylist() == ["jira_cloud"] * 50
    assert result.clean.column("outcome").to_pylist()[:2] == ["ok", "failed"]


@SETTINGS
@given(st.lists(parquet_rows(), min_size=1, max_size=30))
def test_payloads_parsed_in_many_blocks_give_what_the_row_checker_gives(rows: list[dict[str, Any]]) -> None:
    """Arrow parses the payload texts in blocks on its threads; a block boundary changes nothing."""
    original = columnar.PAYLOAD_BLOCK_BYTES
    columnar.PAYLOAD_BLOCK_BYTES = 600  # a few rows a block
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "rows.parquet"
            pq.write_table(pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA), path)
            assert_same([str(path)])
    finally:
        columnar.PAYLOAD_BLOCK_BYTES = original


def test_a_batch_of_many_payload_blocks_is_still_taken_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnar, "PAYLOAD_BLOCK_BYTES", 600)
    rows = [
        {"run": "r", "sequence": index, "kind": "tool", "round": 1, "duration_ms": 1.5, "crdate": 1_757_000_000,
         "payload": json.dumps({"toolName": "mcp_jira_cloud_search", "toolIsError": index % 2 == 1}),
         "toolIsError": None, "toolOutcome": None}
        for index in range(500)
    ]
    result = columnar.check_batch(pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA), 0, 1, SERVERS)
    assert result.unclean == []
    assert result.clean.column("outcome").to_pylist() == ["ok", "failed"] * 250


@pytest.mark.parametrize("line", [b"null", b'{"run":"a"}{"run":"b"}', b"[1]", b"  ", b'"text"'], ids=repr)
def test_lines_arrow_reads_differently_never_reach_it(line: bytes) -> None:
    good = b'{"run":"a","sequence":0,"kind":"llm"}'
    assert_same(["-"], stdin=good + b"\n" + line + b"\n" + good.replace(b"0", b"1") + b"\n")


@pytest.mark.parametrize("payload", ["null", "1", '"text"', "[1]", "{}{}", " {} ", ""], ids=repr)
def test_payload_texts_arrow_reads_differently_never_reach_it(tmp_path: Path, payload: str) -> None:
    """Arrow's JSON reader crashes on a first line ``null``: such a payload must not reach it."""
    rows = [{"run": "a", "sequence": index, "kind": "llm", "payload": text}
            for index, text in enumerate([payload, '{"finishReason": "stop"}', payload])]
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert_same([str(path)])


def test_a_payload_longer_than_a_block_does_not_send_its_batch_row_by_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columnar, "PAYLOAD_BLOCK_BYTES", 600)
    rows = [
        {"run": "r", "sequence": index, "kind": "tool", "round": 1, "duration_ms": 1.5, "crdate": 1_757_000_000,
         "payload": json.dumps({"toolName": "mcp_jira_cloud_search", "toolIsError": False,
                                "toolResult": "x" * (5_000 if index == 7 else 10)}),
         "toolIsError": None, "toolOutcome": None}
        for index in range(100)
    ]
    result = columnar.check_batch(pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA), 0, 1, SERVERS)
    assert result.unclean == [] and result.clean.num_rows == 100
