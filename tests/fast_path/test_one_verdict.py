"""One verdict per row, whichever path reads it, beside any neighbours, in any container.

The row checker (``checked_steps``, one raw row at a time) is the definition of the
rules; the commands read batches through the Arrow fast path. Each numbered case of
the issue is a test through the command line, the tracebacks as real processes.
"""

from __future__ import annotations

import gzip
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from command_line import invoke, run_cli
from conftest import jsonl_bytes, read_steps

from nrllm_report.check.checked import check_inputs
from nrllm_report.check.one_run import concerns_run
from nrllm_report.core.schema import CANONICAL_SCHEMA
from nrllm_report.readers import resolve_inputs

GOOD = b'{"run":"a","sequence":0,"kind":"llm"}'
FILLER_ROWS = 60  # valid neighbours: enough for a batch the fast path takes


def filler(count: int = FILLER_ROWS) -> list[bytes]:
    """Valid lines of other runs, as most of any real batch is."""
    return [json.dumps({"run": f"filler-{index}", "sequence": 0, "kind": "llm",
                        "payload": {"finishReason": "stop", "promptTokens": index}}).encode()
            for index in range(count)]


def validate_json(*args: Any) -> dict[str, Any]:
    """``validate --format json`` in-process; a traceback fails the test."""
    result = invoke("validate", *args, "--format", "json")
    assert result.exit_code in (0, 1), result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def rules_by_row(report: dict[str, Any]) -> dict[int, str]:
    return {problem["row"]: problem["rule"] for problem in report["problems"]}


def assert_one_verdict(path: Path) -> int:
    """The commands' reading of ``path`` (fast path first) gives what the row checker gives;
    returns how many rows the fast path vouched for."""
    reference_steps, reference = read_steps(path)
    checked = check_inputs(resolve_inputs([str(path)]), [])
    records = checked.steps.sort_by([("input_index", "ascending"), ("row", "ascending")])
    assert records.select(CANONICAL_SCHEMA.names).to_pylist() == [step.to_record() for step in reference_steps]
    assert sorted((p.row, p.rule.value, p.text()) for p in checked.tally.problems) == sorted(
        (p.row, p.rule.value, p.text()) for p in reference.problems)
    return checked.tally.rows_fast


def assert_no_traceback(completed: Any) -> None:
    assert "Traceback" not in completed.stderr + completed.stdout, completed.stderr
    assert completed.returncode in (0, 1), completed.stderr


def unchecked_strings(values: list[bytes | None]) -> pa.Array:
    """A string column holding bytes as they are, valid UTF-8 or not, as another Parquet writer may."""
    return pa.array(values, pa.binary()).view(pa.string())


# ---------------------------------------------------------------- 1. invalid UTF-8: a traceback before


NOT_UTF8_LINES = [
    pytest.param(b'{"run":"b\xff","sequence":1,"kind":"llm"}', id="in-run"),
    pytest.param(b'{"run":"b","sequence":1,"kind":"ll\xff"}', id="in-kind"),
    pytest.param(b'{"run":"b","sequence":1,"kind":"tool","payload":{"toolName":"mcp_x_\xff","toolIsError":false}}',
                 id="in-toolName"),
    pytest.param(b'{"run":"b","sequence":1,"kind":"llm","note":"\xff"}', id="in-a-key-nobody-reads"),
    pytest.param(b'{"run":"b","sequence":1,"kind":"\xed\xa0\x80"}', id="an-encoded-surrogate"),
]


@pytest.mark.parametrize("line", NOT_UTF8_LINES)
def test_1_a_line_that_is_not_utf8_is_unreadable_for_validate(tmp_path: Path, line: bytes) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([GOOD, line]))
    completed = run_cli("validate", path)
    assert_no_traceback(completed)
    assert f"{path}:2: unreadable-row: the line is not valid UTF-8" in completed.stdout
    assert "2 rows read: 1 valid, 1 rejected" in completed.stdout


def test_1_a_one_line_file_with_an_encoded_surrogate_in_kind(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"run":"b","sequence":1,"kind":"\xed\xa0\x80"}\n')
    completed = run_cli("validate", path, "--format", "json")
    assert_no_traceback(completed)
    assert rules_by_row(json.loads(completed.stdout)) == {1: "unreadable-row"}


@pytest.mark.slow
def test_1_normalize_and_build_reject_the_line_and_write_only_utf8(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([GOOD, NOT_UTF8_LINES[0].values[0]]))
    for out in (tmp_path / "out.jsonl", tmp_path / "out.parquet"):
        completed = run_cli("normalize", path, "--out", out)
        assert_no_traceback(completed)
        assert completed.returncode == 1 and f"{path}:2: unreadable-row" in completed.stderr
    assert [json.loads(line)["run"] for line in (tmp_path / "out.jsonl").read_text("utf-8").splitlines()] == ["a"]
    written = pq.read_table(tmp_path / "out.parquet")
    written.validate(full=True)  # every string in it is UTF-8
    assert written.column("run").to_pylist() == ["a"]
    completed = run_cli("build", path, "--out", tmp_path / "site", "--jobs", "1")
    assert_no_traceback(completed)
    summary = json.loads((tmp_path / "site" / "summary.json").read_text("utf-8"))
    assert (summary["rows_read"], summary["rows_rejected"]) == (2, 1)


PARQUET_NOT_UTF8 = [
    pytest.param("run", id="run"),
    pytest.param("kind", id="kind"),
    pytest.param("payload", id="payload-text"),
    pytest.param("note", id="a-column-nobody-reads"),
]


@pytest.mark.slow
@pytest.mark.parametrize("column", PARQUET_NOT_UTF8)
def test_1_a_parquet_string_that_is_not_utf8_makes_its_record_unreadable(tmp_path: Path, column: str) -> None:
    values = {"run": [b"a", b"b"], "kind": [b"llm", b"llm"], "payload": [b"{}", b"{}"], "note": [b"x", b"y"]}
    values[column] = [values[column][0], values[column][1] + b"\xff"]
    table = pa.table({"sequence": pa.array([0, 1]), **{name: unchecked_strings(v) for name, v in values.items()}})
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path)
    for command in (["validate", path, "--format", "json"], ["build", path, "--out", tmp_path / "site"]):
        completed = run_cli(*command)
        assert_no_traceback(completed)
    report = json.loads(run_cli("validate", path, "--format", "json").stdout)
    assert rules_by_row(report) == {2: "unreadable-row"}
    assert column in report["problems"][0]["message"]


def test_1_text_that_is_not_utf8_nested_in_a_struct_payload(tmp_path: Path) -> None:
    payload = pa.StructArray.from_arrays(
        [pa.array(["stop", "stop"]), unchecked_strings([b"fine", b"bad\xff"])], names=["finishReason", "content"])
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"run": ["a", "b"], "sequence": [0, 1], "kind": ["llm", "llm"], "payload": payload}), path)
    completed = run_cli("validate", path, "--format", "json")
    assert_no_traceback(completed)
    assert rules_by_row(json.loads(completed.stdout)) == {2: "unreadable-row"}


# ---------------------------------------------------------------- 2. Parquet values Arrow could not cast


def parquet_and_jsonl(tmp_path: Path, columns: dict[str, pa.Array], rows: list[dict[str, Any]]) -> tuple[Path, Path]:
    """The same rows as a Parquet file with the given column types and as JSON Lines."""
    parquet, jsonl = tmp_path / "rows.parquet", tmp_path / "rows.jsonl"
    pq.write_table(pa.table(columns), parquet)
    jsonl.write_bytes(jsonl_bytes(rows))
    return parquet, jsonl


def normalized(path: Path, out: Path) -> tuple[list[dict[str, Any]], list[str]]:
    completed = run_cli("normalize", path, "--out", out)
    assert_no_traceback(completed)
    records = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    problems = [line.split(": ", 2)[1] for line in completed.stderr.splitlines() if line.count(": ") >= 2]
    return records, problems


@pytest.mark.slow
def test_2_a_uint64_run_past_int64_is_its_decimal_text_as_in_json_lines(tmp_path: Path) -> None:
    parquet, jsonl = parquet_and_jsonl(
        tmp_path, {"run": pa.array([2**63, 7], pa.uint64()), "sequence": [0, 0], "kind": ["llm", "llm"]},
        [{"run": 2**63, "sequence": 0, "kind": "llm"}, {"run": 7, "sequence": 0, "kind": "llm"}])
    from_parquet, from_jsonl = normalized(parquet, tmp_path / "p.jsonl"), normalized(jsonl, tmp_path / "j.jsonl")
    assert from_parquet == from_jsonl
    assert [record["run"] for record in from_parquet[0]] == ["9223372036854775808", "7"]


@pytest.mark.slow
def test_2_a_struct_payloads_uint64_tokens_past_int64_are_bad_type_as_in_json_lines(tmp_path: Path) -> None:
    payload = pa.StructArray.from_arrays([pa.array([2**63, 5], pa.uint64())], names=["promptTokens"])
    parquet, jsonl = parquet_and_jsonl(
        tmp_path, {"run": ["a", "b"], "sequence": [0, 0], "kind": ["llm", "llm"], "payload": payload},
        [{"run": "a", "sequence": 0, "kind": "llm", "payload": {"promptTokens": 2**63}},
         {"run": "b", "sequence": 0, "kind": "llm", "payload": {"promptTokens": 5}}])
    from_parquet, from_jsonl = normalized(parquet, tmp_path / "p.jsonl"), normalized(jsonl, tmp_path / "j.jsonl")
    assert from_parquet == from_jsonl
    assert from_parquet[1] == ["bad-type"] and [record["promptTokens"] for record in from_parquet[0]] == [5]


@pytest.mark.slow
@pytest.mark.parametrize(("value", "type_"), [
    pytest.param(2**53 + 1, pa.int64(), id="int64-2^53+1"),
    pytest.param(2**64 - 1, pa.uint64(), id="uint64-2^64-1"),
])
def test_2_an_integer_duration_a_float_cannot_hold_exactly_is_rounded_as_in_json_lines(
    tmp_path: Path, value: int, type_: pa.DataType
) -> None:
    parquet, jsonl = parquet_and_jsonl(
        tmp_path, {"run": ["a"], "sequence": [0], "kind": ["llm"], "duration_ms": pa.array([value], type_)},
        [{"run": "a", "sequence": 0, "kind": "llm", "duration_ms": value}])
    from_parquet, from_jsonl = normalized(parquet, tmp_path / "p.jsonl"), normalized(jsonl, tmp_path / "j.jsonl")
    assert from_parquet == from_jsonl
    assert from_parquet[0][0]["durationMs"] == float(value)


# ---------------------------------------------------------------- 3-6. what the fast path let through


NOT_JSON_IN_A_KEY_NOBODY_READS = [
    pytest.param(b"[" * 1_000 + b"]" * 1_000, id="3-nesting-1000-deep"),
    pytest.param(b"7" * 4_301, id="4-an-integer-of-4301-digits"),
    pytest.param(b"Inf", id="5-Inf"),
    pytest.param(b"-Inf", id="5-minus-Inf"),
    pytest.param(b"[1, -NaN]", id="5-minus-NaN"),
    pytest.param(b'"\xff"', id="6-not-utf8"),
    pytest.param(b'"\xed\xa0\x80"', id="6-an-encoded-surrogate"),
]


PAYLOAD_NOT_JSON = [
    pytest.param("[" * 1_000 + "]" * 1_000, id="3-nesting-1000-deep"),
    pytest.param("7" * 4_301, id="4-an-integer-of-4301-digits"),
    pytest.param("Inf", id="5-Inf"),
    pytest.param("-Inf", id="5-minus-Inf"),
    pytest.param("[1, -NaN]", id="5-minus-NaN"),
]
TARGET_ROW = 31


def containers(tmp_path: Path, line: bytes) -> dict[str, Path]:
    """The line at row 31 of a batch of valid lines (row 1 alone), in each container and neighbourhood."""
    lines = filler()
    lines.insert(TARGET_ROW - 1, line)
    beside_null = lines[:TARGET_ROW] + [b"null"] + lines[TARGET_ROW:]  # such a neighbour once sent
    files = {                                                             # the whole batch row by row
        "batch.jsonl": b"\n".join(lines) + b"\n",
        "beside-null.jsonl": b"\n".join(beside_null) + b"\n",
        "alone.jsonl": line + b"\n",
        "array.json": b"[" + b",\n".join(lines) + b"]",
        "batch.jsonl.gz": gzip.compress(b"\n".join(lines) + b"\n", mtime=0),
    }
    paths = {}
    for name, data in files.items():
        paths[name] = tmp_path / name
        paths[name].write_bytes(data)
    return paths


def verdict_of(report: dict[str, Any], name: str) -> str | None:
    """The rule of the row under test; every other row has its own verdict (``null`` is unreadable)."""
    rules = rules_by_row(report)
    row = 1 if name == "alone.jsonl" else TARGET_ROW
    others = {number: rule for number, rule in rules.items() if number != row}
    assert others == ({TARGET_ROW + 1: "unreadable-row"} if name == "beside-null.jsonl" else {}), name
    return rules.get(row)


@pytest.mark.parametrize("value", NOT_JSON_IN_A_KEY_NOBODY_READS)
def test_3_to_6_a_line_that_is_not_json_is_unreadable_in_any_batch_and_container(tmp_path: Path, value: bytes) -> None:
    line = b'{"run":"x","sequence":1,"kind":"llm","futureKey":' + value + b"}"
    for name, path in containers(tmp_path, line).items():
        assert verdict_of(validate_json(path), name) == "unreadable-row", name
        assert_one_verdict(path)


@pytest.mark.parametrize("value", PAYLOAD_NOT_JSON)
def test_3_to_5_a_payload_text_that_is_not_json_is_bad_type_in_any_batch_and_container(
    tmp_path: Path, value: str
) -> None:
    payload = '{"finishReason": "stop", "futureKey": ' + value + "}"
    line = json.dumps({"run": "x", "sequence": 1, "kind": "llm", "payload": payload}).encode()
    for name, path in containers(tmp_path, line).items():
        assert verdict_of(validate_json(path), name) == "bad-type", name
        assert_one_verdict(path)
    parquet = tmp_path / "rows.parquet"
    payloads = [json.dumps({"finishReason": "stop"})] * 40 + [payload]
    pq.write_table(pa.table({"run": [f"r{i}" for i in range(41)], "sequence": [0] * 41, "kind": ["llm"] * 41,
                             "payload": payloads}), parquet)
    assert rules_by_row(validate_json(parquet)) == {41: "bad-type"}
    assert_one_verdict(parquet)


def test_a_payload_text_written_over_several_lines_is_read_whole_beside_one_line_payloads(tmp_path: Path) -> None:
    """Arrow's JSON reader takes a line a payload: a pretty-printed payload (a line break in its
    text) must go to the row checker, whichever row of the chunk it is in, and read as it says."""
    spread = json.dumps({"finishReason": "length", "promptTokens": 7}, indent=2)
    assert "\n" in spread
    payloads = [json.dumps({"finishReason": "stop", "promptTokens": row}) for row in range(40)]
    payloads[17] = spread
    parquet = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"run": [f"r{i}" for i in range(40)], "sequence": [0] * 40, "kind": ["llm"] * 40,
                             "payload": payloads}), parquet)
    assert rules_by_row(validate_json(parquet)) == {}
    assert assert_one_verdict(parquet) == 39  # the fast path took the chunk, all but the spread payload
    steps, _report = read_steps(parquet)
    assert [(step.finish_reason, step.prompt_tokens) for step in steps][16:19] == [
        ("stop", 16), ("length", 7), ("stop", 18)]


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity"])
def test_5_nan_and_infinity_are_numbers_as_python_reads_them_in_any_container(tmp_path: Path, token: bytes) -> None:
    """The rule decided: Python's json reads them, so a key nobody reads may hold them and a
    number field refuses them as not finite (bad-type); Inf, -Inf, -NaN are not JSON (above)."""
    for line, verdict in ((b'{"run":"x","sequence":1,"kind":"llm","futureKey":' + token + b"}", None),
                          (b'{"run":"x","sequence":1,"kind":"llm","duration_ms":' + token + b"}", "bad-type")):
        for name, path in containers(tmp_path, line).items():
            assert verdict_of(validate_json(path), name) == verdict, (line, name)
            assert_one_verdict(path)


# ---------------------------------------------------------------- 7. decimals


def test_7_a_decimal_duration_is_its_exact_value_on_every_path(tmp_path: Path) -> None:
    durations = [Decimal("3343.2")] + [Decimal(value).scaleb(-1) for value in range(1, 5_000, 7)]
    count = len(durations)
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"run": [f"r{i}" for i in range(count)], "sequence": [0] * count,
                             "kind": ["llm"] * count,
                             "duration_ms": pa.array(durations, pa.decimal128(10, 1))}), path)
    out = tmp_path / "out.jsonl"
    completed = run_cli("normalize", path, "--out", out)
    assert_no_traceback(completed)
    written = [json.loads(line)["durationMs"] for line in out.read_text("utf-8").splitlines()]
    assert written[0] == 3343.2
    assert written == [float(duration) for duration in durations]
    assert_one_verdict(path)


# ---------------------------------------------------------------- 8. hive null partitions


@pytest.mark.parametrize("column", ["run", "kind"])
def test_8_a_null_hive_partition_value_is_null_so_missing_field(tmp_path: Path, column: str) -> None:
    rows = {"run": ["a", None, "c"], "sequence": [0, 1, 2], "kind": ["llm", "llm", "llm"]}
    if column == "kind":
        rows = {"run": ["a", "b", "c"], "sequence": [0, 1, 2], "kind": ["llm", None, "llm"]}
    root = tmp_path / "dataset"
    pq.write_to_dataset(pa.table(rows), root, partition_cols=[column])
    assert any(part.name == f"{column}=__HIVE_DEFAULT_PARTITION__" for part in root.iterdir())
    report = validate_json(root)
    assert list(rules_by_row(report).values()) == ["missing-field"]
    assert report["problems"][0]["message"].startswith(column)
    assert_one_verdict(root)


# ---------------------------------------------------------------- 9. an empty server


@pytest.mark.parametrize("where", ["column", "payload"])
def test_9_an_empty_server_is_refused_like_an_empty_run_or_kind(tmp_path: Path, where: str) -> None:
    row: dict[str, Any] = {"run": "x", "sequence": 1, "kind": "tool",
                           "payload": {"toolName": "mcp_github_create_issue", "toolIsError": False}}
    if where == "column":
        row["server"] = ""
    else:
        row["payload"]["server"] = ""
    for name, path in containers(tmp_path, json.dumps(row).encode()).items():
        report = validate_json(path)
        assert verdict_of(report, name) == "bad-type", name
        assert_one_verdict(path)
    site = tmp_path / "site"
    assert invoke("build", str(tmp_path / "batch.jsonl"), "--out", str(site)).exit_code == 0
    summary = json.loads((site / "summary.json").read_text("utf-8"))
    assert summary["rows_rejected"] == 1
    assert [server["server"] for server in summary["servers"]] == []  # it was [""] when the row was kept


@pytest.mark.parametrize(("row", "rule"), [
    pytest.param({"run": "", "sequence": 1, "kind": "llm"}, "bad-type", id="empty-run"),
    pytest.param({"run": "x", "sequence": 1, "kind": ""}, "bad-type", id="empty-kind"),
    pytest.param({"run": "x", "sequence": 1, "kind": "tool", "server": "",
                  "payload": {"toolName": "t", "toolIsError": False}}, "bad-type", id="empty-server"),
])
def test_9_empty_run_kind_and_server_share_one_rule(row: dict[str, Any], rule: str, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([row]))
    problems = validate_json(path)["problems"]
    assert [problem["rule"] for problem in problems] == [rule]
    assert "must be a non-empty string" in problems[0]["message"]


# ---------------------------------------------------------------- 2. every column type a writer can produce


def _text_types() -> list[pa.DataType]:
    view = [pa.string_view()] if hasattr(pa, "string_view") else []
    return [pa.string(), pa.large_string(), *view, pa.dictionary(pa.int32(), pa.string())]


INTEGER_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
FLOAT_TYPES = [pa.float16(), pa.float32(), pa.float64()]
DECIMAL_TYPES = [pa.decimal128(10, 0), pa.decimal128(10, 1), pa.decimal256(40, 2)] + [
    make(9, 1) for make in (getattr(pa, "decimal32", None), getattr(pa, "decimal64", None)) if make is not None]
OTHER_TYPES = [pa.binary(), pa.large_binary(), pa.binary(4), pa.date32(), pa.date64(), pa.timestamp("s"),
               pa.timestamp("ns", tz="UTC"), pa.time64("us"), pa.duration("s"), pa.list_(pa.int64()),
               pa.large_list(pa.string()), pa.map_(pa.string(), pa.int64()), pa.struct([("a", pa.int64())]),
               pa.null(), pa.bool_(), pa.dictionary(pa.int8(), pa.int64())]
ALL_TYPES = INTEGER_TYPES + FLOAT_TYPES + DECIMAL_TYPES + _text_types() + OTHER_TYPES


def values_of(type_: pa.DataType, count: int) -> pa.Array:
    """``count`` values of ``type_``: ordinary ones, edges of its range, and nulls."""
    if pa.types.is_dictionary(type_):
        return values_of(type_.value_type, count).dictionary_encode().cast(type_)
    if pa.types.is_integer(type_):
        info = {8: 2**7, 16: 2**15, 32: 2**31, 64: 2**63}[type_.bit_width]
        top = info * 2 - 1 if pa.types.is_unsigned_integer(type_) else info - 1
        edges = [0, 1, top, top - 1] + ([] if pa.types.is_unsigned_integer(type_) else [-1, -info])
    elif pa.types.is_floating(type_):
        edges = [0.0, 1.5, -0.0, -2.5, float("nan"), float("inf"), 65504.0]
    elif pa.types.is_decimal(type_):
        edges = [Decimal("3343.2"), Decimal("0"), Decimal("-0"), Decimal("-1.5"), Decimal("12")]
        edges = [value.quantize(Decimal(1).scaleb(-type_.scale)) for value in edges]
    elif pa.types.is_fixed_size_binary(type_):
        edges = [b"7777", b"tool"]
    elif pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        edges = [b"7", b"llm", b"tool", b"{}"]
    elif pa.types.is_date32(type_) or pa.types.is_time32(type_):
        return pa.array([None, 0, 20_000, 2**31 - 1] * count, pa.int32()).slice(0, count).cast(type_)
    elif pa.types.is_temporal(type_):  # date64, timestamps, times, durations: edges past Python's range
        far = 2**40 if getattr(type_, "unit", "") == "s" else 2**62  # seconds are stored as milliseconds
        return pa.array([None, 0, 1_788_000_000, far] * count, pa.int64()).slice(0, count).cast(type_)
    elif pa.types.is_list(type_) or pa.types.is_large_list(type_):
        edges = [[1], [], [1, 2]] if pa.types.is_integer(type_.value_type) else [["a"], []]
    elif pa.types.is_map(type_):
        edges = [[("a", 1)], []]
    elif pa.types.is_struct(type_):
        edges = [{"a": 1}, {"a": None}]
    elif pa.types.is_null(type_):
        return pa.nulls(count)
    elif pa.types.is_boolean(type_):
        edges = [True, False]
    else:  # text
        edges = ["7", "", "llm", "tool", "mcp_github_create_issue", "ok", "cancelled", "{}", '{"promptTokens": 3}']
    return pa.array(([None] + edges) * count, type_ if not pa.types.is_dictionary(type_) else None).slice(0, count)


def typed_export(field: str, type_: pa.DataType, count: int = 45) -> pa.Table:
    """A tool-step export whose ``field`` column (or struct payload key ``payload.x``) has ``type_``."""
    columns: dict[str, pa.Array] = {
        "run": pa.array([f"r{index}" for index in range(count)]),
        "sequence": pa.array(range(count), pa.int64()),
        "kind": pa.array(["tool"] * count),
        "payload": pa.array([json.dumps({"toolName": "mcp_github_x", "toolIsError": False})] * count),
    }
    values = values_of(type_, count)
    if field.startswith("payload."):
        columns["payload"] = pa.StructArray.from_arrays(
            [pa.array(["mcp_github_x"] * count), pa.array([False] * count), values],
            names=["toolName", "toolIsError", field.split(".", 1)[1]])
    else:
        columns[field] = values
    return pa.table(columns)


SWEPT_FIELDS = ["run", "sequence", "kind", "round", "duration_ms", "crdate", "toolIsError", "toolOutcome",
                "server", "payload", "payload.promptTokens", "payload.estimatedCost", "payload.finishReason",
                "payload.approved", "payload.toolSpecs"]


@pytest.mark.parametrize("field", SWEPT_FIELDS)
def test_2_every_parquet_column_type_gets_the_row_checkers_verdict(tmp_path: Path, field: str) -> None:
    """Arrow's reading (fast path) and the row checker agree on every value of every type, never a traceback."""
    for type_ in ALL_TYPES:
        path = tmp_path / f"{field}-{str(type_).replace(' ', '')}.parquet"
        pq.write_table(typed_export(field, type_), path)
        try:
            vouched = assert_one_verdict(path)
        except AssertionError as failure:
            raise AssertionError(f"{field} as {type_}: {failure}") from None
        assert vouched > 0 or not fast_reads(field, type_), f"the fast path took no row of {field} as {type_}"


def fast_reads(field: str, type_: pa.DataType) -> bool:
    """Whether the fast path reads ``field`` of ``type_`` (else the whole batch is checked row by row)."""
    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    numbers = INTEGER_TYPES + FLOAT_TYPES + DECIMAL_TYPES
    readable = {
        "run": INTEGER_TYPES + _text_types(), "duration_ms": numbers, "payload.estimatedCost": numbers,
        "toolIsError": [pa.bool_()], "payload.approved": [pa.bool_()],
        "payload.toolSpecs": [pa.large_list(pa.string())],  # names: a list of integers is no list of names
    }
    for integer_field in ("sequence", "round", "crdate", "payload.promptTokens"):
        readable[integer_field] = INTEGER_TYPES
    default = _text_types()
    if pa.types.is_null(type_):  # absent: every row lacks a required field, or none has the optional one
        return field not in ("run", "sequence", "kind")
    return type_ in readable.get(field, default)


SAME_VALUE_AS_JSON = [(field, type_) for field in ("sequence", "round", "duration_ms", "crdate", "run")
                      for type_ in INTEGER_TYPES + FLOAT_TYPES] + [
    (field, type_) for field in ("duration_ms", "payload.estimatedCost") for type_ in DECIMAL_TYPES] + [
    (field, type_) for field in ("run", "kind", "toolOutcome", "server", "payload.finishReason")
    for type_ in _text_types()]


def test_2_repeated_names_read_as_json_reads_repeated_keys_the_last_wins(tmp_path: Path) -> None:
    payload = pa.StructArray.from_arrays([pa.array(["mcp_github_x"]), pa.array([1])], names=["toolName", "toolName"])
    columns = [pa.array(["r"]), pa.array([0]), pa.array(["tool"]), pa.array(["llm"]), payload]
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_arrays(columns, names=["run", "sequence", "kind", "kind", "payload"]), path)
    assert_one_verdict(path)
    report = validate_json(path)
    assert rules_by_row(report) == {1: "bad-type"} and report["problems"][0]["message"].startswith("toolName")


@pytest.mark.parametrize(("field", "type_"), SAME_VALUE_AS_JSON, ids=[f"{f}-{t}" for f, t in SAME_VALUE_AS_JSON])
def test_2_a_parquet_value_gets_the_verdict_the_same_value_gets_in_json_lines(
    tmp_path: Path, field: str, type_: pa.DataType
) -> None:
    table = typed_export(field, type_)
    parquet, jsonl = tmp_path / "rows.parquet", tmp_path / "rows.jsonl"
    pq.write_table(table, parquet)
    rows = table.to_pylist()
    for row in rows:
        row["payload"] = row["payload"] if isinstance(row["payload"], str) else {
            key: value for key, value in row["payload"].items() if value is not None}
    # A decimal as the JSON number of its value: float() of a Decimal is correctly rounded, and its repr
    # reads back as the same float, so the JSON line holds the same number.
    jsonl.write_bytes(jsonl_bytes(json.dumps(row, default=float) for row in rows))
    assert normalized_in_process(parquet, tmp_path / "p.jsonl") == normalized_in_process(jsonl, tmp_path / "j.jsonl")


def normalized_in_process(path: Path, out: Path) -> tuple[list[dict[str, Any]], list[str]]:
    result = invoke("normalize", str(path), "--out", str(out))
    assert result.exit_code in (0, 1), result.output
    records = [json.loads(line) for line in out.read_text("utf-8").splitlines()]
    return records, [line.split(": ", 2)[1] for line in result.stderr.splitlines() if line.count(": ") >= 2]


# ------------------------------------------------------- timeline reads only its run's rows, with the same rules


def whole_check_lines(path: Path, run: str) -> list[str]:
    """The problem lines the whole check gives that concern ``run``: its own, and every unreadable row."""
    checked = check_inputs(resolve_inputs([str(path)]), [])
    return [f"{p.input}:{p.row}: {p.rule.value}: {p.text()}" for p in checked.tally.problems if concerns_run(p, run)]


def timeline_lines(path: Path, run: str) -> list[str]:
    result = invoke("timeline", run, str(path), "--out", str(path.parent / "timeline.html"))
    assert result.exit_code == 0, result.output
    return result.output.splitlines()[:-1]


@pytest.mark.parametrize("value", NOT_JSON_IN_A_KEY_NOBODY_READS)
def test_3_to_6_the_timeline_of_another_run_lists_the_unreadable_line_as_the_whole_check_does(
    tmp_path: Path, value: bytes
) -> None:
    line = b'{"run":"x","sequence":1,"kind":"llm","futureKey":' + value + b"}"
    for name, path in containers(tmp_path, line).items():
        if name != "alone.jsonl":
            lines = timeline_lines(path, "filler-3")
            assert lines == whole_check_lines(path, "filler-3"), name
            assert any(f":{TARGET_ROW}: unreadable-row" in text for text in lines), name


def test_1_2_a_parquet_run_past_int64_or_not_utf8_in_a_timeline(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    runs = unchecked_strings([b"9223372036854775808", b"7", b"bad\xff"])
    pq.write_table(pa.table({"run": runs, "sequence": [0, 0, 0], "kind": ["llm"] * 3}), path)
    assert timeline_lines(path, "7") == whole_check_lines(path, "7")
    wide = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"run": pa.array([2**63, 7], pa.uint64()), "sequence": [0, 0], "kind": ["llm"] * 2}), wide)
    assert timeline_lines(wide, "9223372036854775808") == whole_check_lines(wide, "9223372036854775808") == []
    assert (tmp_path / "timeline.html").read_text("utf-8").count("9223372036854775808") >= 1


# ---------------------------------------------------------------- every route into a float


@pytest.mark.parametrize("shape", ["canonical record", "object payload", "text payload"])
def test_a_negative_zero_cost_is_zero_on_the_fast_path_as_row_by_row(tmp_path: Path, shape: str) -> None:
    """``-0.0 == 0.0``, so comparing values cannot see the sign: a cost of -0 must come out +0
    whichever way the row carries it, as ``normalize`` does row by row."""
    step = {"run": "minus-zero", "sequence": 0, "kind": "llm"}
    rows = {
        "canonical record": {**step, "estimatedCost": -0.0},
        "object payload": {**step, "payload": {"estimatedCost": -0.0}},
        "text payload": {**step, "payload": json.dumps({"estimatedCost": -0.0})},
    }
    path = tmp_path / "rows.jsonl"
    neighbours = filler() if shape != "canonical record" else [
        json.dumps({"run": f"filler-{index}", "sequence": 0, "kind": "llm", "estimatedCost": 0.25}).encode()
        for index in range(FILLER_ROWS)]
    path.write_bytes(b"\n".join([json.dumps(rows[shape]).encode(), *neighbours]) + b"\n")
    reference_steps, _reference = read_steps(path)
    checked = check_inputs(resolve_inputs([str(path)]), [])
    assert checked.tally.rows_fast > 0, "the batch did not take the fast path"
    [fast] = [cost for run, cost in zip(checked.steps.column("run").to_pylist(),
                                        checked.steps.column("estimatedCost").to_pylist()) if run == "minus-zero"]
    [reference] = [step.to_record()["estimatedCost"] for step in reference_steps if step.run == "minus-zero"]
    assert math.copysign(1.0, reference) == 1.0
    assert math.copysign(1.0, fast) == 1.0, f"{shape}: the fast path kept -0.0"
