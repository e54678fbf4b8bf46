"""Kept steps back in reading order, in bounded memory: a merge of sorted partition files.

A partition holds whole runs, so reading order is lost there. Each partition's kept
steps are written sorted by ``(input_index, row)``; since every row lies in exactly
one partition, merging the files gives every kept step once, in reading order, while
holding only a batch of each file at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..output.arrow_files import write_arrow_table

READING_ORDER = [("input_index", "ascending"), ("row", "ascending")]
# What the merge holds at once, summed over the files it reads: about a partition's worth.
MERGE_ROWS = 262_144
MIN_BATCH_ROWS = 1_024
ROW_BITS = 40  # a row number below 2**40 in each input: (input_index, row) as one int64


def write_in_reading_order(steps: pa.Table, path: Path, *, batch_rows: int) -> None:
    """A partition's kept steps, sorted by ``(input_index, row)``, as record batches of ``batch_rows``."""
    ordered = steps.sort_by(READING_ORDER)
    write_arrow_table(path, pa.Table.from_batches(ordered.to_batches(max_chunksize=batch_rows), ordered.schema))


def merge_batch_rows(partitions: int) -> int:
    """Rows a batch of each sorted file may hold, so that the merge holds about ``MERGE_ROWS``."""
    return max(MIN_BATCH_ROWS, MERGE_ROWS // max(1, partitions))


def reading_order_keys(table: pa.Table | pa.RecordBatch) -> pa.Array:
    """``(input_index, row)`` of each row as one increasing int64."""
    index = pc.cast(table.column("input_index"), pa.int64())
    return pc.add(pc.shift_left(index, ROW_BITS), table.column("row"))


@dataclass
class _SortedFile:
    """A file sorted by reading order, read a record batch at a time."""

    reader: pa.ipc.RecordBatchFileReader
    next_batch: int
    rows: pa.Table | None = None
    keys: pa.Array | None = None

    @classmethod
    def open(cls, path: Path) -> _SortedFile:
        # Read, not mapped: a map would keep every page read so far in the resident set.
        opened = cls(pa.ipc.open_file(pa.OSFile(str(path))), 0)
        opened.load()
        return opened

    def load(self) -> None:
        """The next non-empty batch, or none when the file is done."""
        self.rows = self.keys = None
        while self.next_batch < self.reader.num_record_batches and self.rows is None:
            batch = self.reader.get_batch(self.next_batch)
            self.next_batch += 1
            if batch.num_rows:
                self.rows = pa.Table.from_batches([batch])
                self.keys = reading_order_keys(batch)

    def last_key(self) -> int:
        assert self.keys is not None
        return int(self.keys[-1].as_py())

    def take_through(self, bound: int) -> pa.Table:
        """The rows up to and including key ``bound``, and on to the next batch when none are left."""
        assert self.rows is not None and self.keys is not None
        count = int(pc.sum(pc.less_equal(self.keys, bound)).as_py() or 0)
        taken = self.rows.slice(0, count)
        if count == self.rows.num_rows:
            self.load()
        else:
            self.rows, self.keys = self.rows.slice(count), self.keys.slice(count)
        return taken


def merged_in_reading_order(paths: list[Path], schema: pa.Schema) -> Iterator[pa.Table]:
    """The rows of files each sorted by ``(input_index, row)``, in that order, a stretch at a time.

    Each round takes, from every file, the rows up to the smallest last key of the
    batches at hand: no row still unread can come before them.
    """
    files = [opened for opened in map(_SortedFile.open, paths) if opened.rows is not None]
    while files:
        bound = min(opened.last_key() for opened in files)
        stretch = pa.concat_tables([opened.take_through(bound) for opened in files])
        files = [opened for opened in files if opened.rows is not None]
        yield stretch.sort_by(READING_ORDER).select(schema.names)
