"""Every input, however broken: row-level problems, or exit 2 naming the file; never a traceback."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import Result
from conftest import jsonl_bytes, parquet_table, problem_summary, read_steps, tool_payload, tool_row

Cli = Callable[..., Result]


def _rows(count: int) -> list[dict[str, Any]]:
    return [tool_row(sequence=index) for index in range(count)]


def _report(cli: Cli, *args: Any, input: bytes | None = None) -> dict[str, Any]:
    result = cli("validate", *args, "--format", "json", input=input)
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output
    return json.loads(result.stdout)


def _rules(report: dict[str, Any]) -> list[tuple[int, str]]:
    return [(problem["row"], problem["rule"]) for problem in report["problems"]]


def _counts(report: dict[str, Any]) -> tuple[int, int, int]:
    return report["rows_read"], report["rows_valid"], report["rows_rejected"]


def _assert_exit_2_naming(result: Result, path: Path, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], result.stderr
    for word in words:
        assert word in lines[0]


# --- encodings and line ends -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_line",
    [
        pytest.param(b'{"run": "caf\xe9", "sequence": 9, "kind": "llm"}', id="latin-1-in-a-string"),
        pytest.param(b"\xff\xfe{\x00", id="utf-16-bom"),
        pytest.param(b'{"run": 1, "sequence": 9, "kind": "llm"}\xc3', id="cut-multibyte"),
        pytest.param(b"\xed\xa0\x80", id="encoded-surrogate"),
    ],
)
def test_a_non_utf8_line_is_rejected_and_the_others_read(cli: Cli, tmp_path: Path, bad_line: bytes) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([tool_row(sequence=1), bad_line, tool_row(sequence=2)]))
    report = _report(cli, path)
    assert _counts(report) == (3, 2, 1)
    assert _rules(report) == [(2, "unreadable-row")]
    assert "UTF-8" in report["problems"][0]["message"]


@pytest.mark.parametrize(
    ("name", "array"),
    [
        pytest.param("rows.jsonl", False, id="jsonl"),
        pytest.param("rows.ndjson.gz", False, id="ndjson-gz"),
        pytest.param("rows.json", True, id="json-array"),
        pytest.param("rows.json.gz", True, id="json-array-gz"),
    ],
)
def test_byte_order_mark_and_crlf_are_read_without_a_problem(cli: Cli, tmp_path: Path, name: str, array: bool) -> None:
    rows = _rows(3)
    body = json.dumps(rows, indent=1).encode() if array else jsonl_bytes(rows)
    data = b"\xef\xbb\xbf" + body.replace(b"\n", b"\r\n")
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    report = _report(cli, path)
    assert _counts(report) == (3, 3, 0)
    assert report["problems"] == []


def test_byte_order_mark_on_stdin(cli: Cli) -> None:
    report = _report(cli, "-", input=b"\xef\xbb\xbf" + jsonl_bytes(_rows(2)).replace(b"\n", b"\r\n"))
    assert _counts(report) == (2, 2, 0)


def test_blank_lines_are_skipped_but_counted_for_line_numbers(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(
        b"\n"
        + jsonl_bytes([tool_row(sequence=0)])
        + b"   \r\n\t\n\n"
        + jsonl_bytes([tool_row(sequence="1.5")])
        + b"\n\n"
    )
    report = _report(cli, path)
    assert _counts(report) == (2, 1, 1)
    assert _rules(report) == [(6, "bad-type")]


@pytest.mark.parametrize(
    ("name", "content"),
    [
        pytest.param("rows.jsonl", b"", id="jsonl"),
        pytest.param("rows.json", b"", id="json"),
        pytest.param("rows.json", b"[]", id="empty-array"),
        pytest.param("rows.jsonl", b"\n\r\n  \n", id="only-blank-lines"),
        pytest.param("rows.jsonl.gz", gzip.compress(b""), id="empty-gzip"),
    ],
)
def test_an_empty_file_is_zero_rows_and_no_error(cli: Cli, tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    result = cli("validate", path)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["0 rows read: 0 valid, 0 rejected, 0 warnings."]


def test_an_empty_parquet_file_is_zero_rows(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"run": pa.array([], pa.string()), "sequence": pa.array([], pa.int64())}), path)
    assert _counts(_report(cli, path)) == (0, 0, 0)


def test_empty_stdin_is_zero_rows(cli: Cli) -> None:
    assert _counts(_report(cli, "-", input=b"")) == (0, 0, 0)


# --- JSON that attacks the parser -------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [5_000, 200_000], ids=["deep", "very-deep"])
def test_json_nested_too_deep_is_an_unreadable_row(cli: Cli, tmp_path: Path, depth: int) -> None:
    path = tmp_path / "rows.jsonl"
    deep = b"[" * depth + b"]" * depth
    path.write_bytes(
        jsonl_bytes(
            [
                tool_row(sequence=0),
                deep,
                b'{"run": 1, "sequence": 1, "kind": "llm", "x": ' + b'{"a":' * depth + b"1" + b"}" * depth + b"}",
                tool_row(sequence=2),
            ]
        )
    )
    report = _report(cli, path)
    assert _counts(report) == (4, 2, 2)
    assert _rules(report) == [(2, "unreadable-row"), (3, "unreadable-row")]


def test_payload_text_nested_too_deep_is_bad_type(cli: Cli, tmp_path: Path) -> None:
    depth = 100_000
    payload = '{"toolIsError": false, "toolArguments": ' + "[" * depth + "]" * depth + "}"
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([tool_row(sequence=0, payload=payload), tool_row(sequence=1)]))
    report = _report(cli, path)
    assert _rules(report) == [(1, "bad-type")]
    assert _counts(report) == (2, 1, 1)


def test_nesting_a_parser_can_take_is_kept_when_it_is_only_content(cli: Cli, tmp_path: Path) -> None:
    depth = 200
    arguments = {"q": json.loads("[" * depth + "]" * depth)}
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([tool_row(payload=tool_payload(toolIsError=False, toolArguments=arguments))]))
    assert _counts(_report(cli, path)) == (1, 1, 0)


def test_a_json_array_whose_record_nests_too_deep_rejects_that_record(cli: Cli, tmp_path: Path) -> None:
    """As the same text on a line of JSON Lines: the record is unreadable, the array is still read."""
    path = tmp_path / "rows.json"
    path.write_bytes(b"[" * 200_000 + b"]" * 200_000)
    report = _report(cli, path)
    assert _rules(report) == [(1, "unreadable-row")] and "too deeply" in report["problems"][0]["message"]


def test_a_json_array_record_with_bytes_that_are_not_utf8_rejects_that_record(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    records = [json.dumps(tool_row(sequence=index)).encode() for index in range(3)]
    records[1] = records[1].replace(b'"tool"', b'"t\xffol"')
    path.write_bytes(b"[" + b",\n".join(records) + b"]")
    report = _report(cli, path)
    assert _counts(report) == (3, 2, 1)
    assert _rules(report) == [(2, "unreadable-row")] and "UTF-8" in report["problems"][0]["message"]


def test_a_json_array_that_is_cut_off_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.json"
    path.write_bytes(b"[" + json.dumps(tool_row()).encode() + b", {\"run\": 1, \"seq")
    _assert_exit_2_naming(cli("validate", path), path, "not a valid JSON array")


def test_a_single_line_of_twenty_megabytes(cli: Cli, tmp_path: Path) -> None:
    huge = tool_row(
        sequence=1, payload=tool_payload(toolIsError=True, toolOutcome="cancelled", toolResult="x" * 20_000_000)
    )
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([tool_row(sequence=0), huge, tool_row(sequence=2)]))
    assert path.stat().st_size > 20_000_000
    report = _report(cli, path)
    assert _counts(report) == (3, 3, 0)


def test_a_twenty_megabyte_line_that_is_broken_costs_only_itself(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(
        jsonl_bytes([tool_row(sequence=0), b'{"run": 1, "payload": "' + b"y" * 20_000_000, tool_row(sequence=2)])
    )
    report = _report(cli, path)
    assert _rules(report) == [(2, "unreadable-row")]
    assert len(report["problems"][0]["message"]) < 200


# --- numbers --------------------------------------------------------------------------------------

BAD_NUMBERS = [
    pytest.param('"duration_ms": NaN', "durationMs", id="duration-nan"),
    pytest.param('"duration_ms": Infinity', "durationMs", id="duration-infinity"),
    pytest.param('"durationMs": -Infinity', "durationMs", id="duration-minus-infinity"),
    pytest.param('"duration_ms": -1', "durationMs", id="duration-negative"),
    pytest.param('"duration_ms": -0.01', "durationMs", id="duration-negative-fraction"),
    pytest.param('"duration_ms": 1e400', "durationMs", id="duration-overflows-float"),
    pytest.param('"sequence": NaN', "sequence", id="sequence-nan"),
    pytest.param('"sequence": 18446744073709551616', "sequence", id="sequence-past-uint64"),
    pytest.param('"sequence": 9223372036854775808', "sequence", id="sequence-past-int64"),
    pytest.param('"sequence": "3.0"', "sequence", id="sequence-as-decimal-string"),
    pytest.param('"sequence": 3.0', "sequence", id="sequence-as-float"),
    pytest.param('"round": 340282366920938463463374607431768211456', "round", id="round-past-128-bits"),
    pytest.param('"round": -2', "round", id="round-negative"),
    pytest.param('"crdate": 1e20', "crdate", id="crdate-float"),
    pytest.param('"crdate": -86400', "crdate", id="crdate-negative"),
    pytest.param('"crdate": 99999999999999999999999', "crdate", id="crdate-past-64-bits"),
]


@pytest.mark.parametrize(("field", "name"), BAD_NUMBERS)
def test_numbers_out_of_range_are_bad_type(cli: Cli, tmp_path: Path, field: str, name: str) -> None:
    defaults = {"run": '"r"', "sequence": "3", "kind": '"llm"'}
    key = field.split(":")[0].strip('"')
    parts = [f'"{k}": {v}' for k, v in defaults.items() if k != key] + [field]
    line = "{" + ", ".join(parts) + "}"
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([line, tool_row(sequence=5)]))
    report = _report(cli, path)
    assert _rules(report) == [(1, "bad-type")]
    assert report["problems"][0]["message"].startswith(name)
    assert _counts(report) == (2, 1, 1)


def test_an_integer_duration_beyond_64_bits_is_still_a_finite_number(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes(['{"run": "r", "sequence": 0, "kind": "llm", "duration_ms": ' + "9" * 40 + "}"]))
    assert _counts(_report(cli, path)) == (1, 1, 0)


def test_nan_in_a_payload_fact_is_bad_type(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(
        jsonl_bytes(
            [
                '{"run": 1, "sequence": 0, "kind": "llm", "payload": {"estimatedCost": NaN}}',
                '{"run": 1, "sequence": 1, "kind": "llm", "payload": "{\\"promptTokens\\": Infinity}"}',
            ]
        )
    )
    assert _rules(_report(cli, path)) == [(1, "bad-type"), (2, "bad-type")]


def test_an_integer_too_long_to_parse_is_an_unreadable_row(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([b'{"run": 1, "sequence": ' + b"9" * 10_000 + b', "kind": "llm"}', tool_row()]))
    report = _report(cli, path)
    assert _rules(report) == [(1, "unreadable-row")]
    assert _counts(report) == (2, 1, 1)


# --- files that cannot be read at all -------------------------------------------------------------


@pytest.mark.parametrize("name", ["rows.jsonl.gz", "rows.json.gz", "rows.ndjson.gz"])
def test_a_truncated_gzip_is_exit_2_naming_the_file(cli: Cli, tmp_path: Path, name: str) -> None:
    rows = _rows(200)
    data = json.dumps(rows).encode() if name.startswith("rows.json.") else jsonl_bytes(rows)
    path = tmp_path / name
    path.write_bytes(gzip.compress(data)[:-40])
    _assert_exit_2_naming(cli("validate", path), path, "gzip")


def test_a_truncated_gzip_on_json_output_prints_no_partial_report(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(gzip.compress(jsonl_bytes(_rows(500)))[:-40])
    result = cli("validate", path, "--format", "json")
    _assert_exit_2_naming(result, path)
    assert result.stdout == ""


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"PAR1", id="magic-only"),
        pytest.param(b"PAR1" + b"\x00" * 100 + b"PAR1", id="magic-both-ends"),
        pytest.param(jsonl_bytes(_rows(2)), id="json-lines-inside"),
    ],
)
def test_a_fake_parquet_file_is_exit_2(cli: Cli, tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "rows.parquet"
    path.write_bytes(content)
    _assert_exit_2_naming(cli("validate", path), path, "Parquet")


def test_a_fake_parquet_file_in_a_folder_is_exit_2_naming_it(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "dataset"
    (folder / "run=1").mkdir(parents=True)
    pq.write_table(parquet_table(_rows(2)), folder / "run=1" / "part-0.parquet")
    (folder / "run=2").mkdir()
    (folder / "run=2" / "part-0.parquet").write_bytes(b"not parquet at all")
    result = cli("validate", folder)
    _assert_exit_2_naming(result, folder, "run=2/part-0.parquet")


def test_a_truncated_parquet_file_is_exit_2(cli: Cli, tmp_path: Path, write_rows: Callable[..., Path]) -> None:
    good = write_rows("good.parquet", _rows(50))
    path = tmp_path / "cut.parquet"
    path.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    _assert_exit_2_naming(cli("validate", path), path)


# --- Parquet columns of other types than expected -------------------------------------------------


def _parquet(tmp_path: Path, columns: dict[str, pa.Array]) -> Path:
    path = tmp_path / "typed.parquet"
    pq.write_table(pa.table(columns), path)
    return path


@pytest.mark.parametrize("int_type", [pa.int8(), pa.int64(), pa.uint8()], ids=str)
def test_an_integer_tool_is_error_column_is_flag_not_boolean(cli: Cli, tmp_path: Path, int_type: pa.DataType) -> None:
    path = _parquet(tmp_path, {
        "run": pa.array(["r", "r", "r"]),
        "sequence": pa.array([0, 1, 2]),
        "kind": pa.array(["tool"] * 3),
        "toolName": pa.array(["mcp_github_x"] * 3),
        "toolIsError": pa.array([0, 1, None], int_type),
    })
    report = _report(cli, path)
    assert _rules(report) == [(1, "flag-not-boolean"), (2, "flag-not-boolean"), (3, "tool-step-without-flag")]
    assert _counts(report) == (3, 1, 2)


def test_a_string_tool_is_error_column_is_flag_not_boolean(cli: Cli, tmp_path: Path) -> None:
    path = _parquet(tmp_path, {
        "run": pa.array(["r", "r"]), "sequence": pa.array([0, 1]), "kind": pa.array(["tool", "tool"]),
        "toolIsError": pa.array(["false", "true"]),
    })
    assert _rules(_report(cli, path)) == [(1, "flag-not-boolean"), (2, "flag-not-boolean")]


def test_a_boolean_tool_is_error_column_is_read(cli: Cli, tmp_path: Path) -> None:
    path = _parquet(tmp_path, {
        "run": pa.array(["r", "r"]), "sequence": pa.array([0, 1]), "kind": pa.array(["tool", "tool"]),
        "toolIsError": pa.array([False, True]), "toolOutcome": pa.array(["ok", "cancelled"]),
    })
    steps, tally = read_steps(path)
    assert [step.outcome.value for step in steps if step.outcome] == ["ok", "cancelled"]
    assert tally.problems == []


@pytest.mark.parametrize(
    ("column", "array"),
    [
        pytest.param("sequence", pa.array(["0.0", "one"]), id="sequence-string-not-a-plain-integer"),
        pytest.param("sequence", pa.array([0.0, 1.0]), id="sequence-double"),
        pytest.param("round", pa.array([-1, -2], pa.int32()), id="round-negative"),
        pytest.param("duration_ms", pa.array([float("nan"), float("inf")]), id="duration-not-finite"),
        pytest.param("crdate", pa.array([True, False]), id="crdate-boolean"),
        pytest.param("payload", pa.array([[1, 2], [3]]), id="payload-list"),
        pytest.param("payload", pa.array(["[]", "not json"]), id="payload-text-not-object"),
    ],
)
def test_parquet_columns_of_other_types_are_bad_type(cli: Cli, tmp_path: Path, column: str, array: pa.Array) -> None:
    columns = {"run": pa.array(["r", "r"]), "sequence": pa.array([0, 1]), "kind": pa.array(["llm", "llm"])}
    path = _parquet(tmp_path, {**columns, column: array})
    report = _report(cli, path)
    assert _rules(report) == [(1, "bad-type"), (2, "bad-type")]


def test_parquet_payload_struct_column_is_valid(cli: Cli, tmp_path: Path) -> None:
    payload = pa.array(
        [
            {"toolName": "mcp_github_create_issue", "toolIsError": True, "toolOutcome": "cancelled",
             "toolArguments": {"title": "x"}},
            {"toolName": "mcp_github_list", "toolIsError": False, "toolOutcome": None, "toolArguments": None},
            None,
        ]
    )
    path = _parquet(tmp_path, {
        "run": pa.array(["r", "r", "r"]), "sequence": pa.array([0, 1, 2]), "kind": pa.array(["tool", "tool", "llm"]),
        "payload": payload,
    })
    report = _report(cli, path)
    assert _counts(report) == (3, 3, 0) and report["problems"] == []
    steps, _ = read_steps(path)
    assert [(step.server, step.outcome and step.outcome.value) for step in steps] == [
        ("github", "cancelled"), ("github", "ok"), (None, None),
    ]


def test_parquet_struct_payload_disagreeing_with_a_flattened_column(tmp_path: Path) -> None:
    path = _parquet(tmp_path, {
        "run": pa.array(["r"]), "sequence": pa.array([0]), "kind": pa.array(["tool"]),
        "toolIsError": pa.array([True]),
        "payload": pa.array([{"toolName": "mcp_a_b", "toolIsError": False}]),
    })
    _, tally = read_steps(path)
    assert problem_summary(tally.problems) == [(str(path), 1, "column-contradicts-payload")]


def test_a_lone_surrogate_escape_in_a_run_id_is_a_row_problem_not_a_crash(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(jsonl_bytes([tool_row(sequence=0), b'{"run": "\\ud800", "sequence": 1, "kind": "llm"}']))
    report = _report(cli, path)
    assert _rules(report) == [(2, "bad-type")]
    for out in ("out.jsonl", "out.parquet"):
        result = cli("normalize", path, "--out", tmp_path / out)
        assert result.exit_code == 1, result.output
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8").count("\n") == 1
    assert pq.read_table(tmp_path / "out.parquet").num_rows == 1
