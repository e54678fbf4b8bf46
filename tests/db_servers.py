"""Real MariaDB and PostgreSQL servers for the tests, from Debian's packages, and nr-llm's events table.

Each server runs from a temporary data folder of its own, listens on 127.0.0.1 on a free port
(and on a unix socket in that folder), runs as a user that is not root when the tests run as
root (PostgreSQL refuses root; MariaDB is given the same user), and is stopped and removed at
the end of the session. The conftest's fixtures start them; without the packages the tests
are skipped and say so, except under ``CI``, where they fail.

The table is created with nr-llm's column names and the types ``ext_tables.sql`` declares
(MySQL), and the counterparts TYPO3's schema migration makes on PostgreSQL.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

EVENTS_TABLE = "tx_nrllm_agentrun_event"
DATABASE = "typo3"
EVENT_COLUMNS = ("uid", "pid", "tstamp", "crdate", "run", "sequence", "kind", "round", "duration_ms", "payload")
START_SECONDS = 60

MYSQL_EVENTS_DDL = f"""
CREATE TABLE {EVENTS_TABLE} (
    uid int(11) unsigned NOT NULL AUTO_INCREMENT,
    pid int(11) unsigned DEFAULT 0 NOT NULL,
    tstamp int(11) unsigned DEFAULT 0 NOT NULL,
    crdate int(11) unsigned DEFAULT 0 NOT NULL,
    run int(11) unsigned DEFAULT 0 NOT NULL,
    `sequence` int(11) unsigned DEFAULT 0 NOT NULL,
    kind varchar(32) DEFAULT '' NOT NULL,
    round int(11) unsigned DEFAULT 0 NOT NULL,
    duration_ms decimal(10,2) DEFAULT 0.00 NOT NULL,
    payload mediumtext,
    PRIMARY KEY (uid),
    KEY run_sequence (run, `sequence`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""

POSTGRES_EVENTS_DDL = f"""
CREATE TABLE {EVENTS_TABLE} (
    uid SERIAL NOT NULL,
    pid INT DEFAULT 0 NOT NULL,
    tstamp INT DEFAULT 0 NOT NULL,
    crdate INT DEFAULT 0 NOT NULL,
    run INT DEFAULT 0 NOT NULL,
    sequence INT DEFAULT 0 NOT NULL,
    kind VARCHAR(32) DEFAULT '' NOT NULL,
    round INT DEFAULT 0 NOT NULL,
    duration_ms NUMERIC(10, 2) DEFAULT '0.00' NOT NULL,
    payload TEXT DEFAULT NULL,
    PRIMARY KEY (uid)
);
CREATE INDEX run_sequence ON {EVENTS_TABLE} (run, sequence)
"""


class ServerUnavailable(Exception):
    """The packages that hold a server are not installed."""


def require_server(what: str, binaries: Sequence[str], package: str) -> list[str]:
    """The first of each binary pattern, or a skip that says which package is missing (a failure under CI)."""
    found = [sorted(glob.glob(pattern)) for pattern in binaries]
    if all(found):
        return [paths[-1] for paths in found]
    missing = [pattern for pattern, paths in zip(binaries, found) if not paths]
    skip_outside_ci(f"{what} is not installed ({', '.join(missing)} missing): apt-get install {package}",
                    "the database tests")


def skip_outside_ci(message: str, what_ci_runs: str) -> None:
    """Skip, saying why; but under CI (the variable ``CI`` set, not to 0 or false), which must run
    ``what_ci_runs``, fail."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{message}; CI must run {what_ci_runs}")
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_user() -> str | None:
    """The user a server runs as when the tests run as root (``nobody``); None when they do not."""
    return "nobody" if os.geteuid() == 0 else None


def as_user(user: str | None, command: Sequence[str]) -> list[str]:
    return ["runuser", "-u", user, "--", *command] if user else list(command)


def owned_folder(prefix: str, user: str | None) -> Path:
    """A fresh folder directly in the system's temp folder (which every user can enter), the server user's."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    if user:
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    folder.chmod(0o755)
    return folder


@dataclass
class Server:
    """A running server: where it listens, its folder, and its process."""

    kind: str
    folder: Path
    port: int
    user: str | None
    process: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.folder / "server.log"

    @property
    def files(self) -> Path:
        """A folder the server may write files into (``INTO OUTFILE``, ``mysqldump --tab``)."""
        return self.folder / "files"

    def wait_until(self, ready: Sequence[str]) -> None:
        deadline = time.monotonic() + START_SECONDS
        while subprocess.run(ready, capture_output=True, check=False).returncode != 0:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the {self.kind} server ended at start-up: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {self.kind} server did not answer within {START_SECONDS} s: {self.log_tail()}")
            time.sleep(0.2)

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def run_checked(
    command: Sequence[str], stdin: bytes | None = None, what: str = ""
) -> subprocess.CompletedProcess[bytes]:
    completed = subprocess.run(command, input=stdin, capture_output=True, check=False, timeout=300)
    if completed.returncode != 0:
        raise RuntimeError(
            f"{what or command[0]} failed ({completed.returncode}): {completed.stderr.decode(errors='replace')}"
        )
    return completed


# ---------------------------------------------------------------- MariaDB


@dataclass
class MariaDB(Server):
    def client(self, *args: str) -> list[str]:
        """``mariadb`` connected to the test database over TCP as root (no password: a test server)."""
        return ["mariadb", "--no-defaults", "--protocol=TCP", "-h", "127.0.0.1", "-P", str(self.port),
                "-u", "root", "--default-character-set=utf8mb4", *args, DATABASE]

    def sql(self, statements: str) -> bytes:
        return run_checked(self.client("--batch"), statements.encode("utf-8"), "mariadb").stdout

    def dump_command(self, *args: str) -> list[str]:
        return ["mariadb-dump", "--no-defaults", "--protocol=TCP", "-h", "127.0.0.1", "-P", str(self.port),
                "-u", "root", "--default-character-set=utf8mb4", *args, DATABASE]


def start_mariadb(options: Sequence[str] = ("--innodb-buffer-pool-size=32M",)) -> MariaDB:
    """A MariaDB server with an empty ``typo3`` database, or a skip when it is not installed;
    ``options`` go to ``mariadbd`` (the benchmark's give it a larger buffer pool)."""
    mariadbd, install_db = require_server(
        "MariaDB", ["/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db"], "mariadb-server")
    user = server_user()
    server = MariaDB("MariaDB", owned_folder("nrllm-mariadb-", user), free_port(), user)
    try:
        data = server.folder / "data"
        run_checked(as_user(user, [install_db, "--no-defaults", f"--datadir={data}", "--skip-test-db",
                                   "--auth-root-authentication-method=normal"]), what="mariadb-install-db")
        as_server = as_user(user, ["mkdir", str(server.files)])
        run_checked(as_server, what="mkdir")
        server.process = subprocess.Popen(
            as_user(user, [mariadbd, "--no-defaults", f"--datadir={data}", f"--socket={server.folder / 'sock'}",
                           f"--port={server.port}", "--bind-address=127.0.0.1", f"--secure-file-priv={server.files}",
                           f"--pid-file={server.folder / 'pid'}", f"--log-error={server.log}", "--skip-log-bin",
                           "--skip-name-resolve", "--character-set-server=utf8mb4", *options]),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server.wait_until(["mariadb-admin", "--no-defaults", "--protocol=TCP", "-h", "127.0.0.1",
                           "-P", str(server.port), "-u", "root", "ping"])
        run_checked(["mariadb", "--no-defaults", "--protocol=TCP", "-h", "127.0.0.1", "-P", str(server.port),
                     "-u", "root", "-e", f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4"], what="CREATE DATABASE")
    except BaseException:
        server.stop()
        raise
    return server


# ---------------------------------------------------------------- PostgreSQL


@dataclass
class PostgreSQL(Server):
    def client(self, *args: str) -> list[str]:
        """``psql`` connected to the test database over the unix socket as the superuser (trusted there;
        over TCP every user needs a password)."""
        return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(self.folder), "-p", str(self.port),
                "-U", "postgres", "-d", DATABASE, *args]

    def sql(self, statements: str) -> bytes:
        return run_checked(self.client(), statements.encode("utf-8"), "psql").stdout


def start_postgresql(options: Sequence[str] = ("-c", "shared_buffers=16MB")) -> PostgreSQL:
    """A PostgreSQL server with an empty ``typo3`` database, or a skip when it is not installed;
    ``options`` go to ``postgres``."""
    postgres, initdb = require_server(
        "PostgreSQL", ["/usr/lib/postgresql/*/bin/postgres", "/usr/lib/postgresql/*/bin/initdb"], "postgresql")
    user = server_user()
    server = PostgreSQL("PostgreSQL", owned_folder("nrllm-postgres-", user), free_port(), user)
    try:
        data = server.folder / "data"
        run_checked(as_user(user, [initdb, "-D", str(data), "-U", "postgres", "--auth-local=trust",
                                   "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"]),
                    what="initdb")
        with open(server.log, "wb") as log:
            server.process = subprocess.Popen(
                as_user(user, [postgres, "-D", str(data), "-k", str(server.folder), "-p", str(server.port),
                               "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", *options]),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        server.wait_until([str(Path(initdb).parent / "pg_isready"), "-h", "127.0.0.1", "-p", str(server.port)])
        run_checked(
            [
                "psql",
                "-X",
                "-q",
                "-h",
                str(server.folder),
                "-p",
                str(server.port),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-c",
                f"CREATE DATABASE {DATABASE} ENCODING 'UTF8' TEMPLATE template0",
            ],
            what="CREATE DATABASE",
        )
    except BaseException:
        server.stop()
        raise
    return server


# ---------------------------------------------------------------- the events table and its rows


def php_json(text: str) -> str:
    """A payload text as PHP's ``json_encode`` writes it: ``\\u00fc`` for non-ASCII, ``\\/`` for ``/``."""
    return json.dumps(json.loads(text), ensure_ascii=True, separators=(",", ":")).replace("/", "\\/")


def as_event_rows(sample_rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sample's rows as nr-llm stores them: ``run`` the run's numeric uid (numbered in order of
    first appearance when the sample names runs by uuid), the payload text as PHP writes it."""
    uids: dict[str, int] = {}
    rows = []
    for row in sample_rows:
        run = str(row["run"])
        number = int(run) if run.isdigit() else uids.setdefault(run, len(uids) + 1)
        payload = row.get("payload")
        if isinstance(payload, dict):
            payload = json.dumps(payload)
        rows.append(
            {
                "uid": row["uid"],
                "pid": 0,
                "tstamp": row["crdate"],
                "crdate": row["crdate"],
                "run": number,
                "sequence": row["sequence"],
                "kind": row["kind"],
                "round": row["round"],
                "duration_ms": f"{row['duration_ms']:.2f}",
                "payload": None if payload is None else php_json(payload),
            }
        )
    return rows


def mysql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    escaped = str(value).replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0")
    return f"'{escaped}'"


def postgres_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def insert_statements(rows: Sequence[dict[str, Any]], literal: Any, quote: str, batch: int = 200) -> str:
    columns = ", ".join(f"{quote}{column}{quote}" for column in EVENT_COLUMNS)
    statements = []
    for start in range(0, len(rows), batch):
        values = ",\n".join("(" + ", ".join(literal(row[column]) for column in EVENT_COLUMNS) + ")"
                            for row in rows[start:start + batch])
        statements.append(f"INSERT INTO {EVENTS_TABLE} ({columns}) VALUES\n{values};")
    return "\n".join(statements)


def create_events_table(server: Server) -> None:
    """nr-llm's events table, created afresh (dropped first if a test left one)."""
    ddl = MYSQL_EVENTS_DDL if isinstance(server, MariaDB) else POSTGRES_EVENTS_DDL
    server.sql(f"DROP TABLE IF EXISTS {EVENTS_TABLE};\n{ddl};")


def load_events(server: Server, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (as ``as_event_rows`` gives them) into the events table."""
    if isinstance(server, MariaDB):
        server.sql(insert_statements(rows, mysql_literal, "`"))
    else:
        server.sql(insert_statements(rows, postgres_literal, '"'))
        server.sql(f"SELECT setval(pg_get_serial_sequence('{EVENTS_TABLE}', 'uid'), "
                   f"(SELECT COALESCE(MAX(uid), 1) FROM {EVENTS_TABLE}));")


READER_USER = "nrllm_report"


def create_reader(server: Server, password: str, grant: bool | str = True) -> str:
    """A user with SELECT privilege alone, and on nothing more: on every table of the database (``grant``
    True), on the events table only (``"events"``), or on nothing (False); its URL."""
    if isinstance(server, MariaDB):
        on = {True: f"{DATABASE}.*", "events": f"{DATABASE}.{EVENTS_TABLE}"}.get(grant)
        server.sql(f"DROP USER IF EXISTS '{READER_USER}'@'%';\n"
                   f"CREATE USER '{READER_USER}'@'%' IDENTIFIED BY '{password}';\n"
                   + (f"GRANT SELECT ON {on} TO '{READER_USER}'@'%';" if on else ""))
        return f"mariadb://{READER_USER}@127.0.0.1:{server.port}/{DATABASE}"
    server.sql(f"DROP OWNED BY {READER_USER};\n" if _role_exists(server) else "")
    on = {True: "ALL TABLES IN SCHEMA public", "events": EVENTS_TABLE}.get(grant)
    server.sql(f"DROP ROLE IF EXISTS {READER_USER};\nCREATE ROLE {READER_USER} LOGIN PASSWORD '{password}';\n"
               + (f"GRANT SELECT ON {on} TO {READER_USER};" if on else ""))
    return f"postgresql://{READER_USER}@127.0.0.1:{server.port}/{DATABASE}"


def _role_exists(server: Server) -> bool:
    out = server.sql(f"\\pset tuples_only on\nSELECT 1 FROM pg_roles WHERE rolname = '{READER_USER}';")
    return b"1" in out


# ---------------------------------------------------------------- the other tables (issue 21: the whole run)

# Each of nr-llm's other tables as ``ext_tables.sql`` declares it (domain.md, "Column types"): the column,
# its MySQL type, and whether it may be NULL. ``uid`` is the auto-increment primary key of each.
INT = "int(11) unsigned"
OTHER_TABLES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "tx_nrllm_agentrun": (
        ("uid", INT, False),
        ("pid", INT, False),
        ("uuid", "varchar(36)", False),
        ("status", "varchar(32)", False),
        ("configuration_uid", INT, False),
        ("configuration_identifier", "varchar(150)", False),
        ("be_user", INT, False),
        ("iterations", INT, False),
        ("truncated", "smallint(5)", False),
        ("total_prompt_tokens", INT, False),
        ("total_completion_tokens", INT, False),
        ("total_tokens", INT, False),
        ("estimated_cost", "decimal(10,6)", False),
        ("error_class", "varchar(255)", False),
        ("termination_reason", "varchar(32)", False),
        ("started_at", INT, False),
        ("finished_at", INT, False),
        ("suspended_state", "mediumtext", True),
        ("queued_request", "mediumtext", True),
        ("claimed_by", "varchar(64)", False),
        ("lease_expires", INT, False),
        ("requeue_count", INT, False),
        ("pending_effect", "varchar(32)", False),
        ("tstamp", INT, False),
        ("crdate", INT, False),
    ),
    "tx_nrllm_telemetry": (
        ("uid", INT, False),
        ("pid", INT, False),
        ("correlation_id", "varchar(36)", False),
        ("operation", "varchar(32)", False),
        ("provider", "varchar(64)", False),
        ("model", "varchar(128)", False),
        ("served_provider", "varchar(64)", False),
        ("served_model", "varchar(128)", False),
        ("configuration_identifier", "varchar(150)", False),
        ("success", "smallint(5)", False),
        ("error_class", "varchar(255)", False),
        ("latency_ms", INT, False),
        ("time_to_first_token_ms", INT, False),
        ("cache_hit", "smallint(5)", False),
        ("fallback_attempts", INT, False),
        ("provider_retries", INT, False),
        ("actual_input_tokens", INT, False),
        ("actual_output_tokens", INT, False),
        ("actual_cost", "decimal(14,8)", True),
        ("be_user", INT, False),
        ("crdate", INT, False),
    ),
    "tx_nrllm_governance_event": (
        ("uid", INT, False),
        ("pid", INT, False),
        ("decision", "varchar(32)", False),
        ("reason", "varchar(64)", False),
        ("provider", "varchar(64)", False),
        ("model", "varchar(128)", False),
        ("configuration_identifier", "varchar(150)", False),
        ("tool_name", "varchar(190)", False),
        ("agentrun_uid", INT, False),
        ("correlation_id", "varchar(36)", False),
        ("guardrail", "varchar(255)", False),
        ("detail", "text", True),
        ("be_user", INT, False),
        ("crdate", INT, False),
    ),
    "tx_nrllm_mcp_tool": (
        ("uid", INT, False),
        ("pid", INT, False),
        ("server", INT, False),
        ("tool_name", "varchar(190)", False),
        ("remote_name", "varchar(190)", False),
        ("description", "text", True),
        ("input_schema", "text", True),
        ("orphaned", "tinyint(1)", False),
        ("tstamp", INT, False),
        ("crdate", INT, False),
    ),
    "tx_nrllm_mcp_server": (
        ("uid", INT, False),
        ("pid", INT, False),
        ("identifier", "varchar(32)", False),
        ("name", "varchar(255)", False),
        ("last_contact", INT, False),
        ("last_latency_ms", INT, False),
        ("tstamp", INT, False),
        ("crdate", INT, False),
    ),
}


def postgres_type(mysql: str) -> str:
    """The counterpart TYPO3's schema migration makes on PostgreSQL."""
    if mysql.startswith("varchar"):
        return mysql.upper()
    if mysql.startswith("decimal"):
        return "NUMERIC" + mysql[len("decimal"):]
    if mysql.startswith(("smallint", "tinyint")):
        return "SMALLINT"
    return "TEXT" if mysql.endswith("text") else "INT"


def sqlite_type(mysql: str) -> str:
    """As Doctrine's SQLite platform declares it (SQLite keeps the values dynamically typed)."""
    if mysql.startswith("varchar"):
        return mysql.upper()
    if mysql.startswith("decimal"):
        return "NUMERIC" + mysql[len("decimal"):]
    return "CLOB" if mysql.endswith("text") else "INTEGER"


def table_ddl(table: str, kind: str, prefix: str = "tx_") -> str:
    """``CREATE TABLE`` of one of the other tables, for ``mysql``, ``postgresql`` or ``sqlite``."""
    name = prefix + table.removeprefix("tx_")
    lines = []
    for column, mysql, nullable in OTHER_TABLES[table]:
        if column == "uid":
            lines.append({"mysql": f"uid {INT} NOT NULL AUTO_INCREMENT", "postgresql": "uid SERIAL NOT NULL",
                          "sqlite": "uid INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL"}[kind])
            continue
        declared = {"mysql": mysql, "postgresql": postgres_type(mysql), "sqlite": sqlite_type(mysql)}[kind]
        quoted = f"`{column}`" if kind == "mysql" else f'"{column}"'
        lines.append(f"{quoted} {declared}" + (" DEFAULT NULL" if nullable else " NOT NULL"))
    if kind != "sqlite":
        lines.append("PRIMARY KEY (uid)")
    if table == "tx_nrllm_mcp_tool":
        lines.append(f"UNIQUE ({'`tool_name`' if kind == 'mysql' else 'tool_name'})")
    tail = " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci" if kind == "mysql" else ""
    return f"CREATE TABLE {name} (\n    " + ",\n    ".join(lines) + f"\n){tail}"


def table_rows(table: str, sample_rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A sample file's rows as the table holds them: its columns only, decimals as text (exact)."""
    columns = [column for column, _type, _nullable in OTHER_TABLES[table]]
    decimals = {column for column, mysql, _nullable in OTHER_TABLES[table] if mysql.startswith("decimal")}
    return [{column: (repr(row.get(column)) if column in decimals and row.get(column) is not None
                      else row.get(column)) for column in columns} for row in sample_rows]


def load_other_tables(server: Server, tables: dict[str, list[dict[str, Any]]], prefix: str = "tx_") -> None:
    """The other tables created afresh (dropped first) and ``tables``' rows (as ``table_rows`` gives them) inserted."""
    mysql = isinstance(server, MariaDB)
    for table, rows in tables.items():
        name = prefix + table.removeprefix("tx_")
        statements = [
            f"DROP TABLE IF EXISTS {name};",
            table_ddl(table, "mysql" if mysql else "postgresql", prefix) + ";",
        ]
        columns = [column for column, _type, _nullable in OTHER_TABLES[table]]
        quote = "`" if mysql else '"'
        literal = mysql_literal if mysql else postgres_literal
        for start in range(0, len(rows), 200):
            values = ",\n".join("(" + ", ".join(literal(row[column]) for column in columns) + ")"
                                for row in rows[start:start + 200])
            statements.append(f"INSERT INTO {name} ({', '.join(quote + column + quote for column in columns)}) "
                              f"VALUES\n{values};")
        server.sql("\n".join(statements))
