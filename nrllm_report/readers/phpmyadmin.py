"""phpMyAdmin's JSON export, and rows whose every value is text as Arrow batches.

phpMyAdmin writes a JSON array of objects tagged ``"type"``: a ``header``, a
``database`` and a ``table`` per exported table, the table's rows under ``data``
with every value a string (``{"uid": "1", "duration_ms": "4.00", ...}``). The rows of
one table are read at a time: the events', or another of nr-llm's (``table_names``
tells which a dump holds).

A ``.json`` file is taken for an export where its array's first record is tagged so
(``looks_like_export``, the registry's sniff); it is one where every record is, else
it is read as the JSON array it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..core.errors import InputError
from ..core.tables import EVENTS_TABLE, TABLES
from .chunks import ArrowChunk, Chunk, RowChunk
from .inputs import open_binary
from .json import (
    BLOCK_LINES,
    BYTE_ORDER_MARK,
    GZIP_ERRORS,
    RECORD_NOT_UTF8,
    array_records,
    data_lines,
    is_array,
    json_file_bytes,
    json_lines_chunks,
    record_chunks,
)

EXPORT_TYPES = frozenset({"header", "database", "table"})
SNIFF_BYTES = 1 << 20  # how much of a file is read first to tell whether it is an export


def export_chunks(path: Path, name: str, *, table_name: str = EVENTS_TABLE) -> Iterator[Chunk]:
    """The rows of ``table_name`` of an export, every value a string, each with its own verdict;
    a file that is no export after all is read as the JSON array (or JSON Lines) it is."""
    data = json_file_bytes(path, name)
    if not is_array(data):
        yield from json_lines_chunks(data_lines(data), name)
        return
    records = list(array_records(data, name))
    exported = event_rows([record.lenient for record in records], name, table_name=table_name)
    if exported is None:
        yield from record_chunks(records)
        return
    yield from string_chunks([row if _encodable(row) else RECORD_NOT_UTF8 for row in exported], BLOCK_LINES)


def _encodable(row: Any) -> bool:
    """A row holds no byte that is not UTF-8 (a lone surrogate of ``surrogateescape``) in any key or value."""
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def looks_like_export(path: Path, name: str) -> bool:
    """Whether a JSON file's array begins with a record tagged as an export's are (a file that
    cannot be read is not: the JSON reader says what is wrong with it)."""
    try:
        with open_binary(path, name) as stream:
            head = stream.read(SNIFF_BYTES)
        tagged = _first_tagged(head.removeprefix(BYTE_ORDER_MARK), name)
        if tagged is None and len(head) == SNIFF_BYTES:  # a first record longer than the head
            tagged = _first_tagged(json_file_bytes(path, name), name)
    except (InputError, OSError, *GZIP_ERRORS):
        return False
    return bool(tagged)


def _first_tagged(data: bytes, name: str) -> bool | None:
    """Whether the array's first record is tagged with an export's type; None where ``data`` ends first."""
    if not is_array(data):
        return False
    try:
        first = next(array_records(data, name), None)
    except InputError:
        return None
    if first is None or not isinstance(first.lenient, dict):
        return False
    tag = first.lenient.get("type")
    return isinstance(tag, str) and tag in EXPORT_TYPES


def export_tables(path: Path, name: str) -> list[str] | None:
    """The known tables an export holds (events first), or None when it is not one."""
    data = json_file_bytes(path, name)
    if not is_array(data):
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


def is_export(records: list[Any]) -> bool:
    """A phpMyAdmin export: a non-empty array of objects each tagged with one of its types."""
    return bool(records) and all(
        isinstance(record, dict) and record.get("type") in EXPORT_TYPES for record in records
    )


def table_names(records: list[Any]) -> list[str] | None:
    """The names of the tables a phpMyAdmin export holds, in order, or None when ``records`` is not one."""
    if not is_export(records):
        return None
    return list(dict.fromkeys(str(record.get("name")) for record in records if record["type"] == "table"))


def event_rows(records: list[Any], name: str, *, table_name: str = EVENTS_TABLE) -> list[Any] | None:
    """The rows of ``table_name`` (the events' by default) of a phpMyAdmin export, or None
    when ``records`` is not one.

    An export without that table cannot be read for it: ``InputError`` names the tables
    it does have.
    """
    if not is_export(records):
        return None
    tables = [record for record in records if record["type"] == "table"]
    chosen = [table for table in tables if table.get("name") == table_name]
    if not chosen:
        names = ", ".join(repr(table.get("name")) for table in tables) or "none"
        raise InputError(name, f"is a phpMyAdmin export without the table {table_name}; its tables: {names}")
    rows: list[Any] = []
    for table in chosen:
        data = table.get("data")
        if data is not None and not isinstance(data, list):
            raise InputError(name, f"is a phpMyAdmin export whose {table_name} data is not a list of rows")
        rows.extend(data or [])
    return rows


def string_chunks(rows: list[Any], block_rows: int) -> Iterator[Chunk]:
    """Rows of text values in blocks: as an Arrow table of strings where every row of the block
    is an object of strings and nulls (the fast path's shape), else row by row."""
    for start in range(0, len(rows), block_rows):
        block = rows[start : start + block_rows]
        table = _string_table(block)
        if table is None:
            yield RowChunk([(start + offset + 1, row) for offset, row in enumerate(block)])
        else:
            yield ArrowChunk(table, start + 1, block.__getitem__)


def _string_table(rows: list[Any]) -> pa.Table | None:
    if not all(isinstance(row, dict) for row in rows):
        return None
    names = list(dict.fromkeys(key for row in rows for key in row))
    schema = pa.schema([(key, pa.string()) for key in names])
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowException, TypeError, ValueError, UnicodeError):
        return None  # a value that is not a string (or no UTF-8 can hold): the row checker names it
