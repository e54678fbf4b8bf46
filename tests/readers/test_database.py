"""``--db URL``: the events table read straight from its database (SQLite, and real
MariaDB and PostgreSQL servers as a user with SELECT privilege alone), checked like a file,
read-only, and refused in one line where it cannot be read."""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from command_line import cli_command, run_cli
from db_servers import (
    EVENT_COLUMNS,
    EVENTS_TABLE,
    OTHER_TABLES,
    READER_USER,
    MariaDB,
    PostgreSQL,
    Server,
    create_events_table,
    create_reader,
    free_port,
    load_events,
    load_other_tables,
    mysql_literal,
    postgres_literal,
    skip_outside_ci,
    table_ddl,
    table_rows,
)
from site_helpers import read_jsonl, site_files, write_jsonl

from nrllm_report.readers.resume import MARGIN_SECONDS
from readers.test_tool_files import HEADER, MARKER, SERVERS, event_rows, one_line_refusal, reference, site_of

__all__ = ["event_rows", "reference"]  # the fixtures this module shares with test_tool_files

# The events table as TYPO3's schema migration makes it on SQLite (Doctrine's SQLite platform).
SQLITE_EVENTS_DDL = f"""
CREATE TABLE {EVENTS_TABLE} (
    uid INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL,
    pid INTEGER UNSIGNED DEFAULT 0 NOT NULL,
    tstamp INTEGER UNSIGNED DEFAULT 0 NOT NULL,
    crdate INTEGER UNSIGNED DEFAULT 0 NOT NULL,
    run INTEGER UNSIGNED DEFAULT 0 NOT NULL,
    sequence INTEGER UNSIGNED DEFAULT 0 NOT NULL,
    kind VARCHAR(32) DEFAULT '' NOT NULL,
    round INTEGER UNSIGNED DEFAULT 0 NOT NULL,
    duration_ms NUMERIC(10, 2) DEFAULT '0.00' NOT NULL,
    payload CLOB DEFAULT NULL
)
"""


def sqlite_database(path: Path, rows: list[dict[str, Any]], other_tables: tuple[str, ...] = ()) -> Path:
    with sqlite3.connect(path) as connection:
        connection.execute(SQLITE_EVENTS_DDL)
        connection.execute(f"CREATE INDEX run_sequence ON {EVENTS_TABLE} (run, sequence)")
        placeholders = ", ".join("?" for _ in EVENT_COLUMNS)
        connection.executemany(f"INSERT INTO {EVENTS_TABLE} ({', '.join(EVENT_COLUMNS)}) VALUES ({placeholders})",
                               [tuple(row[column] for column in EVENT_COLUMNS) for row in rows])
        for table in other_tables:
            connection.execute(f"CREATE TABLE {table} (uid INTEGER PRIMARY KEY)")
    connection.close()
    return path


def url_of(path: Path) -> str:
    return f"sqlite:///{path}"  # an absolute path: four slashes in all


@pytest.fixture(scope="module")
def sample_database(tmp_path_factory: pytest.TempPathFactory, event_rows: list[dict[str, Any]]) -> Path:
    return sqlite_database(tmp_path_factory.mktemp("sqlite") / "typo3.sqlite", event_rows)


@pytest.mark.slow
def test_a_build_from_sqlite_is_the_build_from_its_rows_exported(
    sample_database: Path, tmp_path: Path, reference: dict[str, Any], event_rows: list[dict[str, Any]]
) -> None:
    before = hashlib.sha256(sample_database.read_bytes()).hexdigest()
    report = validate_db(sample_database)
    assert report["rows_read"] == len(event_rows)
    assert normalized_db(sample_database, tmp_path / "records.jsonl") == reference["records"]
    site = built_site_db(sample_database, tmp_path / "site")
    assert site == reference["site"]
    assert hashlib.sha256(sample_database.read_bytes()).hexdigest() == before, "the database is only read"
    assert sorted(entry.name for entry in sample_database.parent.iterdir()) == [sample_database.name]


def validate_db(database: Path) -> dict[str, Any]:
    completed = run_cli("validate", "--db", url_of(database), "--format", "json", "--servers", SERVERS)
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


def normalized_db(database: Path, out: Path) -> list[dict[str, Any]]:
    completed = run_cli("normalize", "--db", url_of(database), "--out", out, "--servers", SERVERS)
    assert completed.returncode in (0, 1), completed.stderr
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def built_site_db(database: Path, out: Path) -> dict[str, bytes]:
    completed = run_cli("build", "--db", url_of(database), "--out", out, "--servers", SERVERS, timeout=600)
    assert completed.returncode == 0, completed.stderr
    return site_of(out, f"{url_of(database)}#{EVENTS_TABLE}")


def test_a_bad_row_in_the_database_is_named_by_table_and_uid(tmp_path: Path, event_rows: list[dict[str, Any]]) -> None:
    rows = [dict(row) for row in event_rows[:20]]
    bad = rows[7]
    bad["sequence"] = "seven"
    database = sqlite_database(tmp_path / "typo3.sqlite", rows)
    report = validate_db(database)
    assert report["rows_read"] == len(rows)
    assert [(problem["input"], problem["row"], problem["rule"]) for problem in report["problems"]
            if problem["severity"] == "error"] == [(f"{url_of(database)}#{EVENTS_TABLE}", bad["uid"], "bad-type")]


@pytest.mark.slow
def test_a_timeline_from_sqlite_is_the_one_from_the_rows_exported(
    sample_database: Path, tmp_path: Path, event_rows: list[dict[str, Any]]
) -> None:
    run = str(event_rows[len(event_rows) // 2]["run"])
    exported = tmp_path / "events.jsonl"
    exported.write_text("".join(json.dumps({column: row[column] for column in EVENT_COLUMNS}) + "\n"
                                for row in event_rows), encoding="utf-8")
    for source, out in (
        (["--db", url_of(sample_database)], tmp_path / "db.json"),
        ([exported], tmp_path / "file.json"),
    ):
        completed = run_cli("timeline", run, *source, "--out", out, "--servers", SERVERS)
        assert completed.returncode == 0, completed.stderr
    assert json.loads((tmp_path / "db.json").read_text()) == json.loads((tmp_path / "file.json").read_text())


@pytest.mark.parametrize("command", ["validate", "build", "gate", "normalize"])
def test_a_database_without_the_events_table_is_refused_naming_its_tables(tmp_path: Path, command: str) -> None:
    database = tmp_path / "typo3.sqlite"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE be_users (uid INTEGER PRIMARY KEY)")
    connection.close()
    extra = {"build": ["--out", tmp_path / "site"], "normalize": ["--out", tmp_path / "out.jsonl"]}.get(command, [])
    line = one_line_refusal(run_cli(command, "--db", url_of(database), *extra), url_of(database))
    assert f"has no table '{EVENTS_TABLE}'" in line and "'be_users'" in line
    assert not (tmp_path / "site").exists() and not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        pytest.param("sqlite:///{tmp}/missing.sqlite", "no such database file", id="missing-file"),
        pytest.param("sqlite:///{tmp}/not-a-database.sqlite", "file is not a database", id="not-a-database"),
        pytest.param("oracle://scott@db/typo3", "unknown database 'oracle'", id="unknown-scheme"),
        pytest.param("sqlite://", "names no file", id="no-path"),
    ],
)
def test_a_database_that_cannot_be_read_is_one_line_and_exit_2(tmp_path: Path, url: str, said: str) -> None:
    (tmp_path / "not-a-database.sqlite").write_text("uid,run\n", encoding="utf-8")
    url = url.format(tmp=tmp_path)
    completed = run_cli("validate", "--db", url)
    assert completed.returncode == 2, completed.stderr
    line = completed.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and said in line


def test_a_password_in_the_url_is_refused_and_never_echoed() -> None:
    completed = run_cli("validate", "--db", "mysql://report:s3cret-pw@db.example/typo3")
    assert completed.returncode == 2
    line = completed.stderr.strip()
    assert "s3cret-pw" not in line and "NRLLM_REPORT_DB" in line and "--db-env" in line


# ---------------------------------------------------------------- MariaDB and PostgreSQL, real servers

READER_PASSWORD = "select-only pw"


@pytest.fixture(scope="module")
def served(mariadb: MariaDB, postgresql: PostgreSQL, event_rows: list[dict[str, Any]],
           table_rows_by_table: dict[str, list[dict[str, Any]]]) -> dict[str, Server]:
    """Both servers, holding the sample's rows of every table."""
    for server in (mariadb, postgresql):
        create_events_table(server)
        load_events(server, event_rows)
        load_other_tables(server, table_rows_by_table)
    return {"mariadb": mariadb, "postgresql": postgresql}


def run_db(*args: Any, password: str | None = READER_PASSWORD, variable: str = "NRLLM_REPORT_DB",
           timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The CLI as a real process, the password (if any) in the environment only."""
    env = {key: value for key, value in os.environ.items() if key not in ("NRLLM_REPORT_DB", "PGPASSWORD")}
    env["HOME"] = os.environ.get("HOME", "/root")
    if password is not None:
        env[variable] = password
    return subprocess.run(cli_command(*args), capture_output=True, text=True, encoding="utf-8", env=env,
                          timeout=timeout, check=False)


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_a_build_from_the_database_as_a_select_only_user_is_the_build_from_the_samples_files(
    served: dict[str, Server], database: str, tmp_path: Path, whole_reference: dict[str, bytes],
    event_rows: list[dict[str, Any]], table_rows_by_table: dict[str, list[dict[str, Any]]],
) -> None:
    """Every table read, as a user granted SELECT on the database and nothing else, gives the site of
    the sample's files, byte for byte."""
    url = create_reader(served[database], READER_PASSWORD)
    completed = run_db("validate", "--db", url, "--format", "json", "--servers", SERVERS)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["rows_read"] == len(event_rows) + sum(map(len, table_rows_by_table.values()))
    assert "note:" not in completed.stderr
    completed = run_db("build", "--db", url, "--out", tmp_path / "site", "--servers", SERVERS)
    assert completed.returncode == 0, completed.stderr
    assert whole_site(tmp_path / "site", database_names(url)) == whole_reference
    assert READER_PASSWORD not in completed.stdout + completed.stderr


def installed_mysql_driver(driver: str) -> None:
    """Skip where ``driver`` is not installed; under CI, which installs both, fail instead."""
    from nrllm_report.readers.database import MYSQL_DRIVERS

    try:
        __import__(f"{MYSQL_DRIVERS[driver]}.cursors")
    except ImportError:
        skip_outside_ci(f"the MySQL driver {driver} is not installed", "MariaDB's reads through both drivers")


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("driver", ["mysqlclient", "pymysql"])
def test_mariadb_read_through_either_driver_is_the_build_from_the_samples_files(
    served: dict[str, Server], driver: str, tmp_path: Path, whole_reference: dict[str, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mysqlclient (rows parsed in C) and PyMySQL give the same site, byte for byte; the one named
    by NRLLM_REPORT_MYSQL_DRIVER is the one that reads."""
    from nrllm_report.readers.database import MYSQL_DRIVER_ENV, DatabaseSession, parse_database_url

    installed_mysql_driver(driver)
    url = create_reader(served["mariadb"], READER_PASSWORD)
    monkeypatch.setenv(MYSQL_DRIVER_ENV, driver)
    monkeypatch.setenv("NRLLM_REPORT_DB", READER_PASSWORD)
    session = DatabaseSession(parse_database_url(url))
    rows = sum(chunk.table.num_rows for chunk in session.chunks(EVENTS_TABLE))
    assert rows > 0 and session._backend is not None and session._backend.driver_name == driver
    session.close()
    completed = run_db("build", "--db", url, "--out", tmp_path / "site", "--servers", SERVERS)
    assert completed.returncode == 0, completed.stderr
    assert whole_site(tmp_path / "site", database_names(url)) == whole_reference


@pytest.mark.db
def test_mariadb_is_read_through_mysqlclient_where_it_is_installed(
    served: dict[str, Server], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no driver named, the faster one installed reads (CI installs it, as the README says)."""
    from nrllm_report.readers.database import MYSQL_DRIVER_ENV, DatabaseSession, parse_database_url

    installed_mysql_driver("mysqlclient")
    monkeypatch.delenv(MYSQL_DRIVER_ENV, raising=False)
    monkeypatch.setenv("NRLLM_REPORT_DB", READER_PASSWORD)
    session = DatabaseSession(parse_database_url(create_reader(served["mariadb"], READER_PASSWORD)))
    assert session.tables()
    assert session._backend is not None and session._backend.driver_name == "mysqlclient"
    session.close()


def test_a_mysql_driver_of_no_such_name_is_one_line_and_exit_2() -> None:
    env = {**os.environ, "NRLLM_REPORT_MYSQL_DRIVER": "odbc", "NRLLM_REPORT_DB": "pw"}
    completed = subprocess.run(cli_command("validate", "--db", "mariadb://report@127.0.0.1:1/typo3"),
                               capture_output=True, text=True, env=env, timeout=120, check=False)
    assert completed.returncode == 2
    assert completed.stderr.strip() == ("Error: mariadb://report@127.0.0.1:1/typo3: NRLLM_REPORT_MYSQL_DRIVER='odbc' "
                                        "names no driver; it may be mysqlclient or pymysql")


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_the_events_alone_granted_read_as_the_events_and_say_the_other_tables_once(
    served: dict[str, Server], database: str, tmp_path: Path, reference: dict[str, Any],
    event_rows: list[dict[str, Any]],
) -> None:
    url = create_reader(served[database], READER_PASSWORD, grant="events")
    completed = run_db("normalize", "--db", url, "--out", tmp_path / "records.jsonl", "--servers", SERVERS)
    assert completed.returncode == 0, completed.stderr
    assert [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()] == reference["records"]
    notes = [line for line in completed.stderr.splitlines() if "note:" in line]
    assert len(notes) == 1 and all(table in notes[0] for table in OTHER_TABLES), completed.stderr
    completed = run_db("build", "--db", url, "--out", tmp_path / "site", "--servers", SERVERS)
    assert completed.returncode == 0, completed.stderr
    assert site_of(tmp_path / "site", f"{url}#{EVENTS_TABLE}") == reference["site"]


@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_db_env_names_the_variable_that_holds_the_password(served: dict[str, Server], database: str) -> None:
    url = create_reader(served[database], READER_PASSWORD)
    completed = run_db("validate", "--db", url, "--db-env", "REPORT_DB_PASSWORD", variable="REPORT_DB_PASSWORD")
    assert completed.returncode == 0, completed.stderr


def refused(completed: subprocess.CompletedProcess[str], url: str) -> str:
    assert completed.returncode == 2, completed.stdout + completed.stderr
    line = completed.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and url in line, line
    assert READER_PASSWORD not in line
    return line


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_what_stops_a_database_read_is_one_line_and_exit_2(
    served: dict[str, Server], database: str, tmp_path: Path
) -> None:
    server = served[database]
    url = create_reader(server, READER_PASSWORD)
    out = tmp_path / "site"
    wrong = refused(run_db("build", "--db", url, "--out", out, password="not the password"), url)
    assert "cannot connect" in wrong and ("Access denied" in wrong or "password authentication failed" in wrong)
    closed_port = url.replace(f":{server.port}/", f":{free_port()}/")
    assert "cannot connect" in refused(run_db("validate", "--db", closed_port), closed_port)
    unknown = url.rsplit("/", 1)[0] + "/no_such_database"
    assert "no_such_database" in refused(run_db("validate", "--db", unknown), unknown)
    denied = create_reader(server, READER_PASSWORD, grant=False)
    line = refused(run_db("build", "--db", denied, "--out", out), denied)
    assert "denied" in line
    assert not out.exists(), "nothing is written"


@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_a_database_without_the_events_table_is_refused(
    served: dict[str, Server], database: str, event_rows: list[dict[str, Any]]
) -> None:
    server = served[database]
    url = create_reader(server, READER_PASSWORD)
    server.sql(f"ALTER TABLE {EVENTS_TABLE} RENAME TO {EVENTS_TABLE}_kept;")
    try:
        line = refused(run_db("validate", "--db", url), url)
        assert EVENTS_TABLE in line and "cannot be read" in line
    finally:
        server.sql(f"ALTER TABLE {EVENTS_TABLE}_kept RENAME TO {EVENTS_TABLE};")


# ---------------------------------------------------------------- the whole run: every table from the database

SAMPLE_FOLDER = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="module")
def table_rows_by_table() -> dict[str, list[dict[str, Any]]]:
    """The sample's rows of each other table, as the table holds them."""
    return {table: table_rows(table, read_jsonl(SAMPLE_FOLDER / f"{table}.jsonl")) for table in OTHER_TABLES}


def whole_site(out: Path, names: dict[str, str]) -> dict[str, bytes]:
    """A built site's files, the marker aside, each input's name spelled as its table (``INPUT:table``)."""
    files = {}
    for name, content in site_files(out).items():
        if name == MARKER:
            continue
        for input_name, table in sorted(names.items(), key=lambda item: -len(item[0])):
            content = content.replace(input_name.encode(), f"INPUT:{table}".encode())
        files[name] = content
    return files


@pytest.fixture(scope="module")
def whole_reference(tmp_path_factory: pytest.TempPathFactory, event_rows: list[dict[str, Any]]) -> dict[str, bytes]:
    """The site built from the sample's files: its events as nr-llm stores them, and its other tables' files."""
    folder = tmp_path_factory.mktemp("whole-reference")
    events = write_jsonl(folder / "events.jsonl", [
        {column: (float(row[column]) if column == "duration_ms" else row[column]) for column in HEADER}
        for row in event_rows])
    tables = [SAMPLE_FOLDER / f"{table}.jsonl" for table in OTHER_TABLES]
    completed = run_cli("build", events, *tables, "--out", folder / "site", "--servers", SERVERS, timeout=600)
    assert completed.returncode == 0, completed.stderr
    return whole_site(folder / "site", {str(events): EVENTS_TABLE, **{str(path): path.stem for path in tables}})


def database_names(url: str, prefix: str = "tx_") -> dict[str, str]:
    """What a site built from ``url`` calls each table's input, and the table."""
    return {f"{url}#{prefix}{table.removeprefix('tx_')}": table for table in (EVENTS_TABLE, *OTHER_TABLES)}


def whole_sqlite(path: Path, event_rows: list[dict[str, Any]], tables: dict[str, list[dict[str, Any]]],
                 prefix: str = "tx_") -> Path:
    """A SQLite database of every table, as TYPO3 makes them there, holding the rows given."""
    sqlite_database(path, event_rows)
    with sqlite3.connect(path) as connection:
        if prefix != "tx_":
            connection.execute(f"ALTER TABLE {EVENTS_TABLE} RENAME TO {prefix}{EVENTS_TABLE.removeprefix('tx_')}")
        for table, rows in tables.items():
            connection.execute(table_ddl(table, "sqlite", prefix))
            columns = [column for column, _type, _nullable in OTHER_TABLES[table]]
            connection.executemany(
                f"INSERT INTO {prefix}{table.removeprefix('tx_')} ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' for _ in columns)})",
                [tuple(row[column] for column in columns) for row in rows])
    connection.close()
    return path


@pytest.mark.slow
def test_a_build_from_sqlite_holding_every_table_is_the_build_from_the_samples_files(
    tmp_path: Path, event_rows: list[dict[str, Any]], table_rows_by_table: dict[str, list[dict[str, Any]]],
    whole_reference: dict[str, bytes],
) -> None:
    database = whole_sqlite(tmp_path / "typo3.sqlite", event_rows, table_rows_by_table)
    completed = run_cli("build", "--db", url_of(database), "--out", tmp_path / "site", "--servers", SERVERS,
                        timeout=600)
    assert completed.returncode == 0, completed.stderr
    assert "note:" not in completed.stderr, "every table is there: nothing to say"
    assert whole_site(tmp_path / "site", database_names(url_of(database))) == whole_reference


@pytest.mark.slow
def test_db_prefix_reads_tables_of_another_prefix(
    tmp_path: Path, event_rows: list[dict[str, Any]], table_rows_by_table: dict[str, list[dict[str, Any]]],
    whole_reference: dict[str, bytes],
) -> None:
    database = whole_sqlite(tmp_path / "typo3.sqlite", event_rows, table_rows_by_table, prefix="t3_")
    completed = run_cli("build", "--db", url_of(database), "--db-prefix", "t3_", "--out", tmp_path / "site",
                        "--servers", SERVERS, timeout=600)
    assert completed.returncode == 0, completed.stderr
    assert whole_site(tmp_path / "site", database_names(url_of(database), "t3_")) == whole_reference
    line = one_line_refusal(run_cli("validate", "--db", url_of(database)), url_of(database))
    assert "has no table 'tx_nrllm_agentrun_event'" in line and "'t3_nrllm_agentrun_event'" in line


@pytest.mark.slow
def test_a_missing_optional_table_is_said_once_and_the_report_goes_without_it(
    tmp_path: Path, event_rows: list[dict[str, Any]], table_rows_by_table: dict[str, list[dict[str, Any]]],
) -> None:
    kept = {table: rows for table, rows in table_rows_by_table.items() if table != "tx_nrllm_governance_event"}
    database = whole_sqlite(tmp_path / "typo3.sqlite", event_rows, kept)
    completed = run_cli("validate", "--db", url_of(database), "--format", "json", "--servers", SERVERS)
    assert completed.returncode in (0, 1), completed.stderr
    notes = [line for line in completed.stderr.splitlines() if "note:" in line]
    assert len(notes) == 1 and "tx_nrllm_governance_event" in notes[0] and "tx_nrllm_telemetry" not in notes[0]
    report = json.loads(completed.stdout)
    assert report["rows_read"] == len(event_rows) + sum(len(rows) for rows in kept.values())


def test_only_the_columns_a_report_reads_are_selected(
    tmp_path: Path, event_rows: list[dict[str, Any]], table_rows_by_table: dict[str, list[dict[str, Any]]],
) -> None:
    """A run's suspended state and queued request, a tool's description and schema are never read."""
    from nrllm_report.core.tables import TABLES
    from nrllm_report.readers.chunks import ArrowChunk
    from nrllm_report.readers.database import DatabaseSession, parse_database_url

    database = whole_sqlite(tmp_path / "typo3.sqlite", event_rows[:40], table_rows_by_table)
    session = DatabaseSession(parse_database_url(url_of(database)))
    assert session.tables() == list(TABLES)
    for table, spec in TABLES.items():
        chunks = list(session.chunks(table))
        assert all(isinstance(chunk, ArrowChunk) for chunk in chunks)
        assert chunks[0].table.column_names == list(spec.columns), table
        assert sum(chunk.table.num_rows for chunk in chunks) == len(table_rows_by_table[table])
    events = list(session.chunks(EVENTS_TABLE))
    assert "pid" not in events[0].table.column_names and "payload" in events[0].table.column_names
    assert session._connection is None, "closed once every table is read"


# ---------------------------------------------------------------- a connection dropped mid-read

def hold_lock(server: Server) -> subprocess.Popen[str]:
    """A session of the server's own client holding a lock that makes a reader of the events table wait
    (MariaDB: ``LOCK TABLES … WRITE``; PostgreSQL: ``ACCESS EXCLUSIVE``), until its input is closed."""
    if isinstance(server, MariaDB):
        command, statements = (
            server.client("--batch", "--skip-column-names", "--unbuffered"),
            f"LOCK TABLES {EVENTS_TABLE} WRITE;",
        )
    else:
        command = server.client("-A", "-t")
        statements = f"BEGIN;\nLOCK TABLE {EVENTS_TABLE} IN ACCESS EXCLUSIVE MODE;"
    holder = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.write(f"{statements}\nSELECT 'locked';\n")
    holder.stdin.flush()
    ready, _, _ = select.select([holder.stdout], [], [], 30)
    assert ready and holder.stdout.readline().strip() == "locked", "the lock is held"
    return holder


def waiting_reader(server: Server, deadline: float) -> str:
    """The id of the reader's connection once it waits for the lock (after the other tables are read)."""
    query = (f"SELECT ID FROM information_schema.PROCESSLIST WHERE USER = '{READER_USER}' "
             f"AND STATE LIKE '%metadata lock%'" if isinstance(server, MariaDB) else
             f"\\pset tuples_only on\nSELECT pid FROM pg_stat_activity WHERE usename = '{READER_USER}' "
             f"AND wait_event_type = 'Lock';")
    while time.monotonic() < deadline:
        found = [line.strip() for line in server.sql(query).decode().splitlines() if line.strip().isdigit()]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError("the reader never came to wait for the events table")


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_a_connection_dropped_mid_read_is_one_line_and_leaves_the_site_and_archive_as_they_were(
    served: dict[str, Server], database: str, tmp_path: Path
) -> None:
    server = served[database]
    url = create_reader(server, READER_PASSWORD)
    out, archive = tmp_path / "site", tmp_path / "history.parquet"
    completed = run_db("build", "--db", url, "--out", out, "--archive", archive, "--servers", SERVERS)
    assert completed.returncode == 0, completed.stderr
    site_before, archive_before = site_files(out), archive.read_bytes()
    holder = hold_lock(server)
    try:
        env = {key: value for key, value in os.environ.items() if key != "PGPASSWORD"}
        env["NRLLM_REPORT_DB"] = READER_PASSWORD
        build = subprocess.Popen(
            cli_command("build", "--db", url, "--out", out, "--archive", archive, "--servers", SERVERS),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        connection = waiting_reader(server, time.monotonic() + 60)
        server.sql(f"KILL {connection};" if isinstance(server, MariaDB)
                   else f"SELECT pg_terminate_backend({connection});")
        stdout, stderr = build.communicate(timeout=120)
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
    line = refused(subprocess.CompletedProcess(build.args, build.returncode, stdout, stderr), url)
    assert f"{url}#{EVENTS_TABLE}: cannot be read" in line or f"{url}: cannot be read" in line, line
    assert site_files(out) == site_before and archive.read_bytes() == archive_before
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["history.parquet", "site"], "no scratch left"


# ---------------------------------------------------------------- where the password comes from

def home_with(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    """An environment whose home holds ``files`` (mode 0600, as the drivers want them) and no password variable."""
    home = tmp_path / "home"
    home.mkdir(parents=True)
    for name, text in files.items():
        (home / name).write_text(text, encoding="utf-8")
        (home / name).chmod(0o600)
    env = {key: value for key, value in os.environ.items() if key not in ("NRLLM_REPORT_DB", "PGPASSWORD")}
    env["HOME"] = str(home)
    return env


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_db_env_alone_holds_the_whole_url_with_its_password(served: dict[str, Server], database: str) -> None:
    url = create_reader(served[database], READER_PASSWORD)
    scheme, rest = url.split("://", 1)
    with_password = f"{scheme}://{READER_USER}:{quote(READER_PASSWORD)}@{rest.split('@', 1)[1]}"
    completed = run_db("validate", "--db-env", "REPORT_DB_URL", "--servers", SERVERS, password=with_password,
                       variable="REPORT_DB_URL")
    assert completed.returncode == 0, completed.stderr
    assert READER_PASSWORD not in completed.stdout + completed.stderr
    assert quote(READER_PASSWORD) not in completed.stdout + completed.stderr
    unset = run_db("validate", "--db-env", "NO_SUCH_VARIABLE", password=None)
    assert unset.returncode == 2 and "NO_SUCH_VARIABLE" in unset.stderr and "is not set" in unset.stderr


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_the_password_comes_from_the_drivers_own_file(served: dict[str, Server], database: str, tmp_path: Path) -> None:
    server = served[database]
    url = create_reader(server, READER_PASSWORD)
    files = ({".my.cnf": f"[client]\npassword=\"{READER_PASSWORD}\"\n"} if database == "mariadb" else
             {".pgpass": f"127.0.0.1:{server.port}:typo3:{READER_USER}:{READER_PASSWORD}\n"})
    completed = subprocess.run(cli_command("validate", "--db", url, "--servers", SERVERS), capture_output=True,
                               text=True, env=home_with(tmp_path, files), timeout=300, check=False,
                               stdin=subprocess.DEVNULL)
    assert completed.returncode == 0, completed.stderr
    without = subprocess.run(cli_command("validate", "--db", url), capture_output=True, text=True,
                             env=home_with(tmp_path / "empty", {}), timeout=300, check=False,
                             stdin=subprocess.DEVNULL)
    line = refused(without, url)
    assert "cannot connect" in line and "NRLLM_REPORT_DB" in line, "no password found, and no terminal to ask on"


@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_on_a_terminal_the_password_is_asked_for_and_not_echoed(
    served: dict[str, Server], database: str, tmp_path: Path
) -> None:
    url = create_reader(served[database], READER_PASSWORD)
    said = on_a_terminal(cli_command("validate", "--db", url, "--servers", SERVERS), home_with(tmp_path, {}),
                         READER_PASSWORD)
    assert f"Password for {url}" in said and READER_PASSWORD not in said
    assert "rows read" in said or "row read" in said or "valid" in said, said


def on_a_terminal(command: list[str], env: dict[str, str], answer: str) -> str:
    """What ``command`` shows on a terminal of its own, answering its prompt with ``answer``."""
    import fcntl
    import termios

    master, slave = os.openpty()

    def controlling_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
                               preexec_fn=controlling_terminal)
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 120
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            shown += data
        if not answered and b"Password for" in shown:
            os.write(master, answer.encode() + b"\n")
            answered = True
        if process.poll() is not None and not ready:
            break
    process.wait(timeout=30)
    os.close(master)
    assert process.returncode in (0, 1), shown.decode(errors="replace")
    return shown.decode(errors="replace")


# ---------------------------------------------------------------- the nightly read: only what is new

ARCHIVE_NOTE = re.compile(rb'<p class="archive-note">[^<]*</p>\n')
TERMINAL = ("completed", "failed", "cancelled")
RUNS, CALLS, DECISIONS = "tx_nrllm_agentrun", "tx_nrllm_telemetry", "tx_nrllm_governance_event"


@dataclass
class Nightly:
    """The sample as the database held it a day before its newest row (``before``), the rows written
    since (``after``: a new day's runs, and the later events of a run that was running then), and the
    running run's row as it stood then and stands now."""

    before: dict[str, list[dict[str, Any]]]
    after: dict[str, list[dict[str, Any]]]
    running: dict[str, Any]
    finished: dict[str, Any]

    def now(self, table: str) -> list[dict[str, Any]]:
        """The table's rows as the database holds them once ``after`` was written."""
        return [self.finished if row is self.running else row for row in self.before[table] + self.after[table]]


def nightly_split(event_rows: list[dict[str, Any]], tables: dict[str, list[dict[str, Any]]]) -> Nightly:
    everything = {EVENTS_TABLE: event_rows, **tables}
    cut = max(row["crdate"] for row in event_rows) - 86_400
    before = {table: [row for row in rows if row["crdate"] < cut or "crdate" not in row or table in
                      ("tx_nrllm_mcp_tool", "tx_nrllm_mcp_server")] for table, rows in everything.items()}
    after = {table: [row for row in rows if row not in before[table]] for table, rows in everything.items()}
    by_run: dict[int, list[dict[str, Any]]] = {}
    for row in before[EVENTS_TABLE]:
        by_run.setdefault(row["run"], []).append(row)
    run = max(uid for uid, rows in by_run.items() if len(rows) >= 4)
    later = by_run[run][2:]
    highest = max(row["uid"] for row in event_rows)
    before[EVENTS_TABLE] = [row for row in before[EVENTS_TABLE] if row not in later]
    after[EVENTS_TABLE] += [{**row, "uid": highest + number} for number, row in enumerate(later, 1)]
    [finished] = [row for row in tables[RUNS] if row["uid"] == run]
    running = {**finished, "status": "running", "termination_reason": "", "finished_at": 0}
    before[RUNS] = [running if row["uid"] == run else row for row in before[RUNS]]
    return Nightly(before, after, running, finished)


def expected_fetched(nightly: Nightly) -> dict[str, int]:
    """The rows a resumed read asks for, by table: from the first row of the margin (rows created less
    than MARGIN_SECONDS before the newest read) on, and every row of each run those rows or the run
    table's unfinished runs name."""
    def since(rows: list[dict[str, Any]]) -> int:
        newest = max(row["crdate"] for row in rows)
        return min(row["uid"] for row in rows if row["crdate"] >= newest - MARGIN_SECONDS)

    unfinished = {row["uid"] for row in nightly.before[RUNS] if row["status"] not in TERMINAL}
    expected = {}
    start = since(nightly.before[EVENTS_TABLE])
    events = nightly.now(EVENTS_TABLE)
    again = {row["run"] for row in events if row["uid"] >= start} | unfinished
    expected[EVENTS_TABLE] = sum(1 for row in events if row["uid"] >= start or row["run"] in again)
    start = since(nightly.before[RUNS])
    expected[RUNS] = sum(1 for row in nightly.now(RUNS) if row["uid"] >= start or row["uid"] in unfinished)
    for table in (CALLS, DECISIONS):
        start = since(nightly.before[table])
        expected[table] = sum(1 for row in nightly.now(table) if row["uid"] >= start)
    for table in ("tx_nrllm_mcp_tool", "tx_nrllm_mcp_server"):
        expected[table] = len(nightly.now(table))
    return expected


@pytest.fixture(scope="module")
def nightly(event_rows: list[dict[str, Any]], table_rows_by_table: dict[str, list[dict[str, Any]]]) -> Nightly:
    return nightly_split(event_rows, table_rows_by_table)


def insert_sqlite(path: Path, rows_by_table: dict[str, list[dict[str, Any]]], finished: dict[str, Any]) -> None:
    with sqlite3.connect(path) as connection:
        for table, rows in rows_by_table.items():
            columns = (
                list(EVENT_COLUMNS) if table == EVENTS_TABLE else [column for column, _t, _n in OTHER_TABLES[table]]
            )
            connection.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
                [tuple(row[column] for column in columns) for row in rows],
            )
        connection.execute(
            f"UPDATE {RUNS} SET status = ?, termination_reason = ?, finished_at = ? WHERE uid = ?",
            (finished["status"], finished["termination_reason"], finished["finished_at"], finished["uid"]),
        )
    connection.close()


def insert_served(server: Server, rows_by_table: dict[str, list[dict[str, Any]]], finished: dict[str, Any]) -> None:
    mysql = isinstance(server, MariaDB)
    literal, quote = (mysql_literal, "`") if mysql else (postgres_literal, '"')
    statements = []
    for table, rows in rows_by_table.items():
        columns = list(EVENT_COLUMNS) if table == EVENTS_TABLE else [column for column, _t, _n in OTHER_TABLES[table]]
        for row in rows:
            statements.append(f"INSERT INTO {table} ({', '.join(quote + column + quote for column in columns)}) VALUES "
                              f"({', '.join(literal(row[column]) for column in columns)});")
    statements.append(f"UPDATE {RUNS} SET status = {literal(finished['status'])}, termination_reason = "
                      f"{literal(finished['termination_reason'])}, finished_at = {finished['finished_at']} "
                      f"WHERE uid = {finished['uid']};")
    server.sql("\n".join(statements))


def load_served(server: Server, rows_by_table: dict[str, list[dict[str, Any]]]) -> None:
    create_events_table(server)
    load_events(server, rows_by_table[EVENTS_TABLE])
    load_other_tables(server, {table: rows for table, rows in rows_by_table.items() if table != EVENTS_TABLE})


def fetched_of(completed: subprocess.CompletedProcess[str]) -> dict[str, int]:
    assert completed.returncode == 0, completed.stderr
    [line] = [line for line in completed.stderr.splitlines() if line.startswith("{")]
    return {key.removeprefix("rows fetched: "): int(value) for key, value in json.loads(line).items()
            if key.startswith("rows fetched: ")}


def site_without_archive_note(out: Path) -> dict[str, bytes]:
    return {name: ARCHIVE_NOTE.sub(b"", content) for name, content in site_files(out).items() if name != MARKER}


def assert_nightly_reads_only_what_is_new(url: str, nightly: Nightly, tmp_path: Path, insert: Any,
                                          run: Any = run_cli) -> None:
    site, archive = tmp_path / "site", tmp_path / "history.parquet"
    common = ("--out", site, "--archive", archive, "--servers", SERVERS, "--timings")
    first = fetched_of(run("build", "--db", url, *common))
    assert first == {table: len(rows) for table, rows in nightly.before.items()}, "the first build reads every row"
    insert()
    expected = expected_fetched(nightly)
    totals = {table: len(nightly.now(table)) for table in nightly.before}
    assert expected[EVENTS_TABLE] < totals[EVENTS_TABLE] - len(nightly.before[EVENTS_TABLE]) // 2
    assert fetched_of(run("build", "--db", url, *common)) == expected
    full = tmp_path / "full"
    assert fetched_of(run("build", "--db", url, "--out", full, "--servers", SERVERS, "--timings")) == totals
    assert site_without_archive_note(site) == site_without_archive_note(full)
    assert ARCHIVE_NOTE.search((site / "en" / "index.html").read_bytes()), "the archive's runs are said apart"
    again = fetched_of(run("build", "--db", url, *common))
    assert again[EVENTS_TABLE] < expected[EVENTS_TABLE], "nothing new: the margin alone"
    assert site_without_archive_note(site) == site_without_archive_note(full)


@pytest.mark.slow
def test_a_nightly_build_from_sqlite_reads_only_the_new_rows_and_gives_the_full_builds_site(
    tmp_path: Path, nightly: Nightly,
) -> None:
    database = whole_sqlite(tmp_path / "typo3.sqlite", nightly.before[EVENTS_TABLE],
                            {table: rows for table, rows in nightly.before.items() if table != EVENTS_TABLE})
    assert_nightly_reads_only_what_is_new(url_of(database), nightly, tmp_path,
                                          lambda: insert_sqlite(database, nightly.after, nightly.finished))


@pytest.mark.slow
@pytest.mark.db
@pytest.mark.parametrize("database", ["mariadb", "postgresql"])
def test_a_nightly_build_from_the_server_reads_only_the_new_rows_and_gives_the_full_builds_site(
    served: dict[str, Server], database: str, tmp_path: Path, nightly: Nightly, event_rows: list[dict[str, Any]],
    table_rows_by_table: dict[str, list[dict[str, Any]]],
) -> None:
    server = served[database]
    load_served(server, nightly.before)
    try:
        url = create_reader(server, READER_PASSWORD)
        assert_nightly_reads_only_what_is_new(
            url, nightly, tmp_path, lambda: insert_served(server, nightly.after, nightly.finished), run=run_db
        )
    finally:
        load_served(server, {EVENTS_TABLE: event_rows, **table_rows_by_table})
