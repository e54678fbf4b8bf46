"""Every export shape of domain.md reads into the same steps."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import check_rows, jsonl_bytes, parquet_table, problem_summary, read_steps

from nrllm_report.core.model import Outcome

RUN_A = "0b6c3f0e-2f43-4c4b-9d51-7a0a3c2b9e01"
RUN_B = "5d1e8a77-90a4-4a4e-8f0b-2c6f1b7d3e42"

# Legacy and ADR-191 tool rows, a cancelled call, an llm step, a flagless tool step.
ROWS: list[dict[str, Any]] = [
    {"run": RUN_A, "sequence": 0, "kind": "context", "round": 0, "duration_ms": 0.0, "crdate": 1_788_000_000,
     "payload": {}},
    {"run": RUN_A, "sequence": 1, "kind": "llm", "round": 1, "duration_ms": 812.25, "crdate": 1_788_000_001,
     "payload": {"finishReason": "tool_calls", "promptTokens": 900, "completionTokens": 40, "totalTokens": 940}},
    {"run": RUN_A, "sequence": 2, "kind": "tool", "round": 1, "duration_ms": 120.5, "crdate": 1_788_000_002,
     "payload": {"toolName": "mcp_github_create_issue", "toolIsError": True}},
    {"run": RUN_B, "sequence": 0, "kind": "tool", "round": 1, "duration_ms": 33.0, "crdate": 1_788_100_000,
     "payload": {"toolName": "mcp_jira_cloud_search", "toolIsError": True, "toolOutcome": "cancelled"}},
    {"run": RUN_B, "sequence": 1, "kind": "tool", "round": 2, "duration_ms": 5.75, "crdate": 1_788_100_001,
     "payload": {"toolName": "read_file"}},
]

EXPECTED_STEPS = [result.step for result in check_rows(*ROWS)]


def _key(step: Any) -> tuple[str, int]:
    return step.run, step.sequence


def test_reference_rows_are_what_the_shapes_must_give() -> None:
    assert [step.outcome for step in EXPECTED_STEPS if step.kind == "tool"] == [
        Outcome.FAILED, Outcome.CANCELLED, None,
    ]


def _dataset(tmp_path: Path, name: str, partition_cols: list[str]) -> Path:
    root = tmp_path / name
    pq.write_to_dataset(parquet_table(ROWS), root, partition_cols=partition_cols)
    return root


SHAPES = ["rows.json", "rows.json.gz", "rows.jsonl", "rows.jsonl.gz", "rows.ndjson", "rows.ndjson.gz",
          "rows.parquet", "rows.pq", "ROWS.JSONL", "export.JSON.GZ"]


@pytest.mark.parametrize("name", SHAPES)
def test_every_file_shape_reads_into_the_same_steps(write_rows: Callable[..., Path], name: str) -> None:
    path = write_rows(name, ROWS)
    steps, tally = read_steps(path)
    assert steps == EXPECTED_STEPS
    assert (tally.rows_read, tally.rows_rejected) == (5, 0)
    assert problem_summary(tally.problems) == [(str(path), 5, "tool-step-without-flag")]


@pytest.mark.parametrize("partition_cols", [["run"], ["kind"], ["run", "kind"]], ids="-".join)
def test_hive_partitioned_folder_reads_into_the_same_steps(tmp_path: Path, partition_cols: list[str]) -> None:
    root = _dataset(tmp_path, "export", partition_cols)
    assert not list(root.glob("*.parquet")), "the partition columns must live in the folder names"
    steps, tally = read_steps(root)
    assert sorted(steps, key=_key) == sorted(EXPECTED_STEPS, key=_key)
    assert (tally.rows_read, tally.rows_rejected) == (5, 0)


def test_folder_of_plain_parquet_files_ignores_hidden_and_underscore_entries(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    root.mkdir()
    pq.write_table(parquet_table(ROWS[:3]), root / "part-0.parquet")
    pq.write_table(parquet_table(ROWS[3:]), root / "part-1.parquet")
    (root / "_SUCCESS").write_bytes(b"")
    (root / ".part-0.parquet.crc").write_bytes(b"\x00garbage")
    (root / "_temporary").mkdir()
    (root / "_temporary" / "part-9.parquet").write_bytes(b"not parquet")
    steps, tally = read_steps(root)
    assert steps == EXPECTED_STEPS
    assert tally.rows_read == 5


def test_folder_rows_are_numbered_across_its_files(tmp_path: Path) -> None:
    root = tmp_path / "dataset"
    root.mkdir()
    pq.write_table(parquet_table(ROWS[:3]), root / "part-0.parquet")
    broken = [ROWS[3], {**ROWS[4], "sequence": -1}]
    pq.write_table(parquet_table(broken), root / "part-1.parquet")
    _, tally = read_steps(root)
    assert problem_summary(tally.problems) == [(str(root), 5, "bad-type")]


def test_stdin_reads_json_lines() -> None:
    steps, tally = read_steps("-", stdin=io.BytesIO(jsonl_bytes(ROWS)))
    assert steps == EXPECTED_STEPS
    assert tally.problems[0].input == "-"


def test_several_inputs_are_read_in_order_and_counted_together(write_rows: Callable[..., Path]) -> None:
    first = write_rows("a.jsonl", ROWS[:3])
    second = write_rows("b.parquet", ROWS[3:])
    third = io.BytesIO(jsonl_bytes([{**ROWS[0], "run": "other"}]))
    steps, tally = read_steps(first, second, "-", stdin=third)
    assert [_key(step) for step in steps] == [_key(step) for step in EXPECTED_STEPS] + [("other", 0)]
    assert tally.rows_read == 6
    assert problem_summary(tally.problems) == [(str(second), 2, "tool-step-without-flag")]


def test_a_step_repeated_in_a_second_input_is_a_duplicate_there(write_rows: Callable[..., Path]) -> None:
    first = write_rows("a.jsonl", ROWS)
    second = write_rows("b.json", [ROWS[2]])
    steps, tally = read_steps(first, second)
    assert len(steps) == 5
    assert problem_summary(p for p in tally.problems if p.rule.value == "duplicate-step") == [
        (str(second), 1, "duplicate-step"),
    ]


# --- spellings, payload forms, flattened columns, run ids --------------------------------------


def _one_step(write_rows: Callable[..., Path], name: str, row: Any) -> Any:
    steps, tally = read_steps(write_rows(name, [row]))
    assert tally.rows_rejected == 0, tally.problems
    return steps[0]


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.parquet"])
@pytest.mark.parametrize(
    "spelling",
    [{"duration_ms": 120.5}, {"durationMs": 120.5}, {"duration_ms": 120.5, "durationMs": 120.5}],
    ids=["snake", "camel", "both-agree"],
)
def test_both_spellings_of_the_duration(write_rows: Callable[..., Path], name: str, spelling: dict) -> None:
    row = {key: value for key, value in ROWS[2].items() if key != "duration_ms"} | spelling
    assert _one_step(write_rows, name, row) == EXPECTED_STEPS[2]


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(ROWS[3]["payload"], id="object"),
        pytest.param(json.dumps(ROWS[3]["payload"]), id="json-text"),
        pytest.param(json.dumps(ROWS[3]["payload"], indent=2), id="pretty-json-text"),
    ],
)
def test_payload_as_object_or_as_json_text(write_rows: Callable[..., Path], payload: Any) -> None:
    assert _one_step(write_rows, "rows.jsonl", {**ROWS[3], "payload": payload}) == EXPECTED_STEPS[3]


FLATTENED = {"toolName": "mcp_jira_cloud_search", "toolIsError": True, "toolOutcome": "cancelled"}


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json", "rows.parquet"])
@pytest.mark.parametrize(
    "payload", [None, {}, "{}", ROWS[3]["payload"]], ids=["no-payload", "empty-object", "empty-text", "payload-agrees"]
)
def test_flattened_tool_columns(write_rows: Callable[..., Path], name: str, payload: Any) -> None:
    row = {**ROWS[3], **FLATTENED, "payload": payload}
    if name.endswith(".parquet") and payload is not None:
        row["payload"] = payload if isinstance(payload, str) else json.dumps(payload)
    assert _one_step(write_rows, name, row) == EXPECTED_STEPS[3]


def test_flattened_server_column_names_the_server(write_rows: Callable[..., Path]) -> None:
    row = {**ROWS[2], "server": "github-enterprise", "toolName": "mcp_github_create_issue"}
    step = _one_step(write_rows, "rows.parquet", row)
    assert (step.server, step.outcome) == ("github-enterprise", Outcome.FAILED)


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.parquet"])
@pytest.mark.parametrize(
    ("run", "expected"),
    [(4711, "4711"), (0, "0"), (RUN_A, RUN_A), (RUN_A.upper(), RUN_A.upper())],
    ids=["uid", "uid-zero", "uuid", "uuid-upper-case"],
)
def test_run_as_number_or_uuid(write_rows: Callable[..., Path], name: str, run: Any, expected: str) -> None:
    assert _one_step(write_rows, name, {**ROWS[1], "run": run}).run == expected


# --- Parquet column types as pandas, DuckDB and SQL clients write them ----------------------------


def test_parquet_payload_struct_column_reads_like_an_object(tmp_path: Path) -> None:
    payload_type = pa.struct([
        ("toolName", pa.string()), ("toolIsError", pa.bool_()), ("toolOutcome", pa.string()),
        ("finishReason", pa.string()), ("promptTokens", pa.int64()), ("completionTokens", pa.int64()),
        ("totalTokens", pa.int64()),
    ])
    table = pa.Table.from_pylist(ROWS, schema=pa.schema([
        ("run", pa.string()), ("sequence", pa.int64()), ("kind", pa.string()), ("round", pa.int32()),
        ("duration_ms", pa.float64()), ("crdate", pa.int64()), ("payload", payload_type),
    ]))
    pq.write_table(table, tmp_path / "struct.parquet")
    steps, tally = read_steps(tmp_path / "struct.parquet")
    assert steps == EXPECTED_STEPS
    assert tally.rows_rejected == 0


def test_parquet_decimal_duration_and_narrow_ints(tmp_path: Path) -> None:
    table = pa.table({
        "run": pa.array([7], pa.int32()),
        "sequence": pa.array([2], pa.uint16()),
        "kind": pa.array(["tool"]).dictionary_encode(),
        "round": pa.array([1], pa.int8()),
        "duration_ms": pa.array([Decimal("120.50")], pa.decimal128(10, 2)),
        "crdate": pa.array([1_788_000_002], pa.uint32()),
        "payload": pa.array([json.dumps(ROWS[2]["payload"]).encode()], pa.binary()),
    })
    pq.write_table(table, tmp_path / "typed.parquet")
    steps, tally = read_steps(tmp_path / "typed.parquet")
    assert tally.rows_rejected == 0, tally.problems
    assert (steps[0].run, steps[0].sequence, steps[0].round, steps[0].duration_ms, steps[0].outcome) == (
        "7", 2, 1, 120.5, Outcome.FAILED,
    )


def test_parquet_null_cells_count_as_absent(tmp_path: Path) -> None:
    rows = [{**ROWS[2], "round": None, "duration_ms": None, "crdate": None}, ROWS[3]]
    pq.write_table(parquet_table(rows), tmp_path / "nulls.parquet")
    steps, tally = read_steps(tmp_path / "nulls.parquet")
    assert tally.rows_rejected == 0
    assert (steps[0].round, steps[0].duration_ms, steps[0].crdate) == (0, 0.0, None)


@pytest.mark.slow
def test_parquet_is_read_in_batches_without_losing_rows(tmp_path: Path) -> None:
    count = 70_000
    table = pa.table({
        "run": pa.array([f"r{index // 10}" for index in range(count)]),
        "sequence": pa.array([index % 10 for index in range(count)], pa.int64()),
        "kind": pa.array(["context"] * count),
    })
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=20_000)
    steps, tally = read_steps(tmp_path / "big.parquet")
    assert (len(steps), tally.rows_read, tally.rows_rejected) == (count, count, 0)


# --- row numbers are where the user looks ----------------------------------------------------------


def test_json_lines_rows_are_numbered_by_line_blank_lines_included(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([ROWS[0], "", "   ", {**ROWS[1], "sequence": "1.5"}]))
    _, tally = read_steps(path)
    assert problem_summary(tally.problems) == [(str(path), 4, "bad-type")]
    assert tally.rows_read == 2


def test_json_array_rows_are_numbered_by_record(write_rows: Callable[..., Path]) -> None:
    path = write_rows("rows.json", [ROWS[0], ROWS[1], 17, {**ROWS[2], "kind": None}])
    _, tally = read_steps(path)
    assert problem_summary(tally.problems) == [(str(path), 3, "unreadable-row"), (str(path), 4, "missing-field")]


def test_a_json_file_holding_json_lines_is_read_as_lines(tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_bytes(jsonl_bytes(ROWS))
    steps, _ = read_steps(path)
    assert steps == EXPECTED_STEPS


def test_gzip_of_json_lines_is_streamed_line_by_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl_bytes([ROWS[0], "{broken", ROWS[1]])))
    steps, tally = read_steps(path)
    assert [step.sequence for step in steps] == [0, 1]
    assert problem_summary(tally.problems) == [(str(path), 2, "unreadable-row")]


# ---------------------------------------------------------------- the registry and standard input

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def _reference_shapes() -> list[str]:
    """The first column of the reference's table of input shapes (docs/reference.md, its Input section)."""
    table = REFERENCE.read_text(encoding="utf-8").split("\n## Input\n", 1)[1].split("\n| shape |", 1)[1]
    rows = table.split("\n\n", 1)[0].splitlines()[2:]  # after the header's rest and the rule under it
    return [row.split(" | ")[0].removeprefix("| ").split(" (")[0] for row in rows]


def _shape_inputs(tmp_path: Path) -> dict[str, list[tuple[str, Any]]]:
    """For each shape the reference lists, inputs of it (name, stream for stdin) and the reader each must get."""
    from nrllm_report.readers import registry

    for name in ("rows.jsonl", "rows.jsonl.gz", "rows.ndjson", "rows.ndjson.gz", "rows.json", "rows.json.gz",
                 "rows.parquet", "rows.pq", "canonical.parquet"):
        lower, data = name.lower(), json.dumps(ROWS).encode() if ".json." in name + "." else jsonl_bytes(ROWS)
        if lower.endswith((".parquet", ".pq")):
            pq.write_table(parquet_table(ROWS), tmp_path / name)
        else:
            (tmp_path / name).write_bytes(gzip.compress(data) if lower.endswith(".gz") else data)
    export = [{"type": "header", "version": "5.2.1"}, {"type": "database", "name": "typo3"},
              {"type": "table", "name": "tx_nrllm_agentrun_event", "data": []}]
    (tmp_path / "export.json").write_text(json.dumps(export), encoding="utf-8")
    (tmp_path / "export.json.gz").write_bytes(gzip.compress(json.dumps(export).encode()))
    for name in ("rows.csv", "rows.csv.gz", "rows.tsv", "rows.tsv.gz"):
        text = "run,sequence,kind\n7,0,llm\n".replace(",", "\t" if ".tsv" in name else ",").encode()
        (tmp_path / name).write_bytes(gzip.compress(text) if name.endswith(".gz") else text)
    pq.write_to_dataset(parquet_table(ROWS), tmp_path / "dataset", partition_cols=["kind"])
    (tmp_path / "canonical.jsonl").write_bytes(jsonl_bytes(ROWS))
    return {
        "JSON Lines": [(str(tmp_path / name), registry.JsonLinesReader)
                       for name in ("rows.jsonl", "rows.jsonl.gz", "rows.ndjson", "rows.ndjson.gz")]
        + [("-", registry.JsonLinesReader)],
        "JSON array": [(str(tmp_path / name), registry.JsonArrayReader) for name in ("rows.json", "rows.json.gz")],
        "phpMyAdmin's JSON export": [(str(tmp_path / name), registry.PhpMyAdminReader)
                                     for name in ("export.json", "export.json.gz")],
        "CSV": [(str(tmp_path / name), registry.CsvReader) for name in ("rows.csv", "rows.csv.gz")],
        "TSV as `mysql --batch` writes it": [(str(tmp_path / name), registry.TsvReader)
                                             for name in ("rows.tsv", "rows.tsv.gz")],
        "Parquet": [(str(tmp_path / "rows.parquet"), registry.ParquetReader),
                    (str(tmp_path / "rows.pq"), registry.ParquetReader),
                    (str(tmp_path / "dataset"), registry.ParquetFolderReader)],
        "canonical records": [(str(tmp_path / "canonical.jsonl"), registry.JsonLinesReader),
                              (str(tmp_path / "canonical.parquet"), registry.ParquetReader)],
    }


def test_the_registry_names_one_reader_for_each_shape_the_reference_lists(tmp_path: Path) -> None:
    from nrllm_report.readers import READERS, resolve_input

    shapes = _shape_inputs(tmp_path)
    assert list(shapes) == _reference_shapes()
    for shape, inputs in shapes.items():
        for name, expected in inputs:
            reader = resolve_input(name).reader
            assert type(reader) is expected, (shape, name, reader)
    # Every suffix is one reader's, but a .json file's, which the content tells (phpMyAdmin's or an array).
    for suffix in READERS.suffixes():
        named = READERS.named(Path(f"x{suffix}"))
        assert len(named) == (2 if suffix in (".json", ".json.gz") else 1), (suffix, named)


STDIN_BYTES = [
    jsonl_bytes(ROWS),
    b"\xef\xbb\xbf" + jsonl_bytes(ROWS[:2]) + b"\n\nnot json\n" + b'{"run": "\xff", "sequence": 0}\n'
    + jsonl_bytes(ROWS[2:]),
    b"",
    b"[1, 2]\n" + jsonl_bytes(ROWS).rstrip(b"\n"),
]


@pytest.mark.parametrize("data", STDIN_BYTES, ids=["rows", "bom-blank-bad-lines", "empty", "no-final-newline"])
def test_standard_input_reads_like_a_file_of_the_same_bytes(tmp_path: Path, data: bytes) -> None:
    from nrllm_report.readers import resolve_input

    path = tmp_path / "rows.jsonl"
    path.write_bytes(data)
    from_file, from_stdin = resolve_input(str(path)), resolve_input("-", standard_input=io.BytesIO(data))
    assert type(from_file.reader) is type(from_stdin.reader)
    assert repr(list(from_stdin.rows())) == repr(list(from_file.rows()))
    steps, tally = read_steps("-", stdin=io.BytesIO(data))
    file_steps, file_tally = read_steps(path)
    assert steps == file_steps
    assert [(problem.row, problem.rule, problem.text()) for problem in tally.problems] == [
        (problem.row, problem.rule, problem.text()) for problem in file_tally.problems]
    assert {problem.input for problem in tally.problems} <= {"-"}
    for run in (RUN_A, RUN_B, "other"):
        run_rows = [chunk.rows for chunk in resolve_input("-", standard_input=io.BytesIO(data)).run_rows(run)]
        assert repr(run_rows) == repr([chunk.rows for chunk in from_file.run_rows(run)])


def test_standard_input_that_is_not_there_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from nrllm_report.core.errors import InputError
    from nrllm_report.readers import resolve_input

    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(InputError, match="standard input is not available"):
        list(resolve_input("-").chunks())
