"""phpMyAdmin's JSON export, and rows whose every value is text as Arrow batches.

phpMyAdmin writes a JSON array of objects tagged ``"type"``: a ``header``, a
``database`` and a ``table`` per exported table, the table's rows under ``data``
with every value a string (``{"uid": "1", "duration_ms": "4.00", ...}``). The rows of
one table are read at a time: the events', or another of nr-llm's (``table_names``
tells which a dump holds).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..core.errors import InputError
from ..core.tables import EVENTS_TABLE as EVENT_TABLE
from .chunks import ArrowChunk, Chunk, RowChunk

EXPORT_TYPES = frozenset({"header", "database", "table"})


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


def event_rows(records: list[Any], name: str, table_name: str = EVENT_TABLE) -> list[Any] | None:
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
