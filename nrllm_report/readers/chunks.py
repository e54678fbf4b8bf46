"""What readers yield: a batch of raw rows as an Arrow table, or raw rows one by one.

An ``ArrowChunk`` goes to the columnar fast path first; any row that path does
not vouch for is fetched again as a raw value (``raw_row``) for the row checker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Union

import pyarrow as pa


@dataclass
class ArrowChunk:
    table: pa.Table
    first_row: int  # rows are numbered first_row, first_row + 1, ... without gaps
    raw_row: Callable[[int], Any]  # position in the table -> the raw value, as a row reader yields it

    @property
    def rows(self) -> list[tuple[int, Any]]:
        return [(self.first_row + position, self.raw_row(position)) for position in range(self.table.num_rows)]


@dataclass
class RowChunk:
    rows: list[tuple[int, Any]]


Chunk = Union[ArrowChunk, RowChunk]


def rows_of(chunks: Iterable[Chunk]) -> Iterator[tuple[int, Any]]:
    """The row-by-row view of a chunked reader."""
    for chunk in chunks:
        yield from chunk.rows
