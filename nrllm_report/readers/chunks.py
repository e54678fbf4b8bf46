"""What readers yield: a batch of raw rows as an Arrow table, or raw rows one by one.

An ``ArrowChunk`` goes to the columnar fast path first; any row that path does
not vouch for, and every row the reader marks ``unread`` (one Arrow cannot hold
as the row reader would see it), is fetched again as a raw value (``raw_row``)
for the row checker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa


@dataclass
class ArrowChunk:
    table: pa.Table
    first_row: int  # the first row's number; without ``row_numbers``, rows follow without gaps
    raw_row: Callable[[int], Any]  # position in the table -> the raw value, as a row reader yields it
    row_numbers: pa.Array | None = None  # each row's number, where there are gaps (blank lines)
    unread: pa.Array | None = None  # True where the row must be checked row by row; it may stand as {} here

    def numbers(self) -> pa.Array:
        """Each row's number in its input (int64)."""
        if self.row_numbers is not None:
            return self.row_numbers
        return pa.array(range(self.first_row, self.first_row + self.table.num_rows), pa.int64())

    def last_row(self) -> int:
        """The number of the chunk's last row (``first_row - 1`` when it has none)."""
        if self.row_numbers is not None and len(self.row_numbers):
            return int(self.row_numbers[-1].as_py())
        return self.first_row + self.table.num_rows - 1

    @property
    def rows(self) -> list[tuple[int, Any]]:
        numbers = self.numbers().to_pylist()
        return [(numbers[position], self.raw_row(position)) for position in range(self.table.num_rows)]


@dataclass
class RowChunk:
    rows: list[tuple[int, Any]]


Chunk = ArrowChunk | RowChunk


def rows_of(chunks: Iterable[Chunk]) -> Iterator[tuple[int, Any]]:
    """The row-by-row view of a chunked reader."""
    for chunk in chunks:
        yield from chunk.rows
