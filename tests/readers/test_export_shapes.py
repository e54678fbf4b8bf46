"""Numbers written as strings, the files the usual database tools
write (CSV, TSV as ``mysql --batch`` writes it, phpMyAdmin's JSON export), and bytes that
are not UTF-8, which are an unreadable row in every container."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from command_line import invoke
from conftest import check_one, rules_of, step_row, tool_row
from site_helpers import SAMPLE, SAMPLE_SERVERS, build_ok, failure_text, read_jsonl

from nrllm_report.check.rows import RowChecker

COLUMNS = ("uid", "run", "sequence", "kind", "round", "duration_ms", "payload", "crdate")
SERVERS = ",".join(SAMPLE_SERVERS)



def report(path: Path) -> dict[str, Any]:
    result = invoke("validate", path, "--format", "json", "--servers", SERVERS)
    assert result.exit_code in (0, 1), failure_text(result)
    return json.loads(result.stdout)


def located(path: Path) -> list[tuple[int, str]]:
    return [(problem["row"], problem["rule"]) for problem in report(path)["problems"]]


def records(path: Path, out: Path) -> list[dict[str, Any]]:
    result = invoke("normalize", path, "--out", out, "--servers", SERVERS)
    assert result.exit_code in (0, 1), failure_text(result)
    return read_jsonl(out)


# ---------------------------------------------------------------- item 3: numbers written as strings


@pytest.mark.parametrize(
    ("column", "text", "value"),
    [
        pytest.param("sequence", "12", 12, id="sequence"),
        pytest.param("round", "0", 0, id="round"),
        pytest.param("crdate", "1788000000", 1_788_000_000, id="crdate"),
        pytest.param("duration_ms", "4.00", 4.0, id="decimal-as-php-returns-it"),
        pytest.param("duration_ms", "4", 4.0, id="decimal-without-point"),
        pytest.param("duration_ms", "1234.56", 1234.56, id="decimal"),
        pytest.param("uid", "17", None, id="uid"),
        pytest.param("run", "7", "7", id="run-uid-as-text"),
    ],
)
def test_a_table_column_accepts_a_plain_number_written_as_text(column: str, text: str, value: Any) -> None:
    as_number = check_one(tool_row(**{column: int(text) if column != "duration_ms" else float(text)})).step
    as_text = check_one(tool_row(**{column: text})).step
    assert as_text is not None and as_text == as_number
    record = as_text.to_record()
    if value is not None:
        assert record[{"duration_ms": "durationMs"}.get(column, column)] == value


@pytest.mark.parametrize(
    ("column", "text"),
    [
        pytest.param("sequence", "12.5", id="sequence-decimal"),
        pytest.param("sequence", "", id="sequence-empty"),
        pytest.param("sequence", " 3", id="sequence-space"),
        pytest.param("sequence", "1e3", id="sequence-exponent"),
        pytest.param("sequence", "abc", id="sequence-word"),
        pytest.param("sequence", "-1", id="sequence-negative"),
        pytest.param("sequence", "٣", id="sequence-arabic-digit"),
        pytest.param("sequence", "1_000", id="sequence-underscore"),
        pytest.param("sequence", "99999999999999999999", id="sequence-past-int64"),
        pytest.param("round", "1.0", id="round-decimal"),
        pytest.param("crdate", "+5", id="crdate-plus"),
        pytest.param("uid", "x1", id="uid-word"),
        pytest.param("duration_ms", "1e3", id="duration-exponent"),
        pytest.param("duration_ms", "4,00", id="duration-comma"),
        pytest.param("duration_ms", "NaN", id="duration-nan"),
        pytest.param("duration_ms", ".5", id="duration-no-leading-digit"),
        pytest.param("duration_ms", "-4.00", id="duration-negative"),
    ],
)
def test_any_other_text_in_a_number_column_is_bad_type_naming_it(column: str, text: str) -> None:
    result = check_one(tool_row(**{column: text}))
    assert rules_of(result) == ["bad-type"]
    assert repr(text) in result.problems[0].text()


@pytest.mark.parametrize(
    ("payload", "rule"),
    [
        pytest.param({"toolName": "mcp_github_list", "toolIsError": "false"}, "flag-not-boolean", id="flag"),
        pytest.param({"toolName": "mcp_github_list", "toolIsError": False, "promptTokens": "12"}, "bad-type",
                     id="tokens"),
        pytest.param({"toolName": "mcp_github_list", "toolIsError": False, "estimatedCost": "0.01"}, "bad-type",
                     id="cost"),
    ],
)
def test_payload_keys_keep_their_json_types(payload: dict[str, Any], rule: str) -> None:
    assert rules_of(check_one(tool_row(payload=payload))) == [rule]


def test_numbers_as_strings_in_json_lines_take_the_fast_path_with_the_same_result(tmp_path: Path) -> None:
    rows = read_jsonl(SAMPLE)
    as_text = [{key: str(value) if key in ("uid", "sequence", "round", "crdate") else value
                for key, value in row.items()} | {"duration_ms": f"{row['duration_ms']:.2f}"} for row in rows]
    source = tmp_path / "as-text.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in as_text), encoding="utf-8")
    assert records(source, tmp_path / "a.jsonl") == records(SAMPLE, tmp_path / "b.jsonl")
    assert row_checker_calls(source) == 0


def row_checker_calls(path: Path) -> int:
    """How many rows of ``path`` a validate run hands to the row checker (none: all on the fast path)."""
    calls = 0
    original = RowChecker.check

    def counting(self: RowChecker, *args: Any, **keywords: Any) -> Any:
        nonlocal calls
        calls += 1
        return original(self, *args, **keywords)

    RowChecker.check = counting  # type: ignore[method-assign]
    try:
        report(path)
    finally:
        RowChecker.check = original  # type: ignore[method-assign]
    return calls


# ---------------------------------------------------------------- item 4: CSV, TSV, phpMyAdmin


def as_table_rows(rows: list[dict[str, Any]]) -> list[dict[str, str | None]]:
    """Rows as the database returns them to an export tool: every value text, the payload JSON."""
    return [{column: None if row.get(column) is None else
             (json.dumps(row[column], ensure_ascii=False) if column == "payload" and not isinstance(row[column], str)
              else (f"{row[column]:.2f}" if column == "duration_ms" else str(row[column])))
             for column in COLUMNS} for row in rows]


def write_csv(path: Path, rows: list[dict[str, str | None]], null: str = "") -> Path:
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([null if row[column] is None else row[column] for column in COLUMNS])
    return _write(path, text.getvalue())


def mysql_batch(value: str | None) -> str:
    """A value as ``mysql --batch`` writes it."""
    if value is None:
        return "NULL"
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\0", "\\0")


def write_tsv(path: Path, rows: list[dict[str, str | None]]) -> Path:
    lines = ["\t".join(COLUMNS)] + ["\t".join(mysql_batch(row[column]) for column in COLUMNS) for row in rows]
    return _write(path, "\n".join(lines) + "\n")


def phpmyadmin(rows: list[dict[str, str | None]], tables: tuple[str, ...] = ("tx_nrllm_agentrun_event",)) -> str:
    """phpMyAdmin's JSON export of ``tables`` (the event table holding ``rows``)."""
    export: list[dict[str, Any]] = [
        {"type": "header", "version": "5.2.1", "comment": "Export to JSON plugin for PHPMyAdmin"},
        {"type": "database", "name": "typo3"},
    ]
    for table in tables:
        data = rows if table == "tx_nrllm_agentrun_event" else [{"uid": "1", "uuid": "x"}]
        export.append({"type": "table", "name": table, "database": "typo3", "data": data})
    return json.dumps(export, ensure_ascii=False, indent=1)


def _write(path: Path, text: str) -> Path:
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


WRITERS: dict[str, Callable[[Path, list[dict[str, str | None]]], Path]] = {
    "export.csv": write_csv,
    "export.csv.gz": write_csv,
    "export.tsv": write_tsv,
    "export.tsv.gz": write_tsv,
    "export.json": lambda path, rows: _write(path, phpmyadmin(rows)),
    "export.json.gz": lambda path, rows: _write(path, phpmyadmin(rows)),
}


@pytest.fixture(scope="module")
def sample_records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return records(SAMPLE, tmp_path_factory.mktemp("sample") / "records.jsonl")


@pytest.mark.parametrize("name", list(WRITERS))
def test_the_sample_as_a_database_tool_exports_it_reads_as_the_json_lines(
    tmp_path: Path, name: str, sample_records: list[dict[str, Any]]
) -> None:
    source = WRITERS[name](tmp_path / name, as_table_rows(read_jsonl(SAMPLE)))
    assert records(source, tmp_path / "records.jsonl") == sample_records
    assert row_checker_calls(source) == 0, "every batch is vouched for by the fast path"


def test_a_csv_record_spans_lines_and_rows_count_records_not_lines(tmp_path: Path) -> None:
    payload = json.dumps({"toolName": "mcp_github_list", "toolIsError": True, "toolOutcome": "cancelled",
                          "toolResult": 'said "no",\nthen\r\nleft'}, indent=1)
    rows = as_table_rows([tool_row(sequence=0, payload=payload), tool_row(sequence=1, payload=payload)])
    rows[1]["sequence"] = "1.5"
    source = write_csv(tmp_path / "export.csv", rows)
    assert source.read_text(encoding="utf-8").count("\n") > 10
    assert located(source) == [(2, "bad-type")]
    assert records(source, tmp_path / "out.jsonl")[0]["outcome"] == "cancelled"


def test_a_csv_record_with_another_number_of_fields_is_unreadable_and_the_rest_is_read(tmp_path: Path) -> None:
    good = as_table_rows([tool_row(sequence=index) for index in range(4)])
    source = write_csv(tmp_path / "export.csv", good)
    lines = source.read_bytes().split(b"\r\n")
    lines[2] = lines[2] + b",surplus"
    source.write_bytes(b"\r\n".join(lines))
    assert located(source) == [(2, "unreadable-row")]
    assert report(source)["rows_read"] == 4
    assert "the record has 9 fields, the header 8" in report(source)["problems"][0]["message"]


def test_a_csv_with_a_byte_order_mark_and_backslash_n_nulls(tmp_path: Path) -> None:
    rows = as_table_rows([tool_row(sequence=0, crdate=None), step_row("llm", sequence=1, payload=None)])
    source = write_csv(tmp_path / "export.csv", rows, null="\\N")
    source.write_bytes(b"\xef\xbb\xbf" + source.read_bytes())
    read = records(source, tmp_path / "out.jsonl")
    assert [(record["sequence"], record["crdate"]) for record in read] == [(0, None), (1, 1_788_000_000)]


def test_tsv_undoes_mysql_batch_escapes(tmp_path: Path) -> None:
    tricky = {"toolName": "mcp_github_list", "toolIsError": False, "toolOutcome": "ok",
              "toolResult": "tab\there\nnew line \\ back\\\\slash \\n not a newline \0 nul, C:\\temp"}
    rows = as_table_rows([tool_row(sequence=0, payload=tricky), tool_row(sequence=1, crdate=None)])
    source = write_tsv(tmp_path / "export.tsv", rows)
    assert "\\\\n not a newline" in source.read_text(encoding="utf-8")
    read = records(source, tmp_path / "out.jsonl")
    assert read[0]["toolResultLength"] == len(tricky["toolResult"])
    assert read[1]["crdate"] is None, "NULL is null"
    assert row_checker_calls(source) == 0


def test_a_tsv_field_that_is_not_the_word_null_is_text(tmp_path: Path) -> None:
    source = write_tsv(tmp_path / "export.tsv", as_table_rows([tool_row(kind="NULLish", payload={})]))
    assert [record["kind"] for record in records(source, tmp_path / "out.jsonl")] == ["NULLish"]


def test_phpmyadmin_export_reads_the_event_table_and_the_other_nr_llm_tables_only(tmp_path: Path) -> None:
    rows = as_table_rows([tool_row(sequence=0), tool_row(sequence=1)])
    rows[1]["duration_ms"] = "x"
    text = phpmyadmin(rows, tables=("tx_nrllm_agentrun", "tx_nrllm_agentrun_event", "be_users"))
    source = _write(tmp_path / "dump.json", text)
    assert located(source) == [(2, "bad-type")]
    assert report(source)["rows_read"] == 3  # the two events and the run row; be_users is not nr-llm's


def test_a_phpmyadmin_export_of_nr_llm_tables_without_the_events_is_read_for_them(tmp_path: Path) -> None:
    source = _write(tmp_path / "dump.json", phpmyadmin([], tables=("tx_nrllm_agentrun", "be_users")))
    result = invoke("validate", source)
    assert result.exit_code == 0, result.stderr
    assert report(source)["rows_read"] == 1


def test_a_phpmyadmin_export_without_any_table_of_nr_llm_is_exit_2_naming_its_tables(tmp_path: Path) -> None:
    source = _write(tmp_path / "dump.json", phpmyadmin([], tables=("be_users", "pages")))
    result = invoke("validate", source)
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert "\n" not in line and str(source) in line and "tx_nrllm_agentrun_event" in line
    assert "'be_users'" in line and "'pages'" in line


@pytest.mark.slow
def test_a_build_from_a_csv_is_the_build_from_its_json_lines(tmp_path: Path) -> None:
    source = write_csv(tmp_path / "export.csv", as_table_rows(read_jsonl(SAMPLE)))
    build_ok(source, "--out", tmp_path / "csv", "--servers", SERVERS)
    build_ok(SAMPLE, "--out", tmp_path / "jsonl", "--servers", SERVERS)
    assert (tmp_path / "csv" / "summary.json").read_bytes() == (tmp_path / "jsonl" / "summary.json").read_bytes()


# ---------------------------------------------------------------- item 5: not UTF-8


BAD = b"\xff\xfe"


def test_a_json_line_with_bad_bytes_in_a_key_nobody_reads_is_unreadable(tmp_path: Path) -> None:
    lines = [json.dumps(tool_row(sequence=index)).encode() for index in range(5)]
    lines[2] = lines[2][:-1] + b', "comment": "' + BAD + b'"}'
    source = tmp_path / "rows.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    assert located(source) == [(3, "unreadable-row")]
    assert report(source)["rows_valid"] == 4


@pytest.mark.parametrize("name", ["export.csv", "export.csv.gz", "export.tsv", "export.json"])
def test_a_record_with_bad_bytes_is_unreadable_in_every_container(tmp_path: Path, name: str) -> None:
    rows = as_table_rows([tool_row(sequence=index) for index in range(4)])
    rows[1]["payload"] = json.dumps({"toolName": "mcp_github_list", "toolIsError": False, "note": "MARK"})
    source = WRITERS[name](tmp_path / name, rows)
    data = gzip.decompress(source.read_bytes()) if name.endswith(".gz") else source.read_bytes()
    data = data.replace(b"MARK", BAD)
    source.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    assert located(source) == [(2, "unreadable-row")]
    assert report(source)["rows_valid"] == 3


def test_a_json_array_with_bad_bytes_in_a_record_keeps_the_other_records(tmp_path: Path) -> None:
    source = tmp_path / "rows.json"
    rows = [json.dumps(tool_row(sequence=index)).encode() for index in range(3)]
    rows[0] = rows[0][:-1] + b', "note": "' + BAD + b'"}'
    source.write_bytes(b"[" + b",\n".join(rows) + b"]")
    assert located(source) == [(1, "unreadable-row")]


def test_a_parquet_file_of_text_columns_reads_numbers_as_strings(tmp_path: Path) -> None:
    rows = as_table_rows(read_jsonl(SAMPLE)[:50])
    source = tmp_path / "export.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([(column, pa.string()) for column in COLUMNS])), source)
    assert report(source)["rows_rejected"] == 0
    assert row_checker_calls(source) == 0


@pytest.mark.parametrize("name", ["export.csv", "export.tsv"])
def test_a_bad_record_after_many_arrow_batches_leaves_the_earlier_ones_read_once(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrow reads block by block; where it stops, Python's reader takes over from the next record."""
    from nrllm_report.readers import delimited

    monkeypatch.setattr(delimited, "BLOCK_BYTES", 512)
    rows = as_table_rows([tool_row(sequence=index) for index in range(60)])
    source = WRITERS[name](tmp_path / name, rows)
    lines = source.read_bytes().split(b"\n")
    separator = b"," if name.endswith(".csv") else b"\t"
    lines[50] = lines[50].rstrip(b"\r") + separator + b"surplus" + (b"\r" if name.endswith(".csv") else b"")
    source.write_bytes(b"\n".join(lines))
    dialect = delimited.TSV_DIALECT if name.endswith(".tsv") else delimited.CSV_DIALECT
    batches = 0
    with pytest.raises(pa.ArrowInvalid):
        for _table in delimited._arrow_tables(source, list(COLUMNS), dialect=dialect):
            batches += 1
    assert batches > 1, "the bad record is not in Arrow's first batch"
    result = report(source)
    assert [(problem["row"], problem["rule"]) for problem in result["problems"]] == [(50, "unreadable-row")]
    assert (result["rows_read"], result["rows_valid"]) == (60, 59)


@pytest.mark.parametrize("name", ["export.csv", "export.tsv.gz", "export.json"])
def test_the_timeline_of_a_run_in_a_database_tools_export_is_the_one_from_json_lines(tmp_path: Path, name: str) -> None:
    source = WRITERS[name](tmp_path / name, as_table_rows(read_jsonl(SAMPLE)))
    run = next(row["run"] for row in read_jsonl(SAMPLE) if '"cancelled"' in row["payload"])
    for label, path in (("export", source), ("jsonl", SAMPLE)):
        result = invoke("timeline", run, path, "--out", tmp_path / f"{label}.html", "--servers", SERVERS)
        assert result.exit_code == 0, failure_text(result)
    assert (tmp_path / "export.html").read_bytes() == (tmp_path / "jsonl.html").read_bytes()
