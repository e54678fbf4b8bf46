"""``--db URL``: nr-llm's tables read straight from their database, read-only.

One connection per URL (a ``DatabaseSession``) serves every table read from it, in one
read-only transaction with a consistent snapshot: the events and the other tables of
``core.tables`` are seen as they stood at one moment, rows written while the read goes
on not half seen. The events table must be there; another table that is not (or that
the user may not read) is said once on stderr and the report goes without it.

Of each table only the columns a report reads are selected (``TableSpec.columns``: never
a run's ``suspended_state`` or a tool's ``input_schema``), ordered by ``uid``, fetched in
batches that become Arrow tables for the same checker as a file's (``ArrowChunk``), the
row's ``uid`` as its row number: PostgreSQL's as ADBC's driver hands them over, MySQL's,
MariaDB's and SQLite's from a streaming cursor. With an archive's marks, only what is new
is asked for (``readers.resume``). A batch Arrow cannot hold as one type a column
(SQLite's dynamic typing lets a column mix them) goes to the row checker row by row.

The password is never part of the URL on the command line: it comes from the environment
variable ``--db-env`` names (default ``NRLLM_REPORT_DB``; it holds the password, or the
whole URL with it), as the drivers read it themselves (``~/.my.cnf``, ``~/.pgpass``), or,
on a terminal, from a prompt that does not echo it.

``sqlite:///path`` needs only the standard library; MySQL and MariaDB need PyMySQL
(the ``[mysql]`` extra), PostgreSQL ADBC's driver (``[postgresql]``; ``[db]`` for both).
Without its driver a URL is refused saying which extra to install.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import pyarrow as pa
import pyarrow.compute as pc

from ..core.errors import InputError
from ..core.options import DEFAULT_PASSWORD_ENV, PASSWORD_ENV_PARAMETER, TABLE_PREFIX_PARAMETER
from ..core.tables import (
    CALLS_TABLE,
    GOVERNANCE_TABLE,
    RUNS_TABLE,
    TABLES,
    TERMINAL_STATUSES,
)
from ..core.tables import (
    EVENTS_TABLE as EVENTS_KEY,
)
from .chunks import ArrowChunk, Chunk, RowChunk
from .resume import MARGIN_SECONDS, DatabaseMarks, TableMark

TABLE_PREFIX = "tx_"
EVENTS_TABLE = "nrllm_agentrun_event"
# The events' columns a report reads (``pid`` and ``tstamp`` are TYPO3's, read by none).
EVENT_COLUMNS = ("uid", "crdate", "run", "sequence", "kind", "round", "duration_ms", "payload")
BATCH_ROWS = 50_000
SCHEMES = ("sqlite", "mysql", "mariadb", "postgresql", "postgres")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
PREFIX = re.compile(r"^[A-Za-z0-9_]*$")
EXTRAS = {"mysql": "mysql", "mariadb": "mysql", "postgresql": "postgresql", "postgres": "postgresql"}
# The tables a nightly read resumes (rows only ever added, but for the run rows of runs not yet
# finished); the MCP catalogue is a few rows changed in place, read whole every time.
RESUMED_TABLES = (RUNS_TABLE, CALLS_TABLE, GOVERNANCE_TABLE)
# Past this many runs to fetch again by name, the events are read whole (one IN list stays small).
MOST_RUNS_NAMED = 20_000


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
    prefix: str = TABLE_PREFIX

    def password(self) -> str | None:
        """The password from the environment (the variable's value, or the password of the URL it
        holds), or None: the driver then reads its own files."""
        value = os.environ.get(self.password_env) or None
        if value is not None and is_database_url(value):
            return unquote(urlsplit(value).password or "") or None
        return value

    def table(self, key: str) -> str:
        """The name in the database of one of ``core.tables``' tables (``tx_nrllm_…``)."""
        return f"{self.prefix}{key.removeprefix(TABLE_PREFIX)}"

    @property
    def identity(self) -> str:
        """What an archive's marks are kept under: the URL as shown and the tables' prefix."""
        return f"{self.shown} {self.prefix}"


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
    prefix = parameters.get(TABLE_PREFIX_PARAMETER, [TABLE_PREFIX])[0]
    # As SQLAlchemy spells it: sqlite:///relative.db, sqlite:////absolute/path.db.
    database = unquote(parts.path[1:]) if scheme == "sqlite" else unquote(parts.path.lstrip("/"))
    shown = f"{parts.scheme}://{parts.netloc}{parts.path}"
    if not database:
        raise InputError(shown, "names no database" if scheme != "sqlite"
                         else "names no file: sqlite:///PATH (four slashes for an absolute path)")
    if not PREFIX.match(prefix):
        raise InputError(shown, f"--db-prefix {prefix!r}: a table prefix holds only letters, digits and '_'")
    return DatabaseUrl(scheme, unquote(parts.username) if parts.username else None, parts.hostname, port,
                       database, password_env, shown, prefix)


def events_table(prefix: str = TABLE_PREFIX) -> str:
    return f"{prefix}{EVENTS_TABLE}"


def database_chunks(name: str) -> Iterator[Chunk]:
    """The events table of the database ``name`` names, in batches (a session of its own)."""
    yield from DatabaseSession(parse_database_url(name)).chunks(EVENTS_KEY)


# ---------------------------------------------------------------- one connection, one snapshot, every table


@dataclass
class DatabaseSession:
    """One database URL's connection and read-only transaction, opened at the first read and
    shared by every table read from it; closed once each table it holds has been read (or at exit).

    With ``resume`` (the marks an archive kept of the last read), the events and the tables of
    ``RESUMED_TABLES`` are asked only for what is new (see ``readers.resume``); ``marks`` is
    where the next read resumes, ``fetched`` the rows each table's ``SELECT`` returned, and
    ``fetched_runs`` the runs whose events were fetched (every row of each)."""

    url: DatabaseUrl
    resume: DatabaseMarks | None = None
    marks: DatabaseMarks = field(default_factory=DatabaseMarks)
    fetched: dict[str, int] = field(default_factory=dict)
    fetched_runs: set[str] = field(default_factory=set)
    resumed_reads: dict[str, TableMark] = field(default_factory=dict)  # the tables read from a mark
    seconds: float = 0.0  # spent asking the database and making its rows Arrow tables
    _backend: Backend | None = None
    _connection: Any = None
    _present: list[str] | None = None
    _unread: set[str] = field(default_factory=set)

    def name_of(self, key: str) -> str:
        """What problems and messages call a table's rows: ``URL#table``."""
        return f"{self.url.shown}#{self.url.table(key)}"

    def resumed(self, key: str) -> TableMark | None:
        """Where the read of a table resumes, or None for a whole read."""
        if self.resume is None:
            return None
        mark = self.resume.tables.get(key)
        return mark if mark is not None and (key == EVENTS_KEY or mark.rows is not None) else None

    def tables(self) -> list[str]:
        """The other tables (``core.tables``' keys) the database holds and the user may read; those it
        does not are said once on stderr."""
        if self._present is None:
            connection = self._open()
            assert self._backend is not None
            wanted = {key: self.url.table(key) for key in TABLES}
            events = self.url.table(EVENTS_KEY)
            try:
                readable = self._backend.readable(connection, [events, *wanted.values()])
            except self._backend.errors as error:
                raise InputError(self.url.shown, f"cannot be read: {first_line(error)}") from None
            if events not in readable:
                self._refuse_events(connection, events)
            self._present = [key for key, table in wanted.items() if table in readable]
            missing = [table for key, table in wanted.items() if key not in self._present]
            if missing:
                sys.stderr.write(f"{self.url.shown}: note: no table {', '.join(missing)} (or none the user may "
                                 f"read); the report goes without {'it' if len(missing) == 1 else 'them'}\n")
            self._unread = {EVENTS_KEY, *self._present}
        return list(self._present)

    def _refuse_events(self, connection: Any, table: str) -> None:
        """The events table is not there (or not readable): refused as its ``SELECT`` says it."""
        assert self._backend is not None
        try:
            self._backend.columns(connection, table)
        except self._backend.errors as error:
            raise InputError(self.url.shown, self._backend.refusal(connection, table, error=error)) from None

    def chunks(self, key: str) -> Iterator[Chunk]:
        """One table's rows, ``BATCH_ROWS`` at a time, in the session's transaction (of a resumed
        table besides the events, the rows kept and the new ones merged by ``uid``)."""
        connection = self._open()
        backend = self._backend
        assert backend is not None
        table = self.url.table(key)
        wanted = EVENT_COLUMNS if key == EVENTS_KEY else tuple(TABLES[key].columns)
        started = time.perf_counter()
        try:
            present = backend.columns(connection, table)
            columns = [column for column in wanted if column in present] or list(present)
            mark = self.resumed(key) if "uid" in columns else None
            parts = self._newer(connection, key, mark=mark)
        except backend.errors as error:
            raise InputError(self.name_of(key), backend.refusal(connection, table, error=error)) from None
        self.seconds += time.perf_counter() - started
        resumed = mark if parts[0][0] else None
        if resumed is not None:
            self.resumed_reads[key] = resumed
        fetched = self._fetched(key, columns=columns, parts=parts)
        if key == EVENTS_KEY:
            yield from self._events(fetched, resumed)
        else:
            yield from self._table_rows(key, fetched, mark=resumed)
        self._read(key)

    def _fetched(self, key: str, *, columns: list[str], parts: list[tuple[str, list[Any]]]) -> Iterator[Chunk]:
        """The rows of each ``SELECT`` in turn (each condition's rows lie after the one before's, by ``uid``)."""
        connection, backend = self._connection, self._backend
        assert backend is not None
        table, name = self.url.table(key), self.name_of(key)
        for where, parameters in parts:
            started = time.perf_counter()
            try:
                cursor = backend.stream(connection, table, columns=columns, where=where, parameters=parameters)
            except backend.errors as error:
                raise InputError(name, backend.refusal(connection, table, error=error)) from None
            self.seconds += time.perf_counter() - started
            try:
                yield from self._timed(backend.chunks(cursor, name))
            finally:
                with suppress(Exception):
                    cursor.close()

    def _timed(self, chunks: Iterator[Chunk]) -> Iterator[Chunk]:
        """``chunks``, the time spent making each (not the time its reader takes) added to ``seconds``."""
        while True:
            started = time.perf_counter()
            chunk = next(chunks, None)
            self.seconds += time.perf_counter() - started
            if chunk is None:
                return
            yield chunk

    def _newer(self, connection: Any, key: str, *, mark: TableMark | None) -> list[tuple[str, list[Any]]]:
        """The conditions that ask only for what is new since ``mark`` (one empty one: every row): the
        rows before the margin that are asked for again (by run, or the run rows by uid), then the
        margin on. Two ``SELECT``\\s, as a planner reads an ``OR`` of the two along the whole table."""
        backend = self._backend
        assert backend is not None
        whole: list[tuple[str, list[Any]]] = [("", [])]
        if mark is None or key not in (EVENTS_KEY, *RESUMED_TABLES):
            return whole
        table = self.url.table(key)
        highest = backend.scalar(connection, f"SELECT MAX({backend.name('uid')}) FROM {backend.name(table)}")
        if highest is None or int(highest) < mark.max_uid:
            return whole  # fewer rows than were read: the table was emptied or restored, read it whole
        newer = backend.from_uid(mark.since)
        again: list[Any] = []
        if key == RUNS_TABLE:
            again, listed = list(self.resume.unfinished if self.resume is not None else []), "uid"
        elif key == EVENTS_KEY:
            runs = backend.values(connection, f"SELECT DISTINCT {backend.name('run')} FROM {backend.name(table)} "
                                              f"WHERE {newer[0]}", parameters=newer[1])
            unfinished = self.resume.unfinished if self.resume is not None else []
            again, listed = list(dict.fromkeys([*runs, *unfinished])), "run"
            if len(again) > MOST_RUNS_NAMED:
                return whole
        return ([backend.before_uid_in(mark.since, listed, values=again)] if again else []) + [newer]

    def _events(self, fetched: Iterator[Chunk], mark: TableMark | None) -> Iterator[Chunk]:
        """The events as fetched, counted, and where the next read resumes noted."""
        seen: list[tuple[pa.Array, pa.Array]] = []
        count = 0
        for chunk in fetched:
            uids, crdates, runs = _chunk_columns(chunk, ("uid", "crdate", "run"))
            seen.append((uids, crdates))
            self.fetched_runs.update(_run_keys(runs))
            count += len(uids)
            yield chunk
        self.fetched[EVENTS_KEY] = count
        next_mark = _next_mark(seen, mark)
        if next_mark is not None:
            self.marks.tables[EVENTS_KEY] = next_mark

    def _table_rows(self, key: str, fetched: Iterator[Chunk], *, mark: TableMark | None) -> Iterator[Chunk]:
        """A table's rows: as fetched, or (resumed) the kept rows with the new ones merged by ``uid``."""
        if mark is None:
            tables: list[pa.Table] | None = []
            count = 0
            for chunk in fetched:
                count += _chunk_rows(chunk)
                if tables is not None and isinstance(chunk, ArrowChunk):
                    tables.append(chunk.table)
                else:
                    tables = None
                yield chunk
            self.fetched[key] = count
            rows = _concatenated(tables) if tables is not None else None
        else:
            assert mark.rows is not None
            new = list(fetched)
            self.fetched[key] = sum(map(_chunk_rows, new))
            rows = _merged(mark.rows, new)
            if rows is None:  # the kept rows and the new ones share no Arrow types: row by row
                yield _merged_rows(mark.rows, new)
                return
            yield from table_chunks(rows)
        self._note_table(key, rows)

    def _note_table(self, key: str, rows: pa.Table | None) -> None:
        """Where the next read of a table resumes (all its rows kept); the runs not yet finished."""
        if key not in RESUMED_TABLES or rows is None or "uid" not in rows.column_names:
            return
        crdates = rows.column("crdate") if "crdate" in rows.column_names else pa.nulls(rows.num_rows, pa.int64())
        mark = _next_mark([(rows.column("uid"), crdates)], None)
        if mark is None:
            return
        mark.rows = rows
        self.marks.tables[key] = mark
        if key == RUNS_TABLE and "status" in rows.column_names:
            finished = pc.is_in(rows.column("status"), pa.array(sorted(TERMINAL_STATUSES)))
            self.marks.unfinished = [int(uid) for uid in rows.filter(pc.invert(pc.fill_null(finished, False)))
                                     .column("uid").to_pylist() if isinstance(uid, int)]

    def _open(self) -> Any:
        if self._connection is None:
            self._backend = BACKENDS[self.url.scheme]()
            self._connection = self._backend.connect(self.url)
            try:
                self._backend.begin(self._connection)
            except self._backend.errors as error:
                self.close()
                raise InputError(self.url.shown, f"cannot be read: {first_line(error)}") from None
            atexit.register(self.close)
        return self._connection

    def _read(self, key: str) -> None:
        self._unread.discard(key)
        if not self._unread:
            self.close()

    def close(self) -> None:
        """The transaction ended (it changed nothing) and the connection closed."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with suppress(Exception):
                connection.rollback()
            with suppress(Exception):
                connection.close()


def _chunk_rows(chunk: Chunk) -> int:
    return chunk.table.num_rows if isinstance(chunk, ArrowChunk) else len(chunk.rows)


def _chunk_columns(chunk: Chunk, columns: Sequence[str]) -> list[pa.Array]:
    """Some columns of a fetched batch, as Arrow arrays (nulls for a column it lacks or cannot hold)."""
    found = []
    for column in columns:
        if isinstance(chunk, ArrowChunk):
            values = chunk.table.column(column) if column in chunk.table.column_names else None
            found.append(values.combine_chunks() if values is not None else pa.nulls(chunk.table.num_rows))
            continue
        raw = [value.get(column) if isinstance(value, dict) else None for _number, value in chunk.rows]
        try:
            found.append(pa.array(raw))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            found.append(pa.nulls(len(raw)))
    return found


def _run_keys(runs: pa.Array) -> Iterable[str]:
    """The runs a batch names, each once, as their text (``str`` of a whole number or of a text)."""
    if pa.types.is_integer(runs.type) or pa.types.is_string(runs.type) or pa.types.is_large_string(runs.type):
        return pc.unique(runs.drop_null()).cast(pa.string()).to_pylist()
    return {str(run) for run in runs.to_pylist() if run is not None}


def _whole_numbers(values: pa.Array | pa.ChunkedArray) -> pa.Array | None:
    """A column as int64, or None where it does not hold whole numbers."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_null(values.type):
        return pa.nulls(len(values), pa.int64())
    if not pa.types.is_integer(values.type):
        return None
    return values.cast(pa.int64())


def _next_mark(seen: list[tuple[Any, Any]], previous: TableMark | None) -> TableMark | None:
    """Where the next read resumes, from the ``uid`` and ``crdate`` of the rows read now (and the
    last mark, for the rows not read again): the first ``uid`` of the margin, or past the highest."""
    pairs = [(_whole_numbers(uids), _whole_numbers(crdates)) for uids, crdates in seen]
    if any(uids is None or crdates is None for uids, crdates in pairs):
        return None
    uids = pa.concat_arrays([pair[0] for pair in pairs] or [pa.array([], pa.int64())])
    crdates = pa.concat_arrays([pair[1] for pair in pairs] or [pa.array([], pa.int64())])
    if uids.null_count:
        return None
    before = (previous.max_uid, previous.max_crdate) if previous is not None else (None, None)
    highest: int = max([value for value in (pc.max(uids).as_py(), before[0]) if value is not None], default=0)
    newest: int | None = max([value for value in (pc.max(crdates).as_py(), before[1]) if value is not None],
                             default=None)
    if newest is None:
        since = highest + 1 if not len(uids) else pc.min(uids).as_py()  # no dates: the margin is all read
    else:
        recent = pc.fill_null(pc.greater_equal(crdates, newest - MARGIN_SECONDS), True)
        since = pc.min(uids.filter(recent)).as_py()
        since = highest + 1 if since is None else since
    return TableMark(highest, newest, since)


def _concatenated(tables: list[pa.Table]) -> pa.Table | None:
    try:
        return pa.concat_tables(tables, promote_options="default") if tables else None
    except (pa.ArrowException, TypeError, ValueError):
        return None


def _merged(kept: pa.Table, new: list[Chunk]) -> pa.Table | None:
    """The kept rows (those fetched again left out) and the new ones, by ``uid``; None where they
    cannot be one Arrow table."""
    if any(not isinstance(chunk, ArrowChunk) for chunk in new):
        return None
    fetched = _concatenated([chunk.table for chunk in new if isinstance(chunk, ArrowChunk)])
    if fetched is None:
        return kept if not new else None
    again = pc.is_in(kept.column("uid"), fetched.column("uid"))
    together = _concatenated([kept.filter(pc.invert(again)), fetched.select(kept.column_names)]
                             if set(fetched.column_names) == set(kept.column_names) else [])
    return together.sort_by("uid") if together is not None else None


def _merged_rows(kept: pa.Table, new: list[Chunk]) -> RowChunk:
    """The kept rows and the new ones as raw rows, by ``uid`` (the row checker reads them)."""
    rows = {number: value for chunk in new for number, value in chunk.rows}
    for value in kept.to_pylist():
        rows.setdefault(value["uid"], value)
    return RowChunk(sorted(rows.items(), key=lambda item: item[0]))


def _table_row(table: pa.Table, position: int) -> dict[str, Any]:
    return table.slice(position, 1).to_pylist()[0]


def table_chunks(table: pa.Table) -> Iterator[ArrowChunk]:
    """A table's rows, ``BATCH_ROWS`` at a time, numbered by ``uid``."""
    for start in range(0, table.num_rows, BATCH_ROWS):
        part = table.slice(start, BATCH_ROWS)
        yield ArrowChunk(part, start + 1, functools.partial(_table_row, part),
                         row_numbers=part.column("uid").combine_chunks().cast(pa.int64()))


def _driver(url: DatabaseUrl, module: str) -> Any:
    """The driver's module, or a one-line refusal saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(url.shown, f"reading {url.scheme}:// needs its driver: pip install "
                                    f"'nrllm-report[{EXTRAS[url.scheme]}]'") from None


def first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def prompted_password(url: DatabaseUrl) -> str | None:
    """A password asked for on the terminal (not echoed), or None where standard input is not one."""
    if not sys.stdin.isatty():
        return None
    import click  # the prompt the command line's other questions use

    return click.prompt(f"Password for {url.shown}", hide_input=True, default="", show_default=False,
                        err=True) or None


class Backend:
    """What differs between the databases: connecting, the read-only transaction, which tables
    and columns there are, and a streaming ``SELECT``."""

    errors: type[BaseException] | tuple[type[BaseException], ...] = ()
    quote = '"'
    placeholder = "%s"

    def connect(self, url: DatabaseUrl) -> Any:
        raise NotImplementedError

    def begin(self, connection: Any) -> None:
        raise NotImplementedError

    def readable(self, connection: Any, tables: list[str]) -> set[str]:
        raise NotImplementedError

    def name(self, name: str) -> str:
        return f"{self.quote}{name}{self.quote}"

    def query(self, table: str, columns: Sequence[str], *, where: str = "") -> str:
        selected = ", ".join(self.name(column) for column in columns)
        condition = f" WHERE {where}" if where else ""
        return f"SELECT {selected} FROM {self.name(table)}{condition} ORDER BY {self.name('uid')}"

    def from_uid(self, since: int) -> tuple[str, list[Any]]:
        """``uid >= since``: the condition and its parameters."""
        return f"{self.name('uid')} >= {self.placeholder}", [since]

    def before_uid_in(self, since: int, listed: str, *, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``uid < since`` and ``listed`` one of ``values``: the condition and its parameters."""
        marks = ", ".join(self.placeholder for _ in values)
        return f"{self.name('uid')} < {self.placeholder} AND {self.name(listed)} IN ({marks})", [since, *values]

    def values(self, connection: Any, statement: str, *, parameters: Sequence[Any]) -> list[Any]:
        """The first column of a small ``SELECT``'s rows."""
        cursor = connection.cursor()
        try:
            cursor.execute(statement, list(parameters))
            return [row[0] for row in cursor.fetchall()]
        finally:
            cursor.close()

    def scalar(self, connection: Any, statement: str) -> Any:
        cursor = connection.cursor()
        try:
            cursor.execute(statement)
            row = cursor.fetchone()
            return None if row is None else row[0]
        finally:
            cursor.close()

    def columns(self, connection: Any, table: str) -> list[str]:
        """The table's column names, from an empty ``SELECT`` (SELECT privilege is all it needs)."""
        cursor = connection.cursor()
        try:
            cursor.execute(f"SELECT * FROM {self.quote}{table}{self.quote} WHERE 1 = 0")
            names = [description[0] for description in cursor.description]
            cursor.fetchall()
        finally:
            cursor.close()
        return names

    def stream(self, connection: Any, table: str, *, columns: Sequence[str], where: str = "",
               parameters: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def chunks(self, cursor: Any, name: str) -> Iterator[Chunk]:
        """The streamed ``SELECT``'s rows, a batch at a time."""
        return cursor_chunks(cursor, name, errors=self.errors)

    def refusal(self, connection: Any, table: str, *, error: BaseException) -> str:
        return f"cannot be read: {first_line(error)}"


# ---------------------------------------------------------------- MySQL and MariaDB (mysqlclient or PyMySQL)

MYSQL_DRIVER_ENV = "NRLLM_REPORT_MYSQL_DRIVER"
MYSQL_DRIVERS = {"mysqlclient": "MySQLdb", "pymysql": "pymysql"}


def mysql_driver(url: DatabaseUrl) -> tuple[str, Any]:
    """The MySQL driver a read uses and its module: the one ``NRLLM_REPORT_MYSQL_DRIVER`` names,
    else mysqlclient where it is installed (libmariadb parses the rows in C, several times faster
    than PyMySQL's Python), else PyMySQL (a wheel everywhere, the ``mysql`` extra's)."""
    chosen = os.environ.get(MYSQL_DRIVER_ENV, "").strip().lower()
    if chosen and chosen not in MYSQL_DRIVERS:
        raise InputError(url.shown, f"{MYSQL_DRIVER_ENV}={chosen!r} names no driver; it may be "
                                    + " or ".join(MYSQL_DRIVERS))
    if not chosen:
        try:
            importlib.import_module("MySQLdb")
            chosen = "mysqlclient"
        except ImportError:
            chosen = "pymysql"
    module = _driver(url, MYSQL_DRIVERS[chosen])
    importlib.import_module(f"{module.__name__}.cursors")  # MySQLdb does not import it itself
    return chosen, module


class MySQL(Backend):
    """MySQL or MariaDB: one ``REPEATABLE READ`` read-only transaction with a consistent snapshot,
    an unbuffered cursor (rows stream from the server as they are fetched)."""

    quote = "`"
    driver_name = ""

    def connect(self, url: DatabaseUrl) -> Any:
        self.driver_name, driver = mysql_driver(url)
        self.errors = driver.MySQLError
        self.driver = driver
        options_file = Path("~/.my.cnf").expanduser()
        password = url.password()
        options: dict[str, Any] = {}
        if options_file.is_file():
            options["read_default_file"] = str(options_file)
        if self.driver_name == "mysqlclient":
            # DECIMAL as the nearest float, parsed in C, as a file's numbers are read.
            from MySQLdb.constants import FIELD_TYPE
            from MySQLdb.converters import conversions

            options["conv"] = {**conversions, FIELD_TYPE.NEWDECIMAL: float, FIELD_TYPE.DECIMAL: float}

        def attempt(password: str | None) -> Any:
            # Only a password there is: mysqlclient lets even an empty one win over the options file's.
            given = {"password": password} if password else {}
            return driver.connect(
                host=url.host or "localhost", port=url.port or 3306, user=url.user, database=url.database,
                charset="utf8mb4", connect_timeout=30, **given, **options)

        return _connected(url, attempt, password=password, errors=driver.MySQLError,
                          no_password_said="using password: NO")

    def begin(self, connection: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")

    def readable(self, connection: Any, tables: list[str]) -> set[str]:
        # information_schema shows a user only the tables it has a privilege on.
        with connection.cursor() as cursor:
            cursor.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
            return {row[0] for row in cursor.fetchall()} & set(tables)

    def stream(self, connection: Any, table: str, *, columns: Sequence[str], where: str = "",
               parameters: Sequence[Any] = ()) -> Any:
        cursor = connection.cursor(self.driver.cursors.SSCursor)
        cursor.execute(self.query(table, columns, where=where), list(parameters) or None)
        return cursor


def _connected(url: DatabaseUrl, attempt: Callable[[str | None], Any], *, password: str | None,
               errors: Any, no_password_said: str) -> Any:
    """A connection; where none was found and the server wants one, a password asked for on a terminal."""
    try:
        return attempt(password)
    except errors as error:
        if password is not None or no_password_said not in str(error):
            raise InputError(url.shown, f"cannot connect: {first_line(error)}") from None
        asked = prompted_password(url)
        if asked is None:
            raise InputError(url.shown, f"cannot connect: {first_line(error)} (no password in "
                                        f"{url.password_env}, nor the driver's own file)") from None
    try:
        return attempt(asked)
    except errors as error:
        raise InputError(url.shown, f"cannot connect: {first_line(error)}") from None


# ---------------------------------------------------------------- PostgreSQL (ADBC's libpq driver)


class PostgreSQLBackend(Backend):
    """PostgreSQL through ADBC's libpq driver, whose rows come as Arrow record batches (it streams a
    ``SELECT`` as ``COPY (SELECT …) TO STDOUT`` in binary, which reads as the ``SELECT`` does: SELECT
    privilege, the read-only transaction): one ``START TRANSACTION ISOLATION LEVEL REPEATABLE READ,
    READ ONLY`` (one snapshot) for every table."""

    def connect(self, url: DatabaseUrl) -> Any:
        dbapi = _driver(url, "adbc_driver_postgresql.dbapi")
        manager = importlib.import_module("adbc_driver_manager")
        self.errors = manager.Error
        self.batch_errors = (manager.Error, pa.ArrowException)

        def attempt(password: str | None) -> Any:
            return dbapi.connect(libpq_uri(url, password), autocommit=True)

        return _connected(url, attempt, password=url.password(), errors=manager.Error,
                          no_password_said="no password supplied")

    def begin(self, connection: Any) -> None:
        # Autocommit: the driver sends no BEGIN or COMMIT of its own, so this transaction holds until the end.
        self.execute(connection, "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    def execute(self, connection: Any, statement: str) -> None:
        cursor = connection.cursor()
        try:
            cursor.execute(statement)
        finally:
            cursor.close()

    def readable(self, connection: Any, tables: list[str]) -> set[str]:
        names = ", ".join(pg_literal(table) for table in tables)  # our own names: letters, digits, '_'
        return set(self.values(connection, "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname IN "
                                           f"({names}) AND pg_catalog.pg_table_is_visible(c.oid) "
                                           "AND has_table_privilege(c.oid, 'SELECT')", parameters=[]))

    def values(self, connection: Any, statement: str, *, parameters: Sequence[Any]) -> list[Any]:
        cursor = connection.cursor()
        try:
            cursor.execute(bound(statement, self.placeholder, parameters=parameters))
            return cursor.fetch_arrow_table().column(0).to_pylist()
        finally:
            cursor.close()

    def stream(self, connection: Any, table: str, *, columns: Sequence[str], where: str = "",
               parameters: Sequence[Any] = ()) -> Any:
        cursor = connection.cursor()
        try:
            cursor.execute(bound(self.query(table, columns, where=where), self.placeholder, parameters=parameters))
        except BaseException:
            cursor.close()
            raise
        return cursor

    def chunks(self, cursor: Any, name: str) -> Iterator[Chunk]:
        reader = cursor.fetch_record_batch()
        rows_read = 0
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                return
            except self.batch_errors as error:
                raise InputError(name, f"cannot be read after row {rows_read}: {first_line(error)}") from None
            if batch.num_rows:
                yield arrow_chunk(pa.Table.from_batches([batch]), rows_read)
                rows_read += batch.num_rows


def libpq_uri(url: DatabaseUrl, password: str | None) -> str:
    """The connection string libpq reads (it reads ``~/.pgpass`` itself where it holds no password)."""
    user = quote(url.user, safe="") if url.user else ""
    secret = f":{quote(password, safe='')}" if password else ""
    host = url.host or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{url.port}" if url.port else ""
    at = "@" if user or secret else ""
    return (f"postgresql://{user}{secret}{at}{host}{port}/{quote(url.database, safe='')}"
            "?connect_timeout=30&application_name=nrllm-report")


def pg_literal(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"no literal for {value!r}")
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"


def bound(statement: str, placeholder: str, *, parameters: Sequence[Any]) -> str:
    """A statement with its parameters as literals (each a whole number or a text; the statements'
    own names hold only letters, digits and '_', so a placeholder is never part of one)."""
    parts = statement.split(placeholder)
    if len(parts) != len(parameters) + 1:
        raise ValueError(f"{len(parameters)} parameters for {len(parts) - 1} placeholders")
    return parts[0] + "".join(pg_literal(value) + part for value, part in zip(parameters, parts[1:]))


def arrow_chunk(table: pa.Table, rows_read: int) -> Chunk:
    """An Arrow-native driver's batch as a file's: integers as int64, a ``numeric`` (text in Arrow) as
    its nearest float, as the other drivers' rows are read; numbered by ``uid``."""
    columns = []
    for name, column in zip(table.column_names, table.columns):
        if isinstance(column.type, pa.BaseExtensionType):
            column = pa.chunked_array([chunk.storage for chunk in column.chunks], column.type.storage_type)
        if pa.types.is_string(column.type) and (table.schema.field(name).metadata or {}).get(
                b"POSTGRESQL:type") == b"numeric":
            column = column.cast(pa.float64())
        elif pa.types.is_integer(column.type):
            column = column.cast(pa.int64())
        columns.append(column)
    converted = pa.table(columns, names=table.column_names)
    numbers = converted.column("uid").combine_chunks() if "uid" in converted.column_names else None
    if numbers is None or numbers.null_count:
        numbers = pa.array(range(rows_read + 1, rows_read + 1 + converted.num_rows), pa.int64())
    return ArrowChunk(converted, rows_read + 1, lambda position: converted.slice(position, 1).to_pylist()[0],
                      row_numbers=numbers)


# ---------------------------------------------------------------- SQLite


class SQLite(Backend):
    """SQLite, opened read-only (``mode=ro``, ``PRAGMA query_only``); one deferred ``BEGIN`` holds
    one snapshot for the whole read."""

    errors = sqlite3.Error
    placeholder = "?"

    def connect(self, url: DatabaseUrl) -> Any:
        path = Path(url.database)
        if not path.is_file():
            raise InputError(url.shown, "no such database file")
        try:
            return sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, isolation_level=None)
        except sqlite3.Error as error:
            raise InputError(url.shown, f"cannot be opened: {first_line(error)}") from None

    def begin(self, connection: Any) -> None:
        connection.execute("PRAGMA query_only = ON")
        connection.execute("BEGIN")

    def readable(self, connection: Any, tables: list[str]) -> set[str]:
        return set(self.all_tables(connection)) & set(tables)

    def all_tables(self, connection: Any) -> list[str]:
        return [row[0] for row in
                connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]

    def stream(self, connection: Any, table: str, *, columns: Sequence[str], where: str = "",
               parameters: Sequence[Any] = ()) -> Any:
        return connection.execute(self.query(table, columns, where=where), list(parameters))

    def refusal(self, connection: Any, table: str, *, error: BaseException) -> str:
        if "no such table" not in str(error):
            return f"cannot be read: {error}"
        try:
            tables = self.all_tables(connection)
        except sqlite3.Error:
            tables = []
        return f"has no table {table!r} (it has {', '.join(repr(name) for name in tables) or 'none'})"


BACKENDS: dict[str, type[Backend]] = {"sqlite": SQLite, "mysql": MySQL, "mariadb": MySQL,
                                      "postgresql": PostgreSQLBackend, "postgres": PostgreSQLBackend}


# ---------------------------------------------------------------- any DB-API cursor


def cursor_chunks(cursor: Any, name: str, *,
                  errors: type[BaseException] | tuple[type[BaseException], ...]) -> Iterator[Chunk]:
    """A DB-API cursor's rows, ``BATCH_ROWS`` at a time, as Arrow tables (row by row where Arrow
    cannot hold a column as one type); a driver error mid-read is a one-line refusal."""
    columns = [description[0] for description in cursor.description]
    rows_read = 0
    while True:
        try:
            rows = cursor.fetchmany(BATCH_ROWS)
        except errors as error:
            raise InputError(name, f"cannot be read after row {rows_read}: {first_line(error)}") from None
        if not rows:
            return
        yield batch_chunk(columns, rows, rows_read=rows_read)
        rows_read += len(rows)


def batch_chunk(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, rows_read: int) -> Chunk:
    """One fetched batch: an Arrow table numbered by ``uid`` (by position where there is none).

    The rows are turned into columns by one ``zip`` and each column handed to Arrow whole: looking
    at every value in Python cost three times the driver's own fetch on the 50,000-run benchmark."""
    try:
        table = pa.table({column: pa.array(_values(values))
                          for column, values in zip(columns, zip(*rows), strict=True)})
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        numbers = _row_numbers(columns, rows, rows_read=rows_read)
        return RowChunk([(number, dict(zip(columns, row))) for number, row in zip(numbers, rows)])
    return ArrowChunk(table, rows_read + 1, lambda position: dict(zip(columns, rows[position])),
                      row_numbers=_uid_numbers(table))


def _uid_numbers(table: pa.Table) -> pa.Array | None:
    """The rows' uids as their numbers, where each row has a whole one of at least 0."""
    if "uid" not in table.column_names:
        return None
    uids = table.column("uid").combine_chunks()
    if not pa.types.is_integer(uids.type) or uids.null_count or (len(uids) and pc.min(uids).as_py() < 0):
        return None
    return uids.cast(pa.int64())


def _row_numbers(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, rows_read: int) -> list[int]:
    if "uid" in columns:
        index = list(columns).index("uid")
        uids = [row[index] for row in rows]
        if all(isinstance(uid, int) and not isinstance(uid, bool) and uid >= 0 for uid in uids):
            return uids
    return list(range(rows_read + 1, rows_read + 1 + len(rows)))


def _values(values: Sequence[Any]) -> Sequence[Any]:
    """One column's values; a ``decimal`` column's as their nearest floats, as a file's numbers are
    read (Arrow's decimal-to-float cast may land one step off, and a sum then differs in its last digit).

    A column of a result holds one type (PyMySQL's DECIMAL is ``Decimal`` throughout), so its first
    value that is not NULL tells; mysqlclient's are floats already."""
    first = next((value for value in values if value is not None), None)
    if isinstance(first, Decimal):
        return [float(value) if isinstance(value, Decimal) else value for value in values]
    return values
