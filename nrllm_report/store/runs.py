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

from ..core.lists import combined
from ..core.pickled import pickled_as_fields
from ..core.schema import PAGE_COLUMNS


@pickled_as_fields
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

    Every column is laid out by Arrow as arrays of fixed width (each number's eight bytes
    with nulls as zero, one more number whose bits say which values are null, each
    text's, list's and list item's length) and the texts' and items' bytes back to back.
    A run's rows are one stretch of each, so its key hashes the run's row count and
    those stretches, in column order: slices of memory, no text made per value. The
    lengths say where each text ends, so rows that differ in any value differ in the
    bytes hashed, and the key of a run is the same wherever its rows stand.
    """
    if not spans:
        return []
    starts = pa.array([span.start for span in spans] + [spans[-1].stop], pa.int64())
    stretches = [stretch for piece in _pieces(steps) for stretch in piece.stretches(starts)]
    # A run's stretches joined and hashed at once: one update a run, not one a run and stretch.
    return [hashlib.sha256((span.stop - span.start).to_bytes(8, "little") + b"".join(
                [data[bounds[index]:bounds[index + 1]] for data, bounds in stretches])).hexdigest()
            for index, span in enumerate(spans)]


@dataclass(frozen=True)
class _Fixed:
    """Values of one width, a row each: a run's stretch is its rows times the width."""

    values: pa.Array

    def stretches(self, starts: pa.Array) -> list[tuple[memoryview, list[int]]]:
        width = self.values.type.bit_width // 8
        return [(_values_buffer(self.values, width), pc.multiply(starts, width).to_pylist())]


@dataclass(frozen=True)
class _Texts:
    """Texts (``items`` of lists, when ``lists`` is given): their lengths and their bytes.
    A run's items are those of its rows' lists, found through the lists' offsets."""

    texts: pa.Array
    lists: pa.Array | None = None

    def stretches(self, starts: pa.Array) -> list[tuple[memoryview, list[int]]]:
        if self.lists is not None:
            starts = pc.take(_offsets(self.lists, pa.int32()), starts)
        lengths = _Fixed(pc.binary_length(self.texts)).stretches(starts)
        offsets = _offsets(self.texts, pa.int32())
        data = self.texts.buffers()[2]
        return lengths + [(memoryview(data) if data is not None else memoryview(b""),
                           pc.take(offsets, starts).to_pylist())]


def _pieces(steps: pa.Table) -> list[_Fixed | _Texts]:
    """Every column as the pieces ``run_data_keys`` hashes, and which values are null (a
    page column the steps lack, such as a denial outside a sweep, is not hashed)."""
    pieces: list[_Fixed | _Texts] = []
    nulls = None
    for position, name in enumerate(PAGE_COLUMNS):
        if name not in steps.column_names:
            continue
        column = combined(steps.column(name))
        null_bit = pc.multiply(pc.cast(pc.is_null(column), pa.int64()), 1 << position)
        nulls = null_bit if nulls is None else pc.add(nulls, null_bit)
        if pa.types.is_list(column.type):
            pieces.append(_Fixed(pc.fill_null(pc.list_value_length(column), 0)))
            pieces.append(_Texts(combined(pc.fill_null(column.values, "")), column))
        elif pa.types.is_string(column.type):
            pieces.append(_Texts(combined(pc.fill_null(column, ""))))
        elif pa.types.is_boolean(column.type):
            pieces.append(_Fixed(combined(pc.cast(pc.fill_null(column, False), pa.int8()))))
        else:
            pieces.append(_Fixed(combined(pc.fill_null(column, 0))))
    return [*pieces, _Fixed(combined(nulls))]


def _values_buffer(values: pa.Array, width: int) -> memoryview:
    """The bytes of a fixed-width array's values, from its first on."""
    return memoryview(values.buffers()[1])[values.offset * width:]


def _offsets(values: pa.Array, type_: pa.DataType) -> pa.Array:
    """A list's or text array's offsets, from its first value on."""
    return pa.Array.from_buffers(type_, len(values) + 1, [None, values.buffers()[1]], offset=values.offset)


def read_steps(path: Path) -> pa.Table:
    """A partition's kept steps through a memory map, unmapped when the table goes."""
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()
