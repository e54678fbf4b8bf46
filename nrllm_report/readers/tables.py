"""Which of nr-llm's tables each input holds, and the inputs of the tables besides the events.

A table is told by its name where the container carries it (a phpMyAdmin export's
``table`` objects; a file or dataset whose name starts with the table's name, such as
``tx_nrllm_agentrun.csv``), else by its columns (``core.tables``' marks). One
phpMyAdmin export may hold several tables: it is then one input per table. A file whose
columns fit no table is refused, naming the columns it lacks of the table it comes
closest to. A JSON file's records each name their own columns: its first record tells,
and a file of records that merely lack some of the events' columns stays the events',
whose checker names each row's missing field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq

from ..core.errors import InputError
from ..core.tables import EVENT_MARKS, EVENTS_TABLE, TABLE_NAMES_LONGEST_FIRST, TABLES
from . import STDIN, Input, reader_for
from .chunks import ArrowChunk, Chunk, RowChunk
from .delimited import csv_file_chunks, header_columns, tsv_file_chunks
from .json import (
    array_records,
    json_file_bytes,
    json_file_chunks,
    json_lines_file_chunks,
    open_binary,
    parse_json_line,
)
from .parquet import hive_partition, parquet_dataset_chunks, parquet_file_chunks, parquet_files
from .phpmyadmin import table_names

FIRST_LINES = 16  # lines of JSON Lines looked at for a first object


@dataclass(frozen=True)
class TableInput:
    """An input of one of the tables besides the events: the table, the input's name, and its rows."""

    table: str
    name: str
    chunks: Callable[[], Iterator[Chunk]]


def split_inputs(inputs: list[Input]) -> tuple[list[Input], list[TableInput]]:
    """The inputs of step events, and those of the other tables, in the order given."""
    events: list[Input] = []
    others: list[TableInput] = []
    for source in inputs:
        for table in tables_of(source):
            if table == EVENTS_TABLE:
                events.append(source)
            else:
                others.append(table_input(source, table))
    return events, others


def tables_of(source: Input) -> list[str]:
    """The tables an input holds: by the container's word, else the name, else the columns."""
    if source.database is not None:
        return [EVENTS_TABLE, *source.database.tables()]  # a database: the events, and the others it holds
    if source.path is None or source.name == STDIN:
        return [EVENTS_TABLE]  # standard input: the events
    path = source.path
    lowered = path.name.lower()
    if not path.is_dir() and lowered.endswith((".json", ".json.gz")):
        held = _phpmyadmin_tables(path, source.name)
        if held is not None:
            return held or [EVENTS_TABLE]
    for table in TABLE_NAMES_LONGEST_FIRST:
        if lowered.startswith(table):
            return [table]
    return [_table_by_columns(source)]


def table_input(source: Input, table: str) -> TableInput:
    """The input's rows of ``table``, read by the reader of its format (or in the database's session)."""
    database = source.database
    if database is not None:
        return TableInput(table, database.name_of(table), lambda: database.chunks(table))
    assert source.path is not None
    path, name = source.path, source.name
    if path.is_dir():
        return TableInput(table, name, lambda: parquet_dataset_chunks(path, name))
    reader = reader_for(path)
    # A delimited file's header needs no particular column here: the table's checker names what is missing.
    if reader is csv_file_chunks:
        return TableInput(table, name, lambda: csv_file_chunks(path, name, ()))
    if reader is tsv_file_chunks:
        return TableInput(table, name, lambda: tsv_file_chunks(path, name, ()))
    if reader is json_file_chunks:
        return TableInput(table, name, lambda: json_file_chunks(path, name, table))
    if reader is json_lines_file_chunks:
        return TableInput(table, name, lambda: json_lines_table_chunks(path, name))
    assert reader is not None
    return TableInput(table, name, lambda: reader(path, name))


def json_lines_table_chunks(path: Path, name: str) -> Iterator[Chunk]:
    """A JSON Lines file of a table: read by Arrow whole, each column typed as its values show,
    where every line is one object and a column's values share a type; else line by line (the
    events' reader, whose Arrow path reads only the events' columns)."""
    data = json_file_bytes(path, name)
    lines = data.splitlines()
    if all(line.strip().startswith(b"{") for line in lines):
        try:
            table = pajson.read_json(pa.BufferReader(data))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            table = None
        if table is not None and table.num_rows == len(lines):
            yield ArrowChunk(table, 1, lambda position: parse_json_line(lines[position].strip()))
            return
    numbered = [(number, line.strip()) for number, line in enumerate(lines, 1) if line.strip()]
    yield RowChunk([(number, parse_json_line(text)) for number, text in numbered])


def _phpmyadmin_tables(path: Path, name: str) -> list[str] | None:
    """The known tables a phpMyAdmin export holds (events first), or None when it is not one."""
    data = json_file_bytes(path, name)
    if not data.lstrip().startswith(b"["):
        return None
    records = array_records(data, name)
    try:
        first = next(records, None)
        if first is None or not isinstance(first.lenient, dict) or "type" not in first.lenient:
            return None  # not phpMyAdmin's: only the first record was read
        names = table_names([first.lenient, *(record.lenient for record in records)])
    except InputError:
        return None  # a broken array: the events' reader says where
    if names is None:
        return None
    known = [table for table in names if table == EVENTS_TABLE or table in TABLES]
    return sorted(known, key=lambda table: table != EVENTS_TABLE)


def _table_by_columns(source: Input) -> str:
    """The table whose marks the input's columns hold; the events where they hold the events'."""
    columns, fixed = _columns(source)
    if columns is None:
        return EVENTS_TABLE  # empty, or nothing to tell by: the events' reader says what it finds
    if all(mark in columns for mark in EVENT_MARKS):
        return EVENTS_TABLE
    fitting = [spec for spec in TABLES.values() if all(mark in columns for mark in spec.marks)]
    if fitting:
        return max(fitting, key=lambda spec: len(spec.marks)).name
    if any(mark in columns for mark in EVENT_MARKS):
        return EVENTS_TABLE  # the events' reader names what is missing: a CSV header, or row by row
    raise InputError(source.name, _fits_no_table(columns, source.path is not None and reader_for(source.path) in (
        csv_file_chunks, tsv_file_chunks)))


def _fits_no_table(columns: set[str], header_row: bool) -> str:
    """One line: what the file lacks of the table it comes closest to, and what it names."""
    candidates = [(EVENTS_TABLE, EVENT_MARKS)] + [(spec.name, spec.marks) for spec in TABLES.values()]
    table, marks = min(candidates, key=lambda item: sum(mark not in columns for mark in item[1]) / len(item[1]))
    lacking = [mark for mark in marks if mark not in columns]
    what = "the step events" if table == EVENTS_TABLE else table
    shown = sorted(columns)
    named = ", ".join(repr(column) for column in shown[:12]) + (", ..." if len(shown) > 12 else "")
    return (f"has {'a header row' if header_row else 'columns'} without the column{'s' if len(lacking) > 1 else ''} "
            f"{', '.join(repr(mark) for mark in lacking)} of {what} ({table}), the table it comes closest to "
            f"(it names {named or 'none'}); it fits none of nr-llm's tables")


def _columns(source: Input) -> tuple[set[str] | None, bool]:
    """The input's column names, and whether every row has them (a table's header or schema)
    rather than a first record's keys; None where there is nothing to tell by."""
    assert source.path is not None
    path, name = source.path, source.name
    if path.is_dir():
        files = parquet_files(path)
        if not files:
            return None, True
        return set(_parquet_columns(files[0], name)) | set(hive_partition(files[0].relative_to(path))), True
    reader = reader_for(path)
    if reader is csv_file_chunks or reader is tsv_file_chunks:
        columns = header_columns(path, name, reader is tsv_file_chunks)
        return (set(columns) if columns else None), True
    if reader is parquet_file_chunks:
        return set(_parquet_columns(path, name)), True
    if reader is json_file_chunks or reader is json_lines_file_chunks:
        first = _first_record(path, name, reader is json_file_chunks)
        return (set(first) if isinstance(first, dict) else None), False
    return None, False


def _parquet_columns(path: Path, name: str) -> list[str]:
    try:
        return list(pq.read_schema(path).names)
    except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a file that is not Parquet
        raise InputError(name, f"is not a readable Parquet file: {error}") from None


def _first_record(path: Path, name: str, array: bool) -> Any:
    """The first readable record of a JSON array or JSON Lines file (None if there is none)."""
    if array:
        data = json_file_bytes(path, name)
        if data.lstrip().startswith(b"["):
            try:
                for record in array_records(data, name):
                    if isinstance(record.lenient, dict):
                        return record.lenient
            except InputError:
                return None
            return None
        lines: Iterator[bytes] = iter(data.splitlines())
        return _first_object(lines)
    try:
        with open_binary(path, name) as stream:
            return _first_object(iter(stream))
    except (OSError, EOFError, ValueError):
        return None  # the events' reader says what is wrong with the file


def _first_object(lines: Iterator[bytes]) -> Any:
    """The first line that holds a JSON object, within the first few lines that hold anything."""
    looked = 0
    for line in lines:
        if line.strip():
            value = parse_json_line(line.strip().removeprefix(b"\xef\xbb\xbf"))
            if isinstance(value, dict):
                return value
            looked += 1
            if looked >= FIRST_LINES:
                return None
    return None
