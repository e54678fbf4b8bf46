"""Checked steps spilled to disk by run, so that a build holds one partition of them at a time.

Each input's kept steps go to an Arrow IPC file as they are checked, every record
batch holding a checked chunk's rows in the order of their *bucket* (a hash of the run
id, the same in every build), the rows each bucket has in each batch listed beside it.
For a file input that file becomes its entry in the input cache, so the next build
neither reads nor checks an unchanged input again.

A *partition* is a range of buckets with about ``PARTITION_ROWS`` rows. All rows of
a run fall into one partition, so duplicates, warnings, run summaries and run pages
each need only their partition; the server figures add up over partitions. Memory
then grows with the partition and the per-run summaries, not with the export.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..check.checked import CheckedRows, check_input, kept_steps
from ..check.normalize import known_server_order
from ..core.model import Problem
from ..core.schema import CHECKED_SCHEMA
from ..output.arrow_files import ArrowBatchFile, write_arrow_table
from ..readers import Input
from .cache import InputCache
from .records import problem_of, problem_record
from .runs import RunSpan, run_data_keys, run_spans

BUCKETS = 256
PARTITION_ROWS = 262_144
INPUT_INDEX = CHECKED_SCHEMA.get_field_index("input_index")


def bucket_of(run: str) -> int:
    """A run's bucket, from a CRC-32 of its id: stable across builds and machines."""
    return zlib.crc32(run.encode("utf-8", "surrogatepass")) % BUCKETS


def buckets_of(runs: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each row's bucket (``bucket_of`` its run)."""
    distinct = pc.unique(runs)
    hashes = [bucket_of(run) for run in distinct.to_pylist()]
    return pc.take(pa.array(hashes, pa.int32()), pc.index_in(runs, value_set=distinct))


class BucketedFile:
    """An IPC file of checked steps, each record batch's rows in ascending bucket order.

    ``buckets``, ``rows`` and ``batches`` list, in the file's order, each run of one bucket's
    rows: its bucket, its rows and the record batch it lies in. One record batch per checked
    chunk, not one per bucket in it: the IPC writer's cost is per batch, and a bucket's few
    hundred rows a batch made writing the spill a second of the main process at 50,000 runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = ArrowBatchFile(path, CHECKED_SCHEMA)
        self.buckets: list[int] = []
        self.rows: list[int] = []
        self.batches: list[int] = []
        self._written = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        buckets = buckets_of(batch.column("run"))
        order = pc.sort_indices(buckets)
        self.add_in_bucket_order(batch.take(order), buckets.take(order))

    def add_in_bucket_order(self, batch: pa.RecordBatch, buckets: pa.Array) -> None:
        """Rows already in ascending bucket order, with each row's bucket."""
        if batch.num_rows == 0:
            return
        counts = pc.value_counts(buckets)  # in order of appearance: ascending
        self.file.write(batch)
        self.buckets += counts.field("values").to_pylist()
        self.rows += counts.field("counts").to_pylist()
        self.batches += [self._written] * len(counts)
        self._written += 1

    def layout(self) -> dict[str, list[int]]:
        """Where each bucket's rows lie, as the input cache keeps it beside the file."""
        return {"buckets": self.buckets, "rows": self.rows, "batches": self.batches}

    def close(self) -> None:
        self.file.close()


@dataclass(frozen=True)
class SpilledInput:
    """One input's checked steps on disk: which bucket and how many rows each record batch has."""

    path: Path
    input_index: int
    buckets: list[int]
    rows: list[int]
    batches: list[int] | None  # the record batch of each bucket's rows; None: one batch each (older entries)
    cache_key: str | None = None  # set when the file is the input cache's entry

    @classmethod
    def of(cls, path: Path, input_index: int, *, about: dict[str, Any], cache_key: str | None = None
           ) -> SpilledInput:
        """The input spilled at ``path``, its layout as ``BucketedFile.layout`` (or an older cache entry) gives it."""
        batches = about.get("batches")
        return cls(path, input_index, list(about["buckets"]), list(about["rows"]),
                   None if batches is None else list(batches), cache_key)

    def bucket_rows(self) -> list[int]:
        counts = [0] * BUCKETS
        for bucket, rows in zip(self.buckets, self.rows):
            counts[bucket] += rows
        return counts

    def newest_crdate(self) -> int | None:
        """The latest ``crdate`` of this input's steps, read a column at a time."""
        reader = pa.ipc.open_file(pa.memory_map(str(self.path)))
        newest = [pc.max(reader.get_batch(position).column("crdate")).as_py()
                  for position in range(reader.num_record_batches)]
        dated = [value for value in newest if value is not None]
        return max(dated) if dated else None

    def runs(self) -> pa.Array:
        """The distinct runs of this input, read a record batch at a time."""
        reader = pa.ipc.open_file(pa.memory_map(str(self.path)))
        distinct = [pc.unique(reader.get_batch(position).column("run"))
                    for position in range(reader.num_record_batches)]
        return pc.unique(pa.concat_arrays(distinct)) if distinct else pa.array([], pa.string())

    def steps(self, first: int, stop: int) -> pa.Table | None:
        """This input's rows of buckets ``first`` to ``stop``, read through a memory map.

        The map lives as long as the table does: the pages go when the partition does.
        """
        slices = self._slices(first, stop)
        if not slices:
            return None
        reader = pa.ipc.open_file(pa.memory_map(str(self.path)))
        table = pa.Table.from_batches([reader.get_batch(position).slice(start, length)
                                       for position, start, length in slices], schema=CHECKED_SCHEMA)
        # Cached rows carry the position their input had in the build that checked them.
        index = pa.repeat(pa.scalar(self.input_index, pa.int32()), table.num_rows)
        return table.set_column(INPUT_INDEX, CHECKED_SCHEMA.field(INPUT_INDEX), index)

    def _slices(self, first: int, stop: int) -> list[tuple[int, int, int]]:
        """Record batch, first row and rows of each stretch of buckets ``first`` to ``stop``, in file order."""
        batches = self.batches if self.batches is not None else range(len(self.buckets))
        slices: list[tuple[int, int, int]] = []
        start, previous = 0, -1
        for bucket, rows, batch in zip(self.buckets, self.rows, batches, strict=True):
            if batch != previous:
                start, previous = 0, batch
            if first <= bucket < stop:
                if slices and slices[-1][0] == batch:  # a batch's buckets ascend: the range's are consecutive
                    slices[-1] = (batch, slices[-1][1], slices[-1][2] + rows)
                else:
                    slices.append((batch, start, rows))
            start += rows
        return slices


@dataclass
class Spill:
    """Every input checked and on disk, with its row-by-row errors; duplicates and
    warnings are found partition by partition (``sweep``)."""

    inputs: list[SpilledInput]
    names: list[str]
    tally: CheckedRows

    def partition_ranges(self) -> list[tuple[int, int]]:
        """The partitions of all inputs swept together."""
        return partition_ranges([sum(rows) for rows in zip(*(spilled.bucket_rows() for spilled in self.inputs))])

    def runs_shared_by_inputs(self) -> bool:
        """Whether a run has rows in more than one input: then its rows are swept together."""
        if len(self.inputs) < 2:
            return False
        counts = pc.value_counts(pa.concat_arrays([spilled.runs() for spilled in self.inputs]))
        return bool(pc.any(pc.greater(counts.field("counts"), 1)).as_py())


def partition_ranges(bucket_rows: list[int]) -> list[tuple[int, int]]:
    """Consecutive bucket ranges of about ``PARTITION_ROWS`` rows each (at least one range)."""
    ranges: list[tuple[int, int]] = []
    first, rows = 0, 0
    for bucket, count in enumerate(bucket_rows):
        rows += count
        if rows >= PARTITION_ROWS:
            ranges.append((first, bucket + 1))
            first, rows = bucket + 1, 0
    if rows or not ranges:
        ranges.append((first, BUCKETS))
    else:  # empty buckets at the end join the last range
        ranges[-1] = (ranges[-1][0], BUCKETS)
    return ranges


@dataclass(frozen=True)
class MergeRule:
    """How the archive joins the inputs: which input it is, and the oldest last step a run may have."""

    archive_index: int | None = None
    keep_since: int | None = None  # crdate; a run whose last step is older is dropped

    def identity(self) -> list[int | None]:
        return [self.archive_index, self.keep_since]


@dataclass(frozen=True)
class ArchivedSpan:
    """What of the site came from the archive alone: rows, runs, and their first and last step."""

    rows: int = 0
    runs: int = 0
    first: int | None = None
    last: int | None = None

    def plus(self, other: ArchivedSpan) -> ArchivedSpan:
        firsts = [value for value in (self.first, other.first) if value is not None]
        lasts = [value for value in (self.last, other.last) if value is not None]
        return ArchivedSpan(self.rows + other.rows, self.runs + other.runs,
                            min(firsts) if firsts else None, max(lasts) if lasts else None)

    def record(self) -> list[int | None]:
        return [self.rows, self.runs, self.first, self.last]


@dataclass(frozen=True)
class KeptPartition:
    """A partition's kept steps on disk: whole runs sorted by run and sequence, its bucket
    range, where each run lies in the file and the data key of each run (in the file's order).
    Swept for the figures alone (``gate``, ``diff``), it has no file and no keys: only pages
    and the archive need them."""

    path: Path | None
    buckets: tuple[int, int]
    spans: list[RunSpan]
    keys: list[str]

    def file(self) -> Path:
        """The file of a partition swept for pages."""
        assert self.path is not None, "swept for the figures alone: it has no file"
        return self.path

    def record(self) -> dict[str, Any]:
        """As JSON, for the input cache; ``kept_partition_of`` reads it back."""
        return {"buckets": list(self.buckets), "keys": self.keys, "runs": [span.run for span in self.spans],
                "starts": [span.start for span in self.spans] + ([self.spans[-1].stop] if self.spans else [])}


def kept_partition_of(path: Path, record: dict[str, Any]) -> KeptPartition:
    """A partition as ``KeptPartition.record`` wrote it, its file at ``path``."""
    first, stop = record["buckets"]
    starts = [int(start) for start in record["starts"]]
    spans = [RunSpan(str(run), start, stop_) for run, start, stop_ in zip(record["runs"], starts, starts[1:])]
    return KeptPartition(path, (int(first), int(stop)), spans, [str(key) for key in record["keys"]])


def keep_partition(steps: pa.Table, path: Path | None, *, buckets: tuple[int, int]) -> KeptPartition:
    """A partition's kept steps written to ``path`` with each run's span and data key;
    with no path, only the bucket range (the figures alone need nothing else)."""
    if path is None:
        return KeptPartition(None, buckets, [], [])
    write_arrow_table(path, steps)
    spans = run_spans(steps)
    return KeptPartition(path, buckets, spans, run_data_keys(steps, spans))


def merged_steps(tables: list[tuple[int, pa.Table]], merge: MergeRule) -> pa.Table:
    """One range's steps of every input: a run in any input takes its rows from the inputs
    only (the archive's rows of it go), and with ``keep_since`` old runs go."""
    from_inputs = [table for index, table in tables if index != merge.archive_index]
    archived = [table for index, table in tables if index == merge.archive_index]
    if from_inputs and archived:
        runs = pc.unique(pa.chunked_array([table.column("run") for table in from_inputs]))
        archive = archived[0]
        archived = [archive.filter(pc.invert(pc.is_in(archive.column("run"), value_set=runs)))]
    steps = pa.concat_tables(from_inputs + archived)
    if merge.keep_since is None or steps.num_rows == 0:
        return steps
    last_steps = steps.group_by("run").aggregate([("crdate", "max")])
    old = last_steps.filter(pc.less(last_steps.column("crdate_max"), merge.keep_since)).column("run")
    return steps.filter(pc.invert(pc.is_in(steps.column("run"), value_set=old))) if len(old) else steps


def archived_in(steps: pa.Table, archive_index: int | None) -> ArchivedSpan:
    if archive_index is None:
        return ArchivedSpan()
    archived = steps.filter(pc.equal(steps.column("input_index"), archive_index))
    if archived.num_rows == 0:
        return ArchivedSpan()
    crdate = archived.column("crdate")
    return ArchivedSpan(archived.num_rows, pc.count_distinct(archived.column("run")).as_py(),
                        pc.min(crdate).as_py(), pc.max(crdate).as_py())


def _about(problems: list[Any], rows_read: int, *, spilled: BucketedFile) -> dict[str, Any]:
    return {"rows_read": rows_read, "problems": [problem_record(problem) for problem in problems],
            **spilled.layout()}


def spill_inputs(
    inputs: Sequence[Input], known_servers: Iterable[str], *, work: Path, cache: InputCache | None,
    timings: dict[str, float], archive_index: int | None = None,
) -> Spill:
    """Check every input into a bucketed file in ``work``, or take it from ``cache`` unchanged."""
    known = known_server_order(list(known_servers))
    spill = Spill([], [source.name for source in inputs], CheckedRows())
    for input_index, source in enumerate(inputs):
        key = cache.key(source.path) if cache is not None and source.path is not None else None
        entry = cache.load(key) if cache is not None and key is not None else None
        if entry is not None:
            path, about = entry
            problems = [problem_of(record, source.name) for record in about["problems"]]
            rows_read, rows_fast = int(about["rows_read"]), 0  # not checked in this build
        else:
            path = work / f"input-{input_index}.arrow"
            bucketed = BucketedFile(path)
            try:
                checked = check_input(source, input_index, known=known, timings=timings, sink=bucketed.add)
            finally:
                bucketed.close()
            problems, rows_read, rows_fast = checked.problems, checked.rows_read, checked.rows_fast
            about = _about(problems, rows_read, spilled=bucketed)
            if cache is not None and key is not None:
                path = cache.store(key, path, about=about)
        cached = cache is not None and key is not None and path.parent == cache.folder
        spilled = SpilledInput.of(path, input_index, about=about, cache_key=key if cached else None)
        spill.inputs.append(spilled)
        # The archive's kept rows count in the sweep, as far as the merge keeps them; not as rows read.
        archived = input_index == archive_index
        spill.tally.add_input(problems, rows_read=len(problems) if archived else rows_read,
                              rows_fast=0 if archived else rows_fast)
    return spill


def checked_partitions(spill: Spill) -> Iterator[pa.Table]:
    """Each partition's kept steps in bucket order: whole runs, sorted by run and sequence.

    The partition's duplicates and warnings go into ``spill.tally`` as it is swept; once
    the last partition is out, the tally is complete and in reading order. A caller holds
    one partition at a time: this is the bounded path of every command but ``build``,
    whose ``sweep`` does the same in forked workers and keeps what it made.
    """
    for first, stop in spill.partition_ranges():
        tables = [table for spilled in spill.inputs if (table := spilled.steps(first, stop)) is not None]
        if not tables:
            continue
        steps, problems = kept_steps(pa.concat_tables(tables), spill.names)
        del tables
        spill.tally.add_checked(problems)
        yield steps
    spill.tally.settle(spill.names)


def cached_run_steps(cache: InputCache, key: str, *, input_index: int, name: str, run: str
                     ) -> tuple[pa.Table, list[Problem]] | None:
    """The run's checked steps (duplicates not yet found) and the file's row errors, from the
    input cache's entry ``key`` (``InputCache.key``); None when it has none. Only the run's
    bucket is read."""
    entry = cache.load(key)
    if entry is None:
        return None
    path, about = entry
    spilled = SpilledInput.of(path, input_index, about=about)
    bucket = bucket_of(run)
    steps = spilled.steps(bucket, bucket + 1)
    if steps is None:
        steps = CHECKED_SCHEMA.empty_table()
    return steps.filter(pc.equal(steps.column("run"), run)), [problem_of(record, name) for record in about["problems"]]
