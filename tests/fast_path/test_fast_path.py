"""The columnar fast path gives exactly what the row-by-row checker gives.

``checked_steps`` (one row at a time through ``RowChecker``) is the definition of
the rules; ``check_inputs`` (Arrow batches, falling back row by row) is what the
commands run. For any input the two must keep the same canonical records and
report the same problems at the same rows.

The generated batches have the shapes real exports have (one type per column, the
facts of every step kind, Parquet struct payloads and narrow column types), and
each property test asserts how many of the rows it kept the fast path vouched for:
a property that only ever reached the row checker would hold the two to nothing.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safety.test_fuzz import near_valid_rows, valid_rows

from nrllm_report.check import fastpath as columnar
from nrllm_report.check.checked import CheckedRows, check_inputs, checked_steps
from nrllm_report.check.rows import RowChecker
from nrllm_report.core.model import Outcome, Rule
from nrllm_report.core.schema import CANONICAL_FACTS, CANONICAL_SCHEMA
from nrllm_report.readers import resolve_inputs

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    derandomize=True)  # the shares below are thresholds: the same examples every run
SERVERS = ("jira_cloud", "github")


@dataclass
class Share:
    """Of the rows kept over a property test's examples, how many the fast path vouched for."""

    kept: int = 0
    vouched: int = 0
    examples: int = 0  # examples that kept a row
    reached: int = 0  # examples in which the fast path vouched for at least one row

    def add(self, tally: CheckedRows) -> None:
        # A row the fast path vouched for may still be a later duplicate, found on the whole.
        kept = tally.rows_valid + sum(1 for p in tally.problems if p.rule is Rule.DUPLICATE_STEP)
        self.kept += kept
        self.vouched += tally.rows_fast
        self.examples += kept > 0
        self.reached += tally.rows_fast > 0

    def assert_at_least(self, rows: float, examples: float) -> None:
        assert self.kept and self.vouched >= rows * self.kept, (
            f"the fast path vouched for {self.vouched} of {self.kept} kept rows")
        if os.environ.get("NRLLM_REPORT_SHOW_SHARE"):
            print(f"the fast path: {self.vouched} of {self.kept} kept rows, {self.reached} of {self.examples} examples")
        assert self.reached >= examples * self.examples, (
            f"the fast path took rows in {self.reached} of {self.examples} examples")


def reference(
    names: list[str], stdin: bytes | None = None
) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]], CheckedRows]:
    tally = CheckedRows()
    stream = io.BytesIO(stdin) if stdin is not None else None
    steps = list(checked_steps(resolve_inputs(names, standard_input=stream), RowChecker(SERVERS), tally=tally))
    return [step.to_record() for step in steps], located(tally), tally


def fast(
    names: list[str], stdin: bytes | None = None
) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]], CheckedRows]:
    stream = io.BytesIO(stdin) if stdin is not None else None
    checked = check_inputs(resolve_inputs(names, standard_input=stream), SERVERS)
    in_reading_order = checked.steps.sort_by([("input_index", "ascending"), ("row", "ascending")])
    return in_reading_order.select(CANONICAL_SCHEMA.names).to_pylist(), located(checked.tally), checked.tally


def located(tally: CheckedRows) -> list[tuple[Any, ...]]:
    return sorted((p.input, p.row, p.rule.value, p.text(), p.run, p.sequence) for p in tally.problems)


def assert_same(names: list[str], stdin: bytes | None = None) -> CheckedRows:
    """The commands' reading gives what the row checker gives (a negative zero told from zero too)."""
    expected_records, expected_problems, expected = reference(names, stdin)
    records, problems, tally = fast(names, stdin)
    assert records == expected_records
    assert repr(records) == repr(expected_records)
    assert problems == expected_problems
    assert (tally.rows_read, tally.rows_rejected) == (expected.rows_read, expected.rows_rejected)
    return tally


def numbered(count: int) -> pa.Array:
    """Row numbers 1..count, as a reader gives them for a batch."""
    return pa.array(range(1, count + 1), pa.int64())


def _line(row: Any) -> bytes:
    return json.dumps(row).encode("utf-8").replace(b"\n", b" ")


STEP_FACT_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "finishReason": st.sampled_from(["stop", "tool_calls", "length", ""]),
    "promptTokens": st.integers(0, 2**40), "completionTokens": st.integers(0, 5000),
    "totalTokens": st.integers(0, 2**63 - 1), "decidedBy": st.integers(0, 100),
    "estimatedCost": st.floats(0, 10, allow_nan=False),
    "requestedToolCalls": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["mcp_github_x", "kb"])}),
                                   max_size=3),
    "messagesSent": st.lists(st.fixed_dictionaries({"role": st.just("user")}), max_size=3),
    "toolSpecs": st.lists(st.sampled_from(["mcp_github_x", "kb_lookup"]), max_size=3),
    "toolArtifacts": st.lists(st.fixed_dictionaries({"type": st.just("text")}), max_size=2),
    "droppedSources": st.lists(st.just("snippet#41 deactivated"), max_size=2),
    "approved": st.booleans(),
    "contentRedacted": st.just(True), "contentLength": st.integers(0, 10_000),
}
NEAR_FACT_VALUES = st.sampled_from([-1, "3", 1.5, None, 2**63, [], {}, True])


@st.composite
def with_facts(draw: st.DrawFn, row: dict[str, Any]) -> dict[str, Any]:
    """The row with some of the facts nr-llm writes in its payload, now and then one of a wrong type."""
    payload = row.get("payload")
    if not isinstance(payload, dict):
        return row
    for key in draw(st.lists(st.sampled_from(sorted(STEP_FACT_VALUES)), max_size=5, unique=True)):
        payload[key] = draw(NEAR_FACT_VALUES) if draw(st.integers(0, 9)) == 0 else draw(STEP_FACT_VALUES[key])
    return row


def shaped(row: dict[str, Any], run_as_text: bool, payload_as_text: bool, spelling: str) -> dict[str, Any]:
    """A row as one export writes them all: run and payload each of one type, one duration spelling."""
    row = dict(row)
    run = row.get("run")
    if run_as_text and isinstance(run, int) and not isinstance(run, bool):
        row["run"] = f"run-{run}"
    elif not run_as_text and isinstance(run, str):
        row["run"] = len(run)
    if payload_as_text and isinstance(row.get("payload"), dict):
        row["payload"] = json.dumps(row["payload"])
    elif not payload_as_text and isinstance(row.get("payload"), str):
        try:
            row["payload"] = json.loads(row["payload"])
        except ValueError:
            pass  # a broken payload text stays as it is: a near miss
    for other in ("duration_ms", "durationMs"):
        if other != spelling and other in row and spelling not in row:
            row[spelling] = row.pop(other)
    return row


@st.composite
def export_batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A batch of one export's shape: three parts valid rows with facts, one part near-valid rows."""
    shape = (draw(st.booleans()), draw(st.booleans()), draw(st.sampled_from(["duration_ms", "durationMs"])))
    rows = draw(st.lists(st.one_of(valid_rows(), valid_rows(), valid_rows(), near_valid_rows()), min_size=1,
                         max_size=25))
    return [shaped(draw(with_facts(row)), *shape) for row in rows]


@pytest.mark.slow
def test_json_lines_give_what_the_row_checker_gives() -> None:
    share = Share()

    @SETTINGS
    @given(export_batches())
    def holds(rows: list[dict[str, Any]]) -> None:
        share.add(assert_same(["-"], stdin=b"".join(_line(row) + b"\n" for row in rows)))

    holds()
    share.assert_at_least(rows=0.75, examples=0.9)  # the rest: lone \ud800 escapes, Arrow refuses them


mixed_rows = st.lists(st.one_of(valid_rows(), valid_rows(), valid_rows(), near_valid_rows()), min_size=1, max_size=25)


@pytest.mark.slow
@SETTINGS
@given(mixed_rows)
def test_json_lines_of_mixed_shapes_give_what_the_row_checker_gives(rows: list[dict[str, Any]]) -> None:
    """Runs as numbers beside runs as text, payload objects beside payload texts: rows of the
    block's other shape go to the row checker, each on its own."""
    assert_same(["-"], stdin=b"".join(_line(row) + b"\n" for row in rows))


@pytest.mark.slow
def test_database_dumps_give_what_the_row_checker_gives() -> None:
    share = Share()

    @SETTINGS
    @given(export_batches().map(lambda rows: [shaped(row, True, True, "duration_ms") for row in rows]))
    def holds(rows: list[dict[str, Any]]) -> None:
        share.add(assert_same(["-"], stdin=b"".join(_line(row) + b"\n" for row in rows)))

    holds()
    share.assert_at_least(rows=0.75, examples=0.9)  # the rest: lone \ud800 escapes, Arrow refuses them


# Parquet: one column type per batch, with values that break each rule now and then.
flags = st.one_of(st.none(), st.booleans())
outcome_texts = st.one_of(st.none(), st.sampled_from([o.value for o in Outcome] + ["OK", "error", ""]))


@st.composite
def parquet_rows(draw: st.DrawFn) -> dict[str, Any]:
    """One row in four may break any rule anywhere; the others are as an export writes them."""
    return draw(hostile_parquet_rows() if draw(st.integers(0, 3)) == 0 else plain_parquet_rows())


@st.composite
def hostile_parquet_rows(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["tool", "tool", "tool", "llm", "request", "thought", ""]))
    payload: dict[str, Any] = {}
    for key, values in (
        ("toolName", st.sampled_from(["mcp_jira_cloud_search", "mcp_github_x", "mcp_a_b", "local", "mcp_", "mcp_x"])),
        ("toolIsError", flags),
        ("toolOutcome", outcome_texts),
        ("server", st.sampled_from(["github", "weird<server>", ""])),
        ("promptTokens", st.integers(-2, 5000)),
        ("estimatedCost", st.sampled_from([0.5, -1.0, float("nan"), 0.0, -0.0])),
        (
            "messagesSent",
            st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": st.text(max_size=5)}), max_size=3),
        ),
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
        "duration_ms": draw(st.one_of(st.none(), st.sampled_from([0.0, 12.5, -1.0, -0.0, float("nan"), float("inf")]))),
        "crdate": draw(st.one_of(st.none(), st.integers(-5, 2_000_000_000))),
        "payload": text,
        "toolIsError": draw(flags) if draw(st.integers(0, 4)) == 0 else None,
        "toolOutcome": draw(outcome_texts) if draw(st.integers(0, 4)) == 0 else None,
    }


@st.composite
def plain_parquet_rows(draw: st.DrawFn) -> dict[str, Any]:
    """A valid row of any kind, its facts in a payload text, now and then a flattened flag."""
    kind = draw(st.sampled_from(["tool", "tool", "llm", "request", "approval"]))
    payload: dict[str, Any] = {}
    if kind == "tool":
        payload["toolName"] = draw(st.sampled_from(["mcp_jira_cloud_search", "mcp_github_x", "local"]))
        outcome = draw(st.sampled_from([None, *Outcome]))
        if outcome is not None:
            payload["toolIsError"] = outcome.is_error
            if draw(st.booleans()):
                payload["toolOutcome"] = outcome.value
    else:
        payload = {key: draw(STEP_FACT_VALUES[key]) for key in draw(st.lists(
            st.sampled_from(sorted(STEP_FACT_VALUES)), max_size=5, unique=True))}
    flattened = payload.pop("toolIsError", None) if kind == "tool" and draw(st.booleans()) else None
    return {
        "run": draw(st.sampled_from(["r1", "r2", "R1", "ü"])) + str(draw(st.integers(0, 50))),
        "sequence": draw(st.integers(0, 6)),
        "kind": kind,
        "round": draw(st.one_of(st.none(), st.integers(0, 3))),
        "duration_ms": draw(st.one_of(st.none(), st.sampled_from([0.0, 12.5, 3343.2]))),
        "crdate": draw(st.one_of(st.none(), st.integers(0, 2_000_000_000))),
        "payload": json.dumps(payload),
        "toolIsError": flattened,
        "toolOutcome": None,
    }


PARQUET_SCHEMA = pa.schema([
    ("run", pa.string()), ("sequence", pa.int64()), ("kind", pa.string()), ("round", pa.int64()),
    ("duration_ms", pa.float64()), ("crdate", pa.int64()), ("payload", pa.string()),
    ("toolIsError", pa.bool_()), ("toolOutcome", pa.string()),
])


@pytest.mark.slow
def test_parquet_gives_what_the_row_checker_gives() -> None:
    share = Share()

    @SETTINGS
    @given(st.lists(parquet_rows(), min_size=1, max_size=30))
    def holds(rows: list[dict[str, Any]]) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "rows.parquet"
            pq.write_table(pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA), path)
            share.add(assert_same([str(path)]))

    holds()
    share.assert_at_least(rows=0.9, examples=0.9)


# Parquet as typed writers store it: narrow and unsigned integers, floats of every width,
# decimals, dictionary-encoded text, and the payload as a struct of typed fields.
TYPE_CHOICES = {
    "run": [pa.string(), pa.large_string(), pa.dictionary(pa.int16(), pa.string()), pa.uint64(), pa.int32()],
    "sequence": [pa.int64(), pa.int8(), pa.uint16(), pa.uint64()],
    "round": [pa.int64(), pa.uint8(), pa.int16()],
    "duration_ms": [pa.float64(), pa.float32(), pa.float16(), pa.decimal128(10, 2), pa.int32(), pa.uint64()],
    "crdate": [pa.int64(), pa.uint32(), pa.uint64()],
    "promptTokens": [pa.int64(), pa.int32(), pa.uint64()],
    "estimatedCost": [pa.float64(), pa.float32(), pa.decimal128(12, 6)],
}


@st.composite
def typed_tables(draw: st.DrawFn) -> pa.Table:
    """A batch with a column type drawn for each field, values in and now and then out of their range."""
    count = draw(st.integers(1, 30))
    types = {name: draw(st.sampled_from(choices)) for name, choices in TYPE_CHOICES.items()}
    columns = {name: typed_values(draw, types[name], count, name) for name in ("run", "sequence", "round",
                                                                               "duration_ms", "crdate")}
    columns["kind"] = pa.array(draw(st.lists(st.sampled_from(["llm", "tool", "tool", "thought"]),
                                             min_size=count, max_size=count)))
    payload_fields = {
        "toolName": pa.array(draw(st.lists(st.sampled_from(["mcp_github_x", "mcp_jira_cloud_q", "local", None]),
                                           min_size=count, max_size=count))),
        "toolIsError": pa.array(draw(st.lists(st.sampled_from([True, False, None]), min_size=count, max_size=count))),
        "promptTokens": typed_values(draw, types["promptTokens"], count, "promptTokens"),
        "estimatedCost": typed_values(draw, types["estimatedCost"], count, "estimatedCost"),
        "toolSpecs": pa.array(draw(st.lists(st.one_of(st.none(), st.lists(st.just("kb"), max_size=2)),
                                            min_size=count, max_size=count)), pa.list_(pa.string())),
    }
    columns["payload"] = pa.StructArray.from_arrays(list(payload_fields.values()), names=list(payload_fields))
    return pa.table(columns)


def typed_values(draw: st.DrawFn, type_: pa.DataType, count: int, name: str) -> pa.Array:
    if name == "run":
        values: list[Any] = [f"run-{n}" if _is_text_type(type_) else n
                             for n in draw(st.lists(st.integers(0, 5), min_size=count, max_size=count))]
        if pa.types.is_uint64(type_) and draw(st.booleans()):
            values[0] = 2**63  # past int64: still a run, as its decimal text
    elif pa.types.is_integer(type_):
        top = min(2**type_.bit_width - 1 if pa.types.is_unsigned_integer(type_) else 2 ** (type_.bit_width - 1) - 1,
                  2**64 - 1)
        values = draw(st.lists(st.one_of(st.none(), st.integers(0, min(top, 100)), st.just(top)),
                               min_size=count, max_size=count))
        if name == "sequence":
            values = list(range(count)) if draw(st.integers(0, 3)) else values
    elif pa.types.is_decimal(type_):
        values = [None if n is None else Decimal(n).scaleb(-type_.scale)
                  for n in draw(st.lists(st.one_of(st.none(), st.integers(0, 10**7)), min_size=count, max_size=count))]
    else:
        values = draw(st.lists(st.one_of(st.none(), st.sampled_from([0.0, 1.5, 3343.25, 0.1, -1.0, 65504.0])),
                               min_size=count, max_size=count))
    if pa.types.is_dictionary(type_):
        return pa.array(values, type_.value_type).dictionary_encode()
    return pa.array(values, type_)


def _is_text_type(type_: pa.DataType) -> bool:
    return pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_dictionary(type_)


@pytest.mark.slow
def test_typed_parquet_with_struct_payloads_gives_what_the_row_checker_gives() -> None:
    share = Share()

    @SETTINGS
    @given(typed_tables())
    def holds(table: pa.Table) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "rows.parquet"
            pq.write_table(table, path)
            share.add(assert_same([str(path)]))

    holds()
    share.assert_at_least(rows=0.9, examples=0.9)


def test_the_fast_path_really_takes_clean_batches(tmp_path: Path) -> None:
    """Guards the test above: a clean batch is vouched for whole, not handed back row by row."""
    rows = [
        {"run": "r", "sequence": index, "kind": "tool", "round": 1, "duration_ms": 1.5, "crdate": 1_757_000_000,
         "payload": json.dumps({"toolName": "mcp_jira_cloud_search", "toolIsError": index % 2 == 1}),
         "toolIsError": None, "toolOutcome": None}
        for index in range(50)
    ]
    table = pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA)
    result = columnar.check_batch(table, input_index=0, rows=numbered(table.num_rows), known_servers=SERVERS)
    assert result.unclean == []
    assert result.clean.num_rows == 50
    assert result.clean.column("server").to_pylist() == ["jira_cloud"] * 50
    assert result.clean.column("outcome").to_pylist()[:2] == ["ok", "failed"]


@pytest.mark.slow
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
    result = columnar.check_batch(
        pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA),
        input_index=0,
        rows=numbered(len(rows)),
        known_servers=SERVERS,
    )
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
    result = columnar.check_batch(
        pa.Table.from_pylist(rows, schema=PARQUET_SCHEMA),
        input_index=0,
        rows=numbered(len(rows)),
        known_servers=SERVERS,
    )
    assert result.unclean == [] and result.clean.num_rows == 100


# ---------------------------------------------------------------- issue 10: the allow-list, numbers as text,
# canonical records, CSV and phpMyAdmin. Valid values mostly, so that batches reach Arrow; each
# key now and then of a wrong type, so that both paths refuse it alike.

names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
content_texts = st.one_of(st.text(max_size=12), st.sampled_from(["", "Grüße 😀", "a\nb", "\"quoted\""]))
counts = st.integers(0, 10**6)


# Per key: valid values; values of the right JSON type that break a rule (Arrow reads them, the
# rule refuses them); values of another JSON type (Arrow refuses the batch, the row checker the row).
FACT_VALUES: dict[str, tuple[st.SearchStrategy[Any], list[Any], list[Any]]] = {
    "finishReason": (st.sampled_from(["stop", "tool_calls"]), [], [3]),
    "promptTokens": (counts, [-1], ["12", 1.5]),
    "messagesSentCount": (counts, [-2], ["3", True]),
    "messagesSent": (st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": content_texts}),
                              max_size=3), [], ["text", {"a": 1}]),
    "requestedToolNames": (st.lists(names, max_size=3), [[None], ["a", None]], ["kb_lookup", [1]]),
    "requestedToolCalls": (
        st.lists(st.fixed_dictionaries({"id": st.just("c"), "name": names, "arguments": st.just({"q": "x"})}),
                 max_size=3),
        [[{"id": "c"}], [None], [{"name": None}]], [["odd"], [{"name": 5}], {"name": "x"}]),
    "toolSpecs": (st.lists(names, max_size=3), [[None]], [[{"name": "a", "description": "d"}], [{"x": 1}], "a"]),
    "toolArtifactsCount": (counts, [-3], [2.0]),
    "toolArtifactTypes": (st.lists(st.sampled_from(["text", "table", "image"]), max_size=3), [[None]], [["text", 2]]),
    "toolArtifacts": (st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "file"]),
                                                      "data": content_texts}), max_size=2),
                      [[{"data": "x"}]], ["artifact", [3]]),
    "contentLength": (counts, [-1], ["12"]),
    "thinkingLength": (counts, [], [0.5]),
    "toolResultLength": (counts, [], [False]),
    "content": (content_texts, [], [42, {"parts": []}, ["x"]]),
    "thinking": (content_texts, [], [7]),
    "toolResult": (content_texts, [], [{"error": "x"}]),
    "contentRedacted": (st.booleans(), [], ["true", 1]),
    "droppedSources": (st.lists(st.sampled_from(["snippet#41 deactivated", "tool#3 stale"]), max_size=2),
                       [[None]], ["snippet#41", [1]]),
    "approved": (st.booleans(), [], ["yes"]),
    "decidedBy": (counts, [-1], ["4"]),
}


def _fact_value(draw: st.DrawFn, key: str, type_errors: bool) -> Any:
    valid, refused, other_type = FACT_VALUES[key]
    wrong = refused + (other_type if type_errors else [])
    if wrong and draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(wrong))
    return draw(valid)


@st.composite
def fact_rows(draw: st.DrawFn, type_errors: bool = False) -> dict[str, Any]:
    """A row with a payload of allow-listed and content keys, as nr-llm writes them at any privacy level."""
    keys = draw(st.lists(st.sampled_from(sorted(FACT_VALUES)), max_size=6, unique=True))
    payload = {key: _fact_value(draw, key, type_errors) for key in keys}
    kind = draw(st.sampled_from(["llm", "request", "tool", "dropped", "approval"]))
    if kind == "tool":
        payload.update(toolName="mcp_github_list", toolIsError=False, toolOutcome="ok")
    return {"uid": draw(st.integers(1, 10**6)), "run": draw(st.sampled_from(["r1", "r2"])),
            "sequence": draw(st.integers(0, 40)), "kind": kind, "round": draw(st.integers(0, 4)),
            "duration_ms": draw(st.sampled_from([0.0, 12.5, 4.0])), "crdate": 1_788_000_000,
            "payload": json.dumps(payload, ensure_ascii=False)}


TEXT_NUMBERS = {
    "uid": st.sampled_from(["1", "42", "x1"]),
    "sequence": st.one_of(st.integers(0, 40).map(str), st.sampled_from(["12.5", "", " 3", "1e3", "abc", "-1"])),
    "round": st.sampled_from(["0", "3", "1.0"]),
    "duration_ms": st.sampled_from(["0.00", "4.00", "4", "1234.56", "1e3", "4,00", "-1.00"]),
    "crdate": st.sampled_from(["1788000000", "1788000000.5", "0"]),
}


@st.composite
def fact_batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Rows of facts; in one example in four a key of another JSON type may turn up (the batch then goes
    row by row); some table columns written as text in every row, as PHP and SQL clients write them."""
    type_errors = draw(st.integers(0, 3)) == 0
    rows = draw(st.lists(fact_rows(type_errors), min_size=1, max_size=25))
    for column in draw(st.lists(st.sampled_from(sorted(TEXT_NUMBERS)), unique=True)):
        for row in rows:
            row[column] = draw(TEXT_NUMBERS[column]) if draw(st.integers(0, 5)) == 0 else str(row[column])
    return rows


@pytest.mark.slow
@SETTINGS
@given(fact_batches())
def test_facts_and_numbers_as_text_in_json_lines_give_what_the_row_checker_gives(rows: list[dict[str, Any]]) -> None:
    data = b"".join(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n" for row in rows)
    assert_same(["-"], stdin=data)


@pytest.mark.slow
@SETTINGS
@given(fact_batches())
def test_facts_in_parquet_give_what_the_row_checker_gives(rows: list[dict[str, Any]]) -> None:
    texts = [{key: None if value is None else str(value) for key, value in row.items()} for row in rows]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.parquet"
        pq.write_table(pa.Table.from_pylist(texts, schema=pa.schema([(key, pa.string()) for key in texts[0]])), path)
        assert_same([str(path)])


CSV_COLUMNS = ("uid", "run", "sequence", "kind", "round", "duration_ms", "payload", "crdate")


def _csv_text(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow(["" if row.get(column) is None else str(row[column]) for column in CSV_COLUMNS])
    return out.getvalue()


@pytest.mark.slow
@SETTINGS
@given(fact_batches(), st.sampled_from(["rows.csv", "rows.tsv", "rows.json"]))
def test_facts_in_csv_tsv_and_phpmyadmin_exports_give_what_the_row_checker_gives(
    rows: list[dict[str, Any]], name: str
) -> None:
    texts = [{column: None if row.get(column) is None else str(row[column]) for column in CSV_COLUMNS}
             for row in rows]
    if name == "rows.csv":
        data = _csv_text(texts)
    elif name == "rows.tsv":
        escape = lambda value: "NULL" if value is None else value.replace("\\", "\\\\").replace("\t", "\\t") \
            .replace("\n", "\\n")  # noqa: E731
        data = "".join("\t".join(escape(row[column]) for column in CSV_COLUMNS) + "\n"
                       for row in [dict(zip(CSV_COLUMNS, CSV_COLUMNS))] + texts)
    else:
        data = json.dumps([{"type": "header"}, {"type": "table", "name": "tx_nrllm_agentrun_event", "data": texts}])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(data, encoding="utf-8", newline="")
        assert_same([str(path)])


@st.composite
def canonical_rows(draw: st.DrawFn, type_errors: bool = False) -> dict[str, Any]:
    """A canonical record as ``normalize`` writes it, now and then with a fact that breaks a rule
    (and with ``type_errors`` of another type)."""
    flag = draw(st.sampled_from([None, True, False]))
    outcome = None if flag is None else draw(st.sampled_from(["ok", "failed", "cancelled"] if flag else ["ok"]))
    record: dict[str, Any] = dict.fromkeys(CANONICAL_SCHEMA.names)
    record.update(run=draw(st.sampled_from(["r1", "r2"])), sequence=draw(st.integers(0, 30)), kind="tool", round=1,
                  durationMs=draw(st.sampled_from([0.0, 3.5])), crdate=1_788_000_000, toolName="mcp_github_list",
                  server="github", toolIsError=flag, outcome=outcome,
                  outcomeStated=None if flag is None else draw(st.sampled_from([True, True, False, None])))
    if type_errors and draw(st.integers(0, 9)) == 0:
        record["outcomeStated"] = "yes"
    if draw(st.integers(0, 7)) == 0:
        record["outcome"] = draw(st.sampled_from(["cancelled", "canceled", "ok"]))
    for name, type_ in draw(st.lists(st.sampled_from(sorted(CANONICAL_FACTS.items(), key=str)), max_size=6)):
        value = draw({"int64": counts, "double": st.floats(0, 10), "string": names, "bool": st.booleans()}.get(
            str(type_), st.lists(names, max_size=3)))
        refused = {"int64": [-1], "double": [-2.5], "string": [""], "bool": [False]}.get(str(type_), [[None]])
        wrong = refused + (["3", [1], 2.5] if type_errors else [])
        record[name] = value if draw(st.integers(0, 9)) else draw(st.sampled_from(wrong))
    return record


canonical_batches = st.integers(0, 3).flatmap(
    lambda style: st.lists(canonical_rows(type_errors=style == 0), min_size=1, max_size=25)
)


@pytest.mark.slow
@SETTINGS
@given(canonical_batches)
def test_canonical_records_in_json_lines_give_what_the_row_checker_gives(records: list[dict[str, Any]]) -> None:
    assert_same(["-"], stdin=b"".join(_line(record) + b"\n" for record in records))


@pytest.mark.slow
@SETTINGS
@given(canonical_batches)
def test_canonical_records_in_parquet_give_what_the_row_checker_gives(records: list[dict[str, Any]]) -> None:
    try:
        table = pa.Table.from_pylist(records, schema=CANONICAL_SCHEMA)
    except (pa.ArrowException, TypeError, ValueError):
        return  # a fact of another type has no place in a typed Parquet column
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "records.parquet"
        pq.write_table(table, path)
        assert_same([str(path)])


VALID_FACT_VALUES = {
    "messagesSentCount": counts, "requestedToolNames": st.lists(names, max_size=3),
    "requestedToolCalls": st.lists(st.fixed_dictionaries({"name": names}), max_size=3),
    "toolSpecs": st.lists(names, max_size=3), "toolArtifactsCount": counts,
    "toolArtifacts": st.lists(st.fixed_dictionaries({"type": names}), max_size=2), "contentLength": counts,
    "content": content_texts, "toolResult": content_texts, "contentRedacted": st.booleans(),
    "droppedSources": st.lists(names, max_size=2),
}


@pytest.mark.slow
@SETTINGS
@given(st.lists(st.dictionaries(st.sampled_from(sorted(VALID_FACT_VALUES)), st.none(), max_size=6),
                min_size=1, max_size=30), st.data())
def test_the_fast_path_vouches_for_every_valid_fact(keys: list[dict[str, None]], data: st.DataObject) -> None:
    """Guards the tests above: rows of valid facts reach Arrow and stay there."""
    payloads = [{key: data.draw(VALID_FACT_VALUES[key]) for key in chosen} for chosen in keys]
    rows = [{"run": "r", "sequence": index, "kind": "llm", "payload": json.dumps(payload)}
            for index, payload in enumerate(payloads)]
    result = columnar.check_batch(
        pa.Table.from_pylist(rows), input_index=0, rows=numbered(len(rows)), known_servers=SERVERS
    )
    assert result.unclean == [] and result.clean.num_rows == len(rows)
