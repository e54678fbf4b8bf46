"""Readers for every export shape, chosen from one table keyed by suffix.

Each reader yields ``(row_number, value)``: the 1-based line or record number in
its input and the parsed JSON value (usually a dict), or an ``Unreadable`` for a
line that is not JSON. A file that cannot be read at all raises ``InputError``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from ..errors import InputError
from .json import read_json_file, read_json_lines_stream, read_json_lines_file
from .parquet import read_parquet_dataset, read_parquet_file

RawRow = tuple[int, Any]
Reader = Callable[[Path, str], Iterator[RawRow]]

STDIN = "-"

READERS_BY_SUFFIX: dict[str, Reader] = {
    ".json": read_json_file,
    ".json.gz": read_json_file,
    ".jsonl": read_json_lines_file,
    ".jsonl.gz": read_json_lines_file,
    ".ndjson": read_json_lines_file,
    ".ndjson.gz": read_json_lines_file,
    ".parquet": read_parquet_file,
    ".pq": read_parquet_file,
}

FORMATS_SAID = ".json, .jsonl, .ndjson (each optionally .gz), .parquet, a folder of Parquet files, or - for stdin"


@dataclass(frozen=True)
class Input:
    """One input as the user named it, and how it is read."""

    name: str
    path: Path | None
    reader: Reader | None

    def rows(self, stdin: BinaryIO | None = None) -> Iterator[RawRow]:
        if self.path is None:
            if stdin is None:
                raise InputError(self.name, "standard input is not available")
            return read_json_lines_stream(stdin, self.name)
        assert self.reader is not None
        return self.reader(self.path, self.name)


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
    path = Path(name)
    if not path.exists():
        raise InputError(name, "no such file or folder")
    if path.is_dir():
        return Input(name, path, read_parquet_dataset)
    reader = reader_for(path)
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
