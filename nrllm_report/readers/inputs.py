"""An input as a value, and what a reader of one shape of input is.

An ``Input`` is one input as the user named it: a file or folder (``path``), standard
input (named ``-``), or a database; it knows the ``Reader`` that reads it, and how to open
its bytes (``opened``: a file unpacked where its name ends in ``.gz``, or standard input),
so that nothing else needs to carry standard input about.

A ``Reader`` is one shape of input: the names it reads by (``suffixes``, or ``folder``),
a look at the content where a name is not enough (``sniff``), its rows in batches
(``chunks``), its one-run variant (``run_rows``: the rows that may be one run's, read
without reading the whole input where the shape allows), and what the tables besides
the events need of it (``tables``, ``columns``, ``table_input``). The registry
(``registry.READERS``) picks the reader of each input.
"""

from __future__ import annotations

import gzip
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from ..core.errors import InputError
from .chunks import Chunk, RowChunk, rows_of
from .database import DatabaseSession

STDIN = "-"

RawRow = tuple[int, Any]


def open_binary(path: Path, name: str) -> BinaryIO:
    """A file's bytes, unpacked where its name ends in .gz."""
    try:
        if path.name.lower().endswith(".gz"):
            return gzip.open(path, "rb")  # type: ignore[return-value]
        return open(path, "rb")
    except OSError as error:
        raise InputError(name, f"cannot be read: {error.strerror or error}") from None


@dataclass(frozen=True)
class Input:
    """One input as the user named it, and the reader that reads it.

    ``path`` is the file or folder; None for standard input and a database. Standard
    input is the process's own unless ``stream`` says otherwise (a test's bytes).
    """

    name: str
    reader: Reader
    _: KW_ONLY
    path: Path | None = None
    stream: BinaryIO | None = None
    database: DatabaseSession | None = None  # the database's session, which its other tables are read in too

    @property
    def is_standard_input(self) -> bool:
        return self.path is None and self.database is None

    @contextmanager
    def opened(self) -> Iterator[BinaryIO]:
        """The input's bytes: the file's (unpacked where it is gzip), or standard input's (left open)."""
        if self.path is not None:
            with open_binary(self.path, self.name) as stream:
                yield stream
            return
        # click.get_binary_stream is deprecated since Click 8.5; sys.stdin.buffer is what it returned.
        standard = self.stream if self.stream is not None else getattr(sys.stdin, "buffer", None)
        if standard is None:
            raise InputError(self.name, "standard input is not available")
        yield standard

    def chunks(self) -> Iterator[Chunk]:
        """The input's rows in batches, as its reader makes them."""
        return self.reader.chunks(self)

    def rows(self) -> Iterator[RawRow]:
        """The input's rows one at a time: ``(row_number, raw value)``."""
        return rows_of(self.chunks())

    def run_rows(self, run: str) -> Iterator[RowChunk]:
        """The rows that may be ``run``'s or cannot be read (see ``Reader.run_rows``)."""
        return self.reader.run_rows(self, run)


@dataclass(frozen=True)
class TableInput:
    """An input of one of the tables besides the events: the table, the input's name, and its rows."""

    table: str
    name: str
    chunks: Callable[[], Iterator[Chunk]]


class Reader(ABC):
    """One shape of input: which inputs it reads, and how."""

    suffixes: ClassVar[tuple[str, ...]] = ()  # the ends of the file names it reads (compared lowercased)
    folder: ClassVar[bool] = False  # it reads a folder
    header_row: ClassVar[bool] = False  # its columns are named by a header row (said where they fit no table)

    def sniff(self, path: Path, name: str) -> bool:
        """Whether the file, whose name has one of ``suffixes``, is this reader's (by its content)."""
        return True

    @abstractmethod
    def chunks(self, source: Input) -> Iterator[Chunk]:
        """The input's rows in batches: Arrow tables, or raw rows with their row numbers."""

    @abstractmethod
    def run_rows(self, source: Input, run: str) -> Iterator[RowChunk]:
        """Every row that may be ``run``'s and every row that cannot be read (more, never fewer)."""

    def tables(self, source: Input) -> list[str] | None:
        """The tables the input holds where its container says (None: told by its name, else its columns)."""
        return None

    def columns(self, source: Input) -> set[str] | None:
        """The input's column names (a header's, a schema's, or a first record's keys), for telling
        which table it holds; None where there is nothing to tell by."""
        return None

    def table_input(self, source: Input, table: str) -> TableInput:
        """The input's rows of ``table``, one of the tables besides the events."""
        return TableInput(table, source.name, lambda: self.chunks(source))
