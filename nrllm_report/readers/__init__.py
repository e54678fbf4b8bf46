"""Readers for every export shape, chosen from one table keyed by suffix.

Each reader yields chunks (see ``chunks``); row by row they are ``(row_number, value)``:
the 1-based line or record number in its input (a CSV's header not counted) and the
parsed value (usually a dict), or an ``Unreadable`` for a line or record that cannot
be read (not JSON, not UTF-8, the wrong number of fields). A file that cannot be read
at all raises ``InputError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..core.errors import InputError
from ..core.tables import EVENTS_TABLE
from .chunks import ArrowChunk, Chunk, RowChunk, rows_of
from .database import DatabaseSession, is_database_url, parse_database_url
from .delimited import csv_file_chunks, tsv_file_chunks
from .json import json_file_chunks, json_lines_chunks, json_lines_file_chunks
from .parquet import parquet_dataset_chunks, parquet_file_chunks

__all__ = ["ArrowChunk", "Chunk", "Input", "RowChunk", "READERS_BY_SUFFIX", "resolve_input", "resolve_inputs"]

RawRow = tuple[int, Any]
Reader = Callable[[Path, str], Iterator[Chunk]]

STDIN = "-"

READERS_BY_SUFFIX: dict[str, Reader] = {
    ".json": json_file_chunks,
    ".json.gz": json_file_chunks,
    ".jsonl": json_lines_file_chunks,
    ".jsonl.gz": json_lines_file_chunks,
    ".ndjson": json_lines_file_chunks,
    ".ndjson.gz": json_lines_file_chunks,
    ".parquet": parquet_file_chunks,
    ".pq": parquet_file_chunks,
    ".csv": csv_file_chunks,
    ".csv.gz": csv_file_chunks,
    ".tsv": tsv_file_chunks,
    ".tsv.gz": tsv_file_chunks,
}

# What mysqldump --tab writes: TABLE.sql (the CREATE TABLE) and TABLE.txt (the rows, no header row).
MYSQLDUMP_TAB_SUFFIXES = (".txt", ".txt.gz", ".sql", ".sql.gz")
MYSQLDUMP_TAB_HOW_TO = (
    "unknown format; if it is what mysqldump --tab writes (TABLE.sql and TABLE.txt, rows without a header row "
    "naming their columns), export the events with their header instead, e.g. mysql --batch -e "
    "'SELECT * FROM tx_nrllm_agentrun_event' typo3 > events.tsv (see docs/guide.md, Exporting the events table)"
)

FORMATS_SAID = (
    ".json, .jsonl, .ndjson, .csv, .tsv (each optionally .gz), .parquet, a folder of Parquet files, or - for stdin"
)


@dataclass(frozen=True)
class Input:
    """One input as the user named it, and how it is read."""

    name: str
    path: Path | None
    reader: Reader | None
    opener: Callable[[], Iterator[Chunk]] | None = None  # an input that is not a file: a database
    database: DatabaseSession | None = None  # the database's session, which its other tables are read in too

    def chunks(self, stdin: BinaryIO | None = None) -> Iterator[Chunk]:
        """The input's rows in batches, as its reader makes them."""
        if self.opener is not None:
            return self.opener()
        if self.path is None:
            if stdin is None:
                raise InputError(self.name, "standard input is not available")
            return json_lines_chunks(stdin, self.name)
        assert self.reader is not None
        return self.reader(self.path, self.name)

    def rows(self, stdin: BinaryIO | None = None) -> Iterator[RawRow]:
        """The input's rows one at a time: ``(row_number, raw value)``."""
        return rows_of(self.chunks(stdin))


def reader_for(path: Path) -> Reader | None:
    """The reader for a file by its suffix (case-insensitive), or None when it is unknown."""
    name = path.name.lower()
    for suffix in sorted(READERS_BY_SUFFIX, key=len, reverse=True):
        if name.endswith(suffix):
            return READERS_BY_SUFFIX[suffix]
    return None


def resolve_input(name: str) -> Input:
    """Check that an input exists and has a known format, before any row is read."""
    if name == STDIN:
        return Input(name, None, None)
    if is_database_url(name):
        session = DatabaseSession(parse_database_url(name))
        return Input(session.name_of(EVENTS_TABLE), None, None, lambda: session.chunks(EVENTS_TABLE), session)
    path = Path(name)
    if not path.exists():
        raise InputError(name, "no such file or folder")
    if path.is_dir():
        return Input(name, path, parquet_dataset_chunks)
    reader = reader_for(path)
    if reader is None and path.name.lower().endswith(MYSQLDUMP_TAB_SUFFIXES):
        raise InputError(name, MYSQLDUMP_TAB_HOW_TO)
    if reader is None:
        raise InputError(name, f"unknown format; expected {FORMATS_SAID}")
    if not os.access(path, os.R_OK):
        raise InputError(name, "cannot be read: permission denied")
    return Input(name, path, reader)


def resolve_inputs(names: list[str]) -> list[Input]:
    """All inputs checked up front, so a typo in the last one fails before any work."""
    if names.count(STDIN) > 1:
        raise InputError(STDIN, "standard input can be read only once")
    return [resolve_input(name) for name in names]
