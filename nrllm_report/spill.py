"""Checked steps spilled to disk by run, so that a build holds one partition of them at a time.

Each input's kept steps go to an Arrow IPC file as they are checked, every record
batch holding the rows of one *bucket* (a hash of the run id, the same in every
build). For a file input that file becomes its entry in the input cache, so the
next build neither reads nor checks an unchanged input again.

A *partition* is a range of buckets with about ``PARTITION_ROWS`` rows. All rows of
a run fall into one partition, so duplicates, warnings, run summaries and run pages
each need only their partition; the server figures add up over partitions. Memory
then grows with the partition and the per-run summaries, not with the export.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from . import columnar
from .aggregate import SiteFigures
from .checked import CheckedRows, check_input, kept_steps, problem_of, problem_record
from .model import Problem
from .normalize import known_server_order
from .readers import Input
from .writer import InputCache

BUCKETS = 256
PARTITION_ROWS = 262_144
INPUT_INDEX = columnar.CHECKED_SCHEMA.get_field_index("input_index")


def buckets_of(runs: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each row's bucket, from a CRC-32 of its run id: stable across builds and machines."""
    distinct = pc.unique(runs)
    hashes = [zlib.crc32(run.encode("utf-8", "surrogatepass")) % BUCKETS for run in distinct.to_pylist()]
    return pc.take(pa.array(hashes, pa.int32()), pc.index_in(runs, value_set=distinct))


class BucketedFile:
    """An IPC file of checked steps in which every record batch holds one bucket's rows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stream = pa.OSFile(str(path), "wb")
        self.writer = pa.ipc.new_file(self.stream, columnar.CHECKED_SCHEMA)
        self.buckets: list[int] = []
        self.rows: list[int] = []

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        buckets = buckets_of(batch.column("run"))
        order = pc.sort_indices(buckets)
        batch, buckets = batch.take(order), buckets.take(order)
        start = 0
        for entry in pc.value_counts(buckets).to_pylist():  # in order of appearance: ascending
            self.writer.write_batch(batch.slice(start, entry["counts"]))
            self.buckets.append(entry["values"])
            self.rows.append(entry["counts"])
            start += entry["counts"]

    def close(self) -> None:
        self.writer.close()
        self.stream.close()


@dataclass(frozen=True)
class SpilledInput:
    """One input's checked steps on disk: which bucket and how many rows each record batch has."""

    path: Path
    input_index: int
    buckets: list[int]
    rows: list[int]

    def steps(self, first: int, stop: int) -> pa.Table | None:
        """This input's rows of buckets ``first`` to ``stop``, read through a memory map.

        The map lives as long as the table does: the pages go when the partition does.
        """
        positions = [position for position, bucket in enumerate(self.buckets) if first <= bucket < stop]
        if not positions:
            return None
        reader = pa.ipc.open_file(pa.memory_map(str(self.path)))
        table = pa.Table.from_batches([reader.get_batch(position) for position in positions],
                                      schema=columnar.CHECKED_SCHEMA)
        # Cached rows carry the position their input had in the build that checked them.
        index = pa.repeat(pa.scalar(self.input_index, pa.int32()), table.num_rows)
        return table.set_column(INPUT_INDEX, columnar.CHECKED_SCHEMA.field(INPUT_INDEX), index)


@dataclass
class Spill:
    """Every input checked and on disk, with its row-by-row errors; duplicates and
    warnings are found partition by partition (``partitions``)."""

    inputs: list[SpilledInput]
    names: list[str]
    tally: CheckedRows
    bucket_rows: list[int] = field(default_factory=lambda: [0] * BUCKETS)

    def partition_ranges(self) -> list[tuple[int, int]]:
        """Consecutive bucket ranges of about ``PARTITION_ROWS`` rows each (at least one range)."""
        ranges: list[tuple[int, int]] = []
        first, rows = 0, 0
        for bucket, count in enumerate(self.bucket_rows):
            rows += count
            if rows >= PARTITION_ROWS:
                ranges.append((first, bucket + 1))
                first, rows = bucket + 1, 0
        if rows or not ranges:
            ranges.append((first, BUCKETS))
        else:  # empty buckets at the end join the last range
            ranges[-1] = (ranges[-1][0], BUCKETS)
        return ranges

    def kept_steps(self, first: int, stop: int) -> tuple[pa.Table, list[Problem]] | None:
        """The kept steps of buckets ``first`` to ``stop``, sorted by run and sequence, with
        their duplicates and warnings; None if no input has rows there."""
        tables = [table for spilled in self.inputs if (table := spilled.steps(first, stop)) is not None]
        if not tables:
            return None
        return kept_steps(pa.concat_tables(tables), self.names)


def sweep(spill: Spill, timezone_name: str, work: Path) -> tuple[SiteFigures, list[Path]]:
    """The first pass over the partitions: duplicates and warnings into the tally, the
    figures added up, and each partition's kept steps written to ``work`` for the second.

    One process: forked workers were measured no faster here (Arrow's sort already
    uses both cores, and the figures would have to be pickled back).
    """
    figures = SiteFigures(timezone_name)
    kept: list[Path] = []
    for first, stop in spill.partition_ranges():
        checked = spill.kept_steps(first, stop)
        if checked is None:
            continue
        steps, problems = checked
        path = work / f"kept-{first:03d}-{stop:03d}.arrow"
        with pa.OSFile(str(path), "wb") as stream, pa.ipc.new_file(stream, steps.schema) as ipc:
            ipc.write_table(steps)
        spill.tally.add_checked(problems)
        figures.absorb(SiteFigures.of(steps, timezone_name))
        kept.append(path)
        del steps, checked
    return figures, kept


def read_kept(path: Path) -> pa.Table:
    """A partition's kept steps through a memory map, unmapped when the table goes."""
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()


def _about(problems: list[Any], rows_read: int, spilled: BucketedFile) -> dict[str, Any]:
    return {"rows_read": rows_read, "problems": [problem_record(problem) for problem in problems],
            "buckets": spilled.buckets, "rows": spilled.rows}


def spill_inputs(
    inputs: Sequence[Input], known_servers: Iterable[str], stdin: BinaryIO | None, work: Path,
    cache: InputCache | None, timings: dict[str, float],
) -> Spill:
    """Check every input into a bucketed file in ``work``, or take it from ``cache`` unchanged."""
    began = time.perf_counter()
    read_before = timings.get("read", 0.0)
    known = known_server_order(list(known_servers))
    spill = Spill([], [source.name for source in inputs], CheckedRows())
    for input_index, source in enumerate(inputs):
        key = cache.key(source.path) if cache is not None and source.path is not None else None
        entry = cache.load(key) if cache is not None and key is not None else None
        if entry is not None:
            path, about = entry
            problems = [problem_of(record, source.name) for record in about["problems"]]
            rows_read = int(about["rows_read"])
        else:
            path = work / f"input-{input_index}.arrow"
            bucketed = BucketedFile(path)
            try:
                problems, rows_read = check_input(source, input_index, known, stdin, timings, bucketed.add)
            finally:
                bucketed.close()
            about = _about(problems, rows_read, bucketed)
            if cache is not None and key is not None:
                path = cache.store(key, path, about)
        spilled = SpilledInput(path, input_index, list(about["buckets"]), list(about["rows"]))
        spill.inputs.append(spilled)
        for bucket, rows in zip(spilled.buckets, spilled.rows):
            spill.bucket_rows[bucket] += rows
        spill.tally.add_input(problems, rows_read)
    timings["check"] = time.perf_counter() - began - (timings.get("read", 0.0) - read_before)
    return spill
