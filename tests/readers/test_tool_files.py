"""The files real tools write: the files MariaDB's and PostgreSQL's own tools write
from nr-llm's table read back as the rows they came from, and the ones that cannot be read
so are refused with a line that says how to export instead.

The first half writes such files by hand, to pin the edges (a header missing, MySQL's
escapes at a block boundary, ``--raw`` seen late); the second half has real servers write
them (``db`` marker) from the sample's rows and builds each with the CLI as a real process.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from command_line import run_cli
from db_servers import (
    EVENT_COLUMNS,
    EVENTS_TABLE,
    MariaDB,
    PostgreSQL,
    as_event_rows,
    create_events_table,
    load_events,
)
from fast_path.test_one_verdict import assert_one_verdict
from site_helpers import REPO, SAMPLE, SAMPLE_SERVERS, read_jsonl, site_files, write_jsonl

SERVERS = ",".join(SAMPLE_SERVERS)
MARKER = ".nrllm-report-site.json"
HEADER = ("uid", "run", "sequence", "kind", "round", "duration_ms", "payload", "crdate")
BLOCK = 1 << 20  # what the readers read to tell a file's dialect, and MySQL's escapes are undone by


def one_line_refusal(completed: Any, path: Path | str) -> str:
    """A refusal as a user sees it: exit 2, one line on stderr naming the file, no traceback."""
    assert completed.returncode == 2, completed.stderr
    line = completed.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert str(path) in line
    return line


def validate(path: Path) -> dict[str, Any]:
    completed = run_cli("validate", path, "--format", "json", "--servers", SERVERS)
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


def normalized(path: Path, out: Path) -> list[dict[str, Any]]:
    completed = run_cli("normalize", path, "--out", out, "--servers", SERVERS)
    assert completed.returncode in (0, 1), completed.stderr
    return read_jsonl(out)


def tool_line(sequence: int, payload: str, delimiter: str = "\t") -> str:
    return delimiter.join(["1", "7", str(sequence), "tool", "1", "12.50", payload, "1788000000"])


# ---------------------------------------------------------------- a header row is needed


HEADERLESS = {
    "events.csv": '1,7,0,tool,1,12.50,"{""toolName"":""kb_lookup"",""toolIsError"":false}",1788000000\n',
    "events.tsv": '1\t7\t0\ttool\t1\t12.50\t{"toolName":"kb_lookup","toolIsError":false}\t1788000000\n',
}


@pytest.mark.parametrize("command", ["validate", "build", "gate"])
@pytest.mark.parametrize("records", [1, 3], ids=["one-record", "three-records"])
@pytest.mark.parametrize("name", list(HEADERLESS))
def test_a_file_without_a_header_row_is_refused_saying_how_to_get_one(
    tmp_path: Path, name: str, records: int, command: str
) -> None:
    source = tmp_path / name
    source.write_text(HEADERLESS[name] * records, encoding="utf-8")
    extra = ["--out", tmp_path / "site"] if command == "build" else []
    line = one_line_refusal(run_cli(command, source, *extra), source)
    assert "has no header row" in line and "looks like data" in line
    for how in ("mysql --batch", "INTO OUTFILE", "CSV HEADER", "TO STDOUT (HEADER)", "phpMyAdmin"):
        assert how in line, how
    assert not (tmp_path / "site").exists(), "nothing is written"


@pytest.mark.parametrize("name", ["events.csv", "events.tsv"])
def test_a_header_row_without_the_needed_columns_names_the_missing_ones(tmp_path: Path, name: str) -> None:
    delimiter = "," if name.endswith(".csv") else "\t"
    source = tmp_path / name
    source.write_text(delimiter.join(["uid", "run_uid", "sequence", "type", "payload"]) + "\n"
                      + delimiter.join(["1", "7", "0", "llm", "{}"]) + "\n", encoding="utf-8")
    line = one_line_refusal(run_cli("validate", source), source)
    assert "without the columns 'run', 'kind'" in line and "'run_uid'" in line
    assert "looks like data" not in line


def test_a_repeated_value_in_a_headerless_first_line_is_said_as_missing_header_not_a_repeated_column(
    tmp_path: Path
) -> None:
    source = tmp_path / "events.tsv"
    source.write_text(tool_line(0, "{}").replace("\t1\t", "\t0\t") + "\n", encoding="utf-8")
    line = one_line_refusal(run_cli("validate", source), source)
    assert "has no header row" in line and "twice" not in line


def test_mysqldump_tab_output_is_refused_with_how_to_export_instead(tmp_path: Path) -> None:
    source = tmp_path / f"{EVENTS_TABLE}.txt"
    source.write_text(HEADERLESS["events.tsv"], encoding="utf-8")
    line = one_line_refusal(run_cli("build", source, "--out", tmp_path / "site"), source)
    assert "mysqldump --tab" in line and "mysql --batch" in line


# ---------------------------------------------------------------- MySQL's dialects


def mysql_csv_field(text: str) -> str:
    """A text as ``INTO OUTFILE ... OPTIONALLY ENCLOSED BY '"'`` writes it (MariaDB's escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\\n").replace("\0", "\\0") + '"'


@pytest.mark.parametrize("shift", range(-2, 3), ids=lambda shift: f"escape-at-block{shift:+d}")
def test_mysql_csv_escapes_read_as_mysql_writes_them_across_block_boundaries(tmp_path: Path, shift: int) -> None:
    """``\\"``, ``\\\\``, ``\\N`` and an escaped line break read back as their text, even where one
    straddles the 1 MiB blocks the escapes are undone in (``shift`` 0: a backslash is a block's last byte)."""
    result = 'said "no"\\ C:\\temp\\ and\na new line'
    payload = json.dumps({"toolName": "kb_lookup", "toolIsError": False, "toolResult": result})
    header = ",".join(f'"{column}"' for column in HEADER) + "\n"
    second = ",".join(["2", "7", "1", "tool", "1", "12.50", mysql_csv_field(payload), "\\N"])
    first = ",".join(
        [
            "1",
            "7",
            "0",
            "llm",
            "1",
            "0.00",
            mysql_csv_field(json.dumps({"pad": ""}, separators=(",", ":"))),
            "1788000000",
        ]
    )
    padding = BLOCK - 1 + shift - (len(header) + len(first) + 1 + second.index("\\"))
    first = first.replace('"pad\\":\\"', '"pad\\":\\"' + "x" * padding)
    source = tmp_path / "outfile.csv"
    source.write_text(header + first + "\n" + second + "\n", encoding="utf-8")
    assert source.read_bytes()[BLOCK - 1 + shift:BLOCK + shift] == b"\\"
    records = normalized(source, tmp_path / "out.jsonl")
    assert [(record["sequence"], record["crdate"]) for record in records] == [(0, 1788000000), (1, None)]
    assert records[1]["toolResultLength"] == len(result)
    assert_one_verdict(source)


def test_into_outfile_tab_form_keeps_an_escaped_line_break_and_tab_in_a_field(tmp_path: Path) -> None:
    """INTO OUTFILE's default form escapes a line break and a tab with a backslash before the
    character itself: a pretty-printed payload is one record, not three."""
    payload = '{\n\t"toolName": "kb_lookup",\n\t"toolIsError": true, "toolOutcome": "cancelled"}'
    written = payload.replace("\\", "\\\\").replace("\n", "\\\n").replace("\t", "\\\t")
    source = tmp_path / "outfile.tsv"
    source.write_text("\t".join(HEADER) + "\n" + tool_line(0, written) + "\n"
                      + tool_line(1, '{"toolName":"kb_lookup","toolIsError":false}') + "\n", encoding="utf-8")
    report = validate(source)
    assert report["rows_read"] == 2 and report["problems"] == []
    assert [record["outcome"] for record in normalized(source, tmp_path / "out.jsonl")] == ["cancelled", "ok"]


def raw_payload() -> str:
    """A payload as PHP writes it, which ``mysql --batch --raw`` writes as it stands."""
    return json.dumps({"toolName": "kb_lookup", "toolIsError": False, "toolResult": "Grüße/n"}).replace("/", "\\/")


def test_mysql_raw_output_is_read_as_it_stands(tmp_path: Path) -> None:
    escaped = tmp_path / "batch.tsv"
    raw = tmp_path / "raw.tsv"
    escaped.write_text("\t".join(HEADER) + "\n" + tool_line(0, raw_payload().replace("\\", "\\\\")) + "\n", "utf-8")
    raw.write_text("\t".join(HEADER) + "\n" + tool_line(0, raw_payload()) + "\n", "utf-8")
    assert normalized(raw, tmp_path / "raw.jsonl") == normalized(escaped, tmp_path / "batch.jsonl")
    assert read_jsonl(tmp_path / "raw.jsonl")[0]["toolResultLength"] == len("Grüße/n")


def test_mysql_raw_output_seen_only_past_the_first_block_is_refused(tmp_path: Path) -> None:
    plain = tool_line(0, json.dumps({"toolName": "kb_lookup", "toolIsError": False}))
    rows = BLOCK // len(plain) + 10
    lines = [plain.replace("\t0\t", f"\t{index}\t", 1) for index in range(rows)]
    lines.append(tool_line(rows, raw_payload()))
    source = tmp_path / "raw.tsv"
    source.write_text("\t".join(HEADER) + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    line = one_line_refusal(run_cli("validate", source), source)
    assert f"row {rows + 1} " in line and "--raw" in line and "without --raw" in line


# ---------------------------------------------------------------- a payload that is not JSON


@pytest.mark.parametrize(
    ("text", "breaks_at"),
    [
        pytest.param('{"toolName": tru}', "tru}", id="bad-literal"),
        pytest.param('{"toolName": "kb_lookup" "toolIsError": true}', '"toolIsError"', id="missing-comma"),
        pytest.param("toolName=kb_lookup", "toolName=kb_lookup", id="not-json-at-all"),
        pytest.param('{"toolName": "kb', '"kb', id="unterminated-string"),
        pytest.param('{"toolName":', "", id="cut-off"),
    ],
)
def test_a_payload_text_that_is_not_json_says_so_and_where(tmp_path: Path, text: str, breaks_at: str) -> None:
    source = tmp_path / "events.csv"
    quoted = '"' + text.replace('"', '""') + '"'
    source.write_text(",".join(HEADER) + "\n" + tool_line(0, quoted, ",") + "\n", encoding="utf-8")
    (problem,) = validate(source)["problems"]
    assert (problem["row"], problem["rule"]) == (1, "bad-type")
    if breaks_at:
        position = text.rindex(breaks_at) + 1
        said = f"it cannot be read from character {position} on, of {len(text)}"
    else:
        said = f"it ends at character {len(text) + 1} before the JSON does"
    assert problem["message"] == f"payload is text that is not JSON: {said}"
    assert breaks_at not in problem["message"] or not breaks_at, "where, never the text: it may be content"
    assert_one_verdict(source)


def test_a_payload_text_holding_json_of_another_type_says_which(tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    write_jsonl(source, [{"run": 7, "sequence": 0, "kind": "llm", "payload": "[1, 2]"}])
    (problem,) = validate(source)["problems"]
    assert problem["message"] == "payload must be a JSON object, got JSON text holding an array"


# ---------------------------------------------------------------- real servers write the files


@pytest.fixture(scope="module")
def event_rows() -> list[dict[str, Any]]:
    return as_event_rows(read_jsonl(SAMPLE))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, event_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The sample's rows as nr-llm stores them, as JSON Lines, built and normalized once."""
    folder = tmp_path_factory.mktemp("reference")
    source = write_jsonl(folder / "events.jsonl", [
        {column: (float(row[column]) if column == "duration_ms" else row[column]) for column in HEADER}
        for row in event_rows])
    return {"site": built_site(source, folder / "site"), "records": normalized(source, folder / "records.jsonl")}


@pytest.fixture(scope="module")
def loaded_mariadb(mariadb: MariaDB, event_rows: list[dict[str, Any]]) -> MariaDB:
    create_events_table(mariadb)
    load_events(mariadb, event_rows)
    return mariadb


@pytest.fixture(scope="module")
def loaded_postgresql(postgresql: PostgreSQL, event_rows: list[dict[str, Any]]) -> PostgreSQL:
    create_events_table(postgresql)
    load_events(postgresql, event_rows)
    return postgresql


QUERY = f"SELECT * FROM {EVENTS_TABLE} ORDER BY uid"
NAMES = ", ".join(f"'{column}'" for column in EVENT_COLUMNS)
OUTFILE_CSV = "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"'"


def client_output(command: list[str], path: Path) -> Path:
    completed = subprocess.run(command, capture_output=True, check=True, timeout=300)
    path.write_bytes(completed.stdout)
    return path


def guide_outfile_recipe() -> str:
    """The user guide's ``SELECT ... INTO OUTFILE`` recipe (docs/guide.md), as a user copies it."""
    section = (REPO / "docs" / "guide.md").read_text(encoding="utf-8").split("### Exporting the events table", 1)[1]
    return section.split("```sql\n", 1)[1].split("```", 1)[0]


def test_the_guide_gives_the_outfile_recipe_with_its_header_row() -> None:
    """The recipe the database tests run is where users read it (no server needed to see it moved)."""
    recipe = guide_outfile_recipe()
    assert recipe.startswith("SELECT 'uid', ") and "UNION ALL" in recipe
    assert "INTO OUTFILE '/var/lib/mysql-files/events.csv'" in recipe


def outfile(server: MariaDB, name: str, header: bool, fields: str = "") -> Path:
    """``SELECT ... INTO OUTFILE``: the guide's recipe (its header row), or the query alone without one."""
    target = server.files / name
    if header:
        recipe = guide_outfile_recipe().replace("/var/lib/mysql-files/events.csv", str(target))
        statement = recipe if fields else "\n".join(line for line in recipe.splitlines()
                                                     if not line.startswith("FIELDS")) + ";"
        assert statement.count(str(target)) == 1
    else:
        statement = f"{QUERY} INTO OUTFILE '{target}' {fields};"
    server.sql(statement)
    return target


def psql_copy_csv(server: PostgreSQL, path: Path) -> Path:
    server.sql(f"\\copy ({QUERY}) TO '{path}' CSV HEADER")
    return path


MARIADB_WRITERS: dict[str, Callable[[MariaDB, Path], Path]] = {
    "mysql-batch": lambda server, folder: client_output(server.client("--batch", "-e", QUERY), folder / "events.tsv"),
    "mysql-batch-raw": lambda server, folder: client_output(
        server.client("--batch", "--raw", "-e", QUERY), folder / "events.tsv"),
    "into-outfile-csv": lambda server, folder: outfile(server, "events.csv", True, OUTFILE_CSV),
    "into-outfile-tab": lambda server, folder: outfile(server, "events.tsv", True),
}
POSTGRES_WRITERS: dict[str, Callable[[PostgreSQL, Path], Path]] = {
    "psql-copy-csv-header": lambda server, folder: psql_copy_csv(server, folder / "events.csv"),
    "copy-to-stdout-header": lambda server, folder: client_output(
        server.client("-c", f"COPY ({QUERY}) TO STDOUT (HEADER)"), folder / "events.tsv"),
}


def built_site(source: Path, out: Path) -> dict[str, bytes]:
    """The site built from ``source`` by the CLI as a real process, file by file, the marker aside;
    the input's name, which the problems pages show, spelled ``INPUT``."""
    completed = run_cli("build", source, "--out", out, "--servers", SERVERS, timeout=600)
    assert completed.returncode == 0, completed.stderr
    return site_of(out, str(source))


def site_of(out: Path, input_name: str) -> dict[str, bytes]:
    """A built site's files, the marker aside, the input's name spelled ``INPUT``."""
    return {name: content.replace(input_name.encode(), b"INPUT")
            for name, content in site_files(out).items() if name != MARKER}


def assert_same_as_reference(source: Path, folder: Path, reference: dict[str, Any], rows: int) -> None:
    assert validate(source)["rows_read"] == rows
    assert normalized(source, folder / "records.jsonl") == reference["records"]
    built = built_site(source, folder / "site")
    assert built["summary.json"] == reference["site"]["summary.json"]
    differing = sorted(name for name in set(built) | set(reference["site"])
                       if name != MARKER and built.get(name) != reference["site"].get(name))
    assert differing == []


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("tool", list(MARIADB_WRITERS))
def test_what_mariadbs_tools_write_builds_the_site_of_the_rows(
    loaded_mariadb: MariaDB, tool: str, tmp_path: Path, reference: dict[str, Any], event_rows: list[dict[str, Any]]
) -> None:
    source = MARIADB_WRITERS[tool](loaded_mariadb, tmp_path)
    assert_same_as_reference(source, tmp_path, reference, len(event_rows))


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("tool", list(POSTGRES_WRITERS))
def test_what_postgresqls_tools_write_builds_the_site_of_the_rows(
    loaded_postgresql: PostgreSQL, tool: str, tmp_path: Path, reference: dict[str, Any],
    event_rows: list[dict[str, Any]],
) -> None:
    source = POSTGRES_WRITERS[tool](loaded_postgresql, tmp_path)
    assert_same_as_reference(source, tmp_path, reference, len(event_rows))


@pytest.mark.db
def test_the_raw_export_differs_from_the_batch_export_only_in_its_escapes(
    loaded_mariadb: MariaDB, tmp_path: Path
) -> None:
    """The sample's payloads as PHP writes them hold ``\\/`` and ``\\u``: ``--raw`` really is another file."""
    batch = client_output(loaded_mariadb.client("--batch", "-e", QUERY), tmp_path / "batch.tsv")
    raw = client_output(loaded_mariadb.client("--batch", "--raw", "-e", QUERY), tmp_path / "raw.tsv")
    assert batch.read_bytes() != raw.read_bytes()
    assert batch.read_bytes().replace(b"\\\\", b"\\") == raw.read_bytes()


@pytest.mark.db
@pytest.mark.parametrize("fields", ["", OUTFILE_CSV], ids=["tab", "csv"])
def test_into_outfile_without_the_recipes_header_is_refused_saying_how(loaded_mariadb: MariaDB, fields: str) -> None:
    target = outfile(loaded_mariadb, "headerless.csv" if fields else "headerless.tsv", False, fields)
    line = one_line_refusal(run_cli("validate", target), target)
    assert "has no header row" in line and "UNION ALL" in line


@pytest.mark.db
def test_copy_to_stdout_without_header_is_refused_saying_how(loaded_postgresql: PostgreSQL, tmp_path: Path) -> None:
    target = client_output(loaded_postgresql.client("-c", f"COPY ({QUERY}) TO STDOUT"), tmp_path / "events.tsv")
    line = one_line_refusal(run_cli("validate", target), target)
    assert "has no header row" in line and "COPY ... TO STDOUT (HEADER)" in line


@pytest.mark.slow
@pytest.mark.db
def test_mysqldump_tab_files_are_refused_with_how_to_export_instead(loaded_mariadb: MariaDB, tmp_path: Path) -> None:
    subprocess.run(loaded_mariadb.dump_command(f"--tab={loaded_mariadb.files}") + [EVENTS_TABLE],
                   check=True, capture_output=True, timeout=300)
    for written in (loaded_mariadb.files / f"{EVENTS_TABLE}.txt", loaded_mariadb.files / f"{EVENTS_TABLE}.sql"):
        line = one_line_refusal(run_cli("build", written, "--out", tmp_path / "site"), written)
        assert "mysqldump --tab" in line and "mysql --batch" in line
    renamed = tmp_path / "events.tsv"
    renamed.write_bytes((loaded_mariadb.files / f"{EVENTS_TABLE}.txt").read_bytes())
    assert "has no header row" in one_line_refusal(run_cli("validate", renamed), renamed)
