"""Where each run lies in a partition's steps, and a key of each run's rows.

A partition's kept steps are sorted by (run, sequence), so a run is one span of
rows. Its *data key* hashes every column a run page can show, so a page whose
key is unchanged need not be rendered again; the input cache keeps the keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..core.lists import escaped, joined_items
from ..core.schema import TIMELINE_COLUMNS

FIELD_END = "\x1f"  # escaped in every text field (``core.lists.escaped``), as the items' end is


@dataclass(frozen=True, slots=True)
class RunSpan:
    """A run's rows in the table sorted by (run, sequence)."""

    run: str
    start: int
    stop: int


def run_spans(steps: pa.Table) -> list[RunSpan]:
    """Where each run's rows start and stop in the sorted table."""
    if steps.num_rows == 0:
        return []
    run = steps.column("run")
    changes = pc.not_equal(run.slice(1), run.slice(0, steps.num_rows - 1))
    starts = [0] + [position + 1 for position in pc.indices_nonzero(changes).to_pylist()]
    stops = starts[1:] + [steps.num_rows]
    runs = pc.take(run, pa.array(starts)).to_pylist()
    return [RunSpan(name, start, stop) for name, start, stop in zip(runs, starts, stops)]


def run_data_keys(steps: pa.Table, spans: list[RunSpan]) -> list[str]:
    """A hash of each run's rows, every column a page can show.

    Arrow writes every row as its fields, each ended by a separator (text escaped so
    that it cannot contain one, null as an escape of its own), into one buffer, in
    which each run's rows are one stretch: a run's key hashes that stretch.
    """
    if not spans:
        return []
    fields = []
    for name in TIMELINE_COLUMNS:
        column = steps.column(name)
        if pa.types.is_list(column.type):
            column = joined_items(column)
        elif pa.types.is_string(column.type):
            column = escaped(column)
        fields.append(pc.cast(column, pa.large_string()))
    ended = pa.scalar("", pa.large_string())  # a last, empty field: the row ends with a separator too
    separator = pa.scalar(FIELD_END, pa.large_string())
    rows = pc.binary_join_element_wise(*fields, ended, separator, null_handling="replace", null_replacement="\\0")
    rows = rows.combine_chunks() if isinstance(rows, pa.ChunkedArray) else rows
    _validity, offsets_buffer, data_buffer = rows.buffers()
    offsets = pa.Array.from_buffers(pa.int64(), len(rows) + 1, [None, offsets_buffer], offset=rows.offset)
    bounds = pc.take(offsets, pa.array([span.start for span in spans] + [spans[-1].stop])).to_pylist()
    data = memoryview(data_buffer)  # type: ignore[arg-type]
    return [hashlib.sha256(data[begin:end]).hexdigest() for begin, end in zip(bounds, bounds[1:])]


def read_steps(path: Path) -> pa.Table:
    """A partition's kept steps through a memory map, unmapped when the table goes."""
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()
