"""``--db URL``: nr-llm's events table read straight from its database, read-only.

The rows are read in one read-only transaction (a consistent snapshot: rows written
while the read goes on are not half seen), ordered by ``uid``, and fetched in batches
that become Arrow tables for the same checker as a file's (``ArrowChunk``), the row's
``uid`` as its row number. A batch Arrow cannot hold as one type a column (SQLite's
dynamic typing lets a column mix them) goes to the row checker row by row.

The password is never part of the URL on the command line: it comes from the
environment variable ``--db-env`` names (default ``NRLLM_REPORT_DB``), or as the
drivers read it themselves (``~/.my.cnf``, ``~/.pgpass``).

``sqlite:///path`` needs only the standard library; MySQL and MariaDB need PyMySQL
(the ``[mysql]`` extra), PostgreSQL psycopg 3 (``[postgresql]``; ``[db]`` for both).
Without its driver a URL is refused saying which extra to install.
"""

from __future__ import annotations

import importlib
import os
import re
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import parse_qs, quote, unquote, urlsplit

import pyarrow as pa

from ..core.errors import InputError
from ..core.options import DEFAULT_PASSWORD_ENV, PASSWORD_ENV_PARAMETER
from .chunks import ArrowChunk, Chunk, RowChunk

TABLE_PREFIX = "tx_"
EVENTS_TABLE = "nrllm_agentrun_event"
BATCH_ROWS = 50_000
SCHEMES = ("sqlite", "mysql", "mariadb", "postgresql", "postgres")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
EXTRAS = {"mysql": "mysql", "mariadb": "mysql", "postgresql": "postgresql", "postgres": "postgresql"}


def is_database_url(name: str) -> bool:
    """Whether an INPUT names a database (``scheme://``) rather than a file."""
    return URL.match(name) is not None


@dataclass(frozen=True)
class DatabaseUrl:
    """A database URL, parsed; ``shown`` is what messages name (no password, no parameters)."""

    scheme: str
    user: str | None
    host: str | None
    port: int | None
    database: str
    password_env: str
    shown: str

    def password(self) -> str | None:
        """The password from the environment, or None (the driver then reads its own files)."""
        return os.environ.get(self.password_env) or None


def parse_database_url(name: str) -> DatabaseUrl:
    """The URL of an INPUT, or a one-line refusal (exit 2) saying what is wrong with it."""
    parts = urlsplit(name)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise InputError(name, f"unknown database {scheme!r}; expected one of sqlite:///PATH, mysql://, mariadb://, "
                               f"postgresql://")
    try:
        port = parts.port
    except ValueError:
        raise InputError(name, "has a port that is not a number") from None
    if parts.password is not None:
        shown = name.replace(f":{parts.password}@", ":***@")
        raise InputError(shown, f"holds a password: on the command line every user of the machine can read it; "
                                f"put it in the environment variable {DEFAULT_PASSWORD_ENV} (or the one --db-env "
                                f"names) or in the driver's own file (~/.my.cnf, ~/.pgpass)")
    parameters = parse_qs(parts.query)
    password_env = parameters.get(PASSWORD_ENV_PARAMETER, [DEFAULT_PASSWORD_ENV])[0]
    # As SQLAlchemy spells it: sqlite:///relative.db, sqlite:////absolute/path.db.
    database = unquote(parts.path[1:]) if scheme == "sqlite" else unquote(parts.path.lstrip("/"))
    shown = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if not database:
        raise InputError(shown, "names no database" if scheme != "sqlite" else "names no file: sqlite:///PATH (four slashes for an absolute path)")
    return DatabaseUrl(scheme, unquote(parts.username) if parts.username else None, parts.hostname, port,
                       database, password_env, shown)


def events_table(prefix: str = TABLE_PREFIX) -> str:
    return f"{prefix}{EVENTS_TABLE}"


def database_chunks(name: str) -> Iterator[Chunk]:
    """The events table of the database ``name`` names, in batches."""
    url = parse_database_url(name)
    readers = {"sqlite": sqlite_chunks, "mysql": mysql_chunks, "mariadb": mysql_chunks,
               "postgresql": postgresql_chunks, "postgres": postgresql_chunks}
    yield from readers[url.scheme](url, events_table())


def _driver(url: DatabaseUrl, module: str) -> Any:
    """The driver's module, or a one-line refusal saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(url.shown, f"reading {url.scheme}:// needs its driver: pip install "
                                    f"'nrllm-report[{EXTRAS[url.scheme]}]'") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


# ---------------------------------------------------------------- MySQL and MariaDB (PyMySQL)


def mysql_chunks(url: DatabaseUrl, table: str) -> Iterator[Chunk]:
    """MySQL or MariaDB: one ``REPEATABLE READ`` read-only transaction with a consistent snapshot,
    an unbuffered cursor (rows stream from the server as they are fetched)."""
    pymysql = _driver(url, "pymysql")
    options_file = Path("~/.my.cnf").expanduser()
    try:
        connection = pymysql.connect(
            host=url.host or "localhost", port=url.port or 3306, user=url.user, password=url.password() or "",
            database=url.database, charset="utf8mb4", cursorclass=pymysql.cursors.SSCursor,
            read_default_file=str(options_file) if options_file.is_file() else None, connect_timeout=30,
        )
    except pymysql.MySQLError as error:
        raise InputError(url.shown, f"cannot connect: {_first_line(error)}") from None
    with closing(connection):
        try:
            cursor = connection.cursor()
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            cursor.execute(f"SELECT * FROM `{table}` ORDER BY uid")
        except pymysql.MySQLError as error:
            raise InputError(url.shown, f"cannot be read: {_first_line(error)}") from None
        yield from cursor_chunks(cursor, url.shown, pymysql.MySQLError)


# ---------------------------------------------------------------- PostgreSQL (psycopg 3)


def postgresql_chunks(url: DatabaseUrl, table: str) -> Iterator[Chunk]:
    """PostgreSQL: a ``REPEATABLE READ`` read-only transaction (one snapshot), a server-side cursor."""
    psycopg = _driver(url, "psycopg")
    parameters = {"host": url.host, "port": url.port, "user": url.user, "dbname": url.database,
                  "password": url.password(), "connect_timeout": 30, "application_name": "nrllm-report"}
    try:
        connection = psycopg.connect(**{key: value for key, value in parameters.items() if value is not None})
    except psycopg.Error as error:
        raise InputError(url.shown, f"cannot connect: {_first_line(error)}") from None
    with closing(connection):
        connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        connection.read_only = True
        try:
            cursor = connection.cursor(name="nrllm_report_events")
            cursor.execute(f'SELECT * FROM "{table}" ORDER BY uid')  # DECLARE: a missing table or grant is said here
        except psycopg.Error as error:
            raise InputError(url.shown, f"cannot be read: {_first_line(error)}") from None
        yield from cursor_chunks(cursor, url.shown, psycopg.Error)


# ---------------------------------------------------------------- SQLite


def sqlite_chunks(url: DatabaseUrl, table: str) -> Iterator[Chunk]:
    """SQLite, opened read-only (``mode=ro``); one ``BEGIN`` holds one snapshot for the whole read."""
    path = Path(url.database)
    if not path.is_file():
        raise InputError(url.shown, "no such database file")
    try:
        connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as error:
        raise InputError(url.shown, f"cannot be opened: {error}") from None
    with closing(connection):
        try:
            connection.execute("BEGIN")
            cursor = connection.execute(f'SELECT * FROM "{table}" ORDER BY uid')
        except sqlite3.DatabaseError as error:
            raise InputError(url.shown, _sqlite_refusal(connection, table, error)) from None
        yield from cursor_chunks(cursor, url.shown, sqlite3.Error)


def _sqlite_refusal(connection: sqlite3.Connection, table: str, error: sqlite3.DatabaseError) -> str:
    if "no such table" not in str(error):
        return f"cannot be read: {error}"
    try:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    except sqlite3.Error:
        tables = []
    return f"has no table {table!r} (it has {', '.join(repr(name) for name in tables) or 'none'})"


# ---------------------------------------------------------------- any DB-API cursor


def cursor_chunks(cursor: Any, name: str, errors: type[BaseException] | tuple[type[BaseException], ...]) -> Iterator[Chunk]:
    """A DB-API cursor's rows, ``BATCH_ROWS`` at a time, as Arrow tables (row by row where Arrow
    cannot hold a column as one type); a driver error mid-read is a one-line refusal."""
    columns = [description[0] for description in cursor.description]
    rows_read = 0
    while True:
        try:
            rows = cursor.fetchmany(BATCH_ROWS)
        except errors as error:
            raise InputError(name, f"cannot be read after row {rows_read}: {error}") from None
        if not rows:
            return
        yield batch_chunk(columns, rows, rows_read)
        rows_read += len(rows)


def batch_chunk(columns: Sequence[str], rows: Sequence[Sequence[Any]], rows_read: int) -> Chunk:
    """One fetched batch: an Arrow table numbered by ``uid`` (by position where there is none)."""
    numbers = _row_numbers(columns, rows, rows_read)
    try:
        table = pa.table({column: pa.array([row[index] for row in rows]) for index, column in enumerate(columns)})
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return RowChunk([(number, dict(zip(columns, row))) for number, row in zip(numbers, rows)])
    return ArrowChunk(table, numbers[0], lambda position: dict(zip(columns, rows[position])),
                      row_numbers=pa.array(numbers, pa.int64()))


def _row_numbers(columns: Sequence[str], rows: Sequence[Sequence[Any]], rows_read: int) -> list[int]:
    if "uid" in columns:
        index = list(columns).index("uid")
        uids = [row[index] for row in rows]
        if all(isinstance(uid, int) and not isinstance(uid, bool) and uid >= 0 for uid in uids):
            return uids
    return list(range(rows_read + 1, rows_read + 1 + len(rows)))
