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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..aggregate.figures import SiteFigures
from ..check.checked import CheckedRows, check_input, kept_steps
from ..check.normalize import known_server_order
from ..core.model import Problem
from ..core.schema import CHECKED_SCHEMA
from ..core.workers import forked_map
from ..output.arrow_files import ArrowBatchFile, write_arrow_table
from ..readers import Input
from .cache import InputCache
from .records import figures_of, figures_record, problem_of, problem_record
from .runs import run_data_keys, run_spans

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
    """An IPC file of checked steps in which every record batch holds one bucket's rows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = ArrowBatchFile(path, CHECKED_SCHEMA)
        self.buckets: list[int] = []
        self.rows: list[int] = []

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        buckets = buckets_of(batch.column("run"))
        order = pc.sort_indices(buckets)
        self.add_in_bucket_order(batch.take(order), buckets.take(order))

    def add_in_bucket_order(self, batch: pa.RecordBatch, buckets: pa.Array) -> None:
        """Rows already in ascending bucket order, with each row's bucket."""
        start = 0
        for entry in pc.value_counts(buckets).to_pylist():  # in order of appearance: ascending
            self.file.write(batch.slice(start, entry["counts"]))
            self.buckets.append(entry["values"])
            self.rows.append(entry["counts"])
            start += entry["counts"]

    def close(self) -> None:
        self.file.close()


@dataclass(frozen=True)
class SpilledInput:
    """One input's checked steps on disk: which bucket and how many rows each record batch has."""

    path: Path
    input_index: int
    buckets: list[int]
    rows: list[int]
    cache_key: str | None = None  # set when the file is the input cache's entry

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
        distinct = [pc.unique(reader.get_batch(position).column("run")) for position in range(reader.num_record_batches)]
        return pc.unique(pa.concat_arrays(distinct)) if distinct else pa.array([], pa.string())

    def steps(self, first: int, stop: int) -> pa.Table | None:
        """This input's rows of buckets ``first`` to ``stop``, read through a memory map.

        The map lives as long as the table does: the pages go when the partition does.
        """
        positions = [position for position, bucket in enumerate(self.buckets) if first <= bucket < stop]
        if not positions:
            return None
        reader = pa.ipc.open_file(pa.memory_map(str(self.path)))
        table = pa.Table.from_batches([reader.get_batch(position) for position in positions],
                                      schema=CHECKED_SCHEMA)
        # Cached rows carry the position their input had in the build that checked them.
        index = pa.repeat(pa.scalar(self.input_index, pa.int32()), table.num_rows)
        return table.set_column(INPUT_INDEX, CHECKED_SCHEMA.field(INPUT_INDEX), index)


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

    def plus(self, other: "ArchivedSpan") -> "ArchivedSpan":
        firsts = [value for value in (self.first, other.first) if value is not None]
        lasts = [value for value in (self.last, other.last) if value is not None]
        return ArchivedSpan(self.rows + other.rows, self.runs + other.runs,
                            min(firsts) if firsts else None, max(lasts) if lasts else None)

    def record(self) -> list[int | None]:
        return [self.rows, self.runs, self.first, self.last]


@dataclass(frozen=True)
class SweptPartition:
    """A partition after the first pass: its kept steps on disk, the data key of each of
    its runs (in the file's order), its duplicates and warnings, its figures, its bucket
    range, and what of it came from the archive. Swept for the figures alone (``gate``,
    ``diff``), it has no file (``path`` None) and no keys: only pages and the archive need them."""

    path: Path | None
    keys: list[str]
    problems: list[Problem]
    figures: SiteFigures
    buckets: tuple[int, int]
    archived: ArchivedSpan


def sweep(
    spill: Spill, timezone_name: str, work: Path, cache: InputCache | None, jobs: int = 1,
    merge: MergeRule = MergeRule(), pages: bool = True,
) -> tuple[SiteFigures, list[SweptPartition]]:
    """The first pass over the partitions: duplicates and warnings into the tally, the
    figures added up, and (``pages``) each partition's kept steps written for the second pass.

    When no run has rows in two inputs, which is how exports grow (a new file holds
    new runs), each input is swept on its own, and an input from the cache brings its
    swept partitions along: a rebuild after a new day's file sweeps only that file.
    """
    figures = SiteFigures(timezone_name)
    swept: list[SweptPartition] = []
    if spill.runs_shared_by_inputs():
        job = SweepJob(spill.inputs, spill.names, timezone_name, work, "kept", None, merge, pages)
        swept = _sweep_ranges(job, spill.partition_ranges(), jobs)
    else:
        for spilled in spill.inputs:
            swept += _sweep_input(spilled, spill.names, timezone_name, work, cache if pages else None, jobs, merge,
                                  pages)
    for partition in swept:
        spill.tally.add_checked(partition.problems)
        spill.tally.rows_read += partition.archived.rows  # the archive's rows count where they are used
        figures.absorb(partition.figures)
    return figures, swept


def partition_file(partition: SweptPartition) -> Path:
    """The file of a partition swept for pages."""
    assert partition.path is not None, "swept for the figures alone: it has no file"
    return partition.path


def archived_span(swept: list[SweptPartition]) -> ArchivedSpan:
    """What of the whole site came from the archive alone."""
    total = ArchivedSpan()
    for partition in swept:
        total = total.plus(partition.archived)
    return total


def _sweep_input(
    spilled: SpilledInput, names: list[str], timezone_name: str, work: Path, cache: InputCache | None, jobs: int,
    merge: MergeRule, pages: bool,
) -> list[SweptPartition]:
    ranges = partition_ranges(spilled.bucket_rows())
    name = names[spilled.input_index]
    if cache is None or spilled.cache_key is None:
        job = SweepJob([spilled], names, timezone_name, work, f"input-{spilled.input_index}.kept", None, merge, pages)
        return _sweep_ranges(job, ranges, jobs)
    record = cache.load_swept(spilled.cache_key)
    identity = {"timezone": timezone_name, "ranges": [list(r) for r in ranges], "merge": merge.identity()}
    if record is not None and all(record.get(field) == value for field, value in identity.items()):
        try:
            return [_swept_of(cache, partition, name) for partition in record["partitions"]]
        except (OSError, KeyError, TypeError, ValueError):
            pass  # a record this version cannot read: sweep again
    cache.drop_swept(spilled.cache_key)  # its files are about to be replaced

    def keep(partition: SweptPartition) -> None:
        about = {
            "keys": partition.keys,
            "problems": [problem_record(problem) for problem in partition.problems],
            "figures": figures_record(partition.figures),
            "buckets": list(partition.buckets),
            "archived": partition.archived.record(),
        }
        try:
            cache.write_json(partition_file(partition).with_suffix(".json").name, about)
        except OSError:
            pass  # without it the record is incomplete, and the next build sweeps this input again

    job = SweepJob([spilled], names, timezone_name, cache.folder, f"{spilled.cache_key}.kept", keep, merge, True)
    swept = _sweep_ranges(job, ranges, jobs)
    files = [partition_file(partition) for partition in swept]
    cache.store_swept(spilled.cache_key, {
        **identity, "partitions": [[file.name, file.with_suffix(".json").name] for file in files],
    })
    return swept


def _swept_of(cache: InputCache, files: list[str], name: str) -> SweptPartition:
    """A partition of a cached input's first pass, as ``keep`` wrote it."""
    steps_file, about_file = files
    about = cache.read_json(about_file)
    first, stop = about["buckets"]
    return SweptPartition(cache.folder / steps_file, list(about["keys"]),
                          [problem_of(problem, name) for problem in about["problems"]],
                          figures_of(about["figures"]), (int(first), int(stop)), ArchivedSpan(*about["archived"]))


@dataclass(frozen=True)
class SweepJob:
    """What sweeping a range of buckets needs; handed to forked workers as it is."""

    inputs: list[SpilledInput]
    names: list[str]
    timezone_name: str
    folder: Path
    stem: str
    keep: Callable[[SweptPartition], None] | None
    merge: MergeRule
    pages: bool  # write the kept steps and make the runs' data keys (only pages and the archive need them)


def _sweep_ranges(job: SweepJob, ranges: list[tuple[int, int]], jobs: int = 1) -> list[SweptPartition]:
    """Sweep ``job.inputs`` together, range by range; ``job.keep`` gets each partition as it is made.

    With more than one job, forked workers take a range each; the results come back in
    range order, so nothing depends on the jobs.
    """
    swept = forked_map(_sweep_range, job, ranges, jobs)
    return [partition for partition in swept if partition is not None]


def _sweep_range(job: SweepJob, bucket_range: tuple[int, int]) -> SweptPartition | None:
    first, stop = bucket_range
    tables = [(spilled.input_index, table) for spilled in job.inputs
              if (table := spilled.steps(first, stop)) is not None]
    if not tables:
        return None
    merged = merged_steps(tables, job.merge)
    del tables
    steps, problems = kept_steps(merged, job.names)
    del merged
    archive_index = job.merge.archive_index
    if archive_index is not None:  # the archive's rows were checked when they came in: not reported again
        problems = [problem for problem in problems if problem.input != job.names[archive_index]]
    path, keys = None, []
    if job.pages:
        path = job.folder / f"{job.stem}-{first:03d}-{stop:03d}.arrow"
        write_arrow_table(path, steps)
        keys = run_data_keys(steps, run_spans(steps))
    swept = SweptPartition(path, keys, problems, SiteFigures.of(steps, job.timezone_name), (first, stop),
                           _archived_in(steps, archive_index))
    if job.keep is not None:
        job.keep(swept)
    return swept


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


def _archived_in(steps: pa.Table, archive_index: int | None) -> ArchivedSpan:
    if archive_index is None:
        return ArchivedSpan()
    archived = steps.filter(pc.equal(steps.column("input_index"), archive_index))
    if archived.num_rows == 0:
        return ArchivedSpan()
    crdate = archived.column("crdate")
    return ArchivedSpan(archived.num_rows, pc.count_distinct(archived.column("run")).as_py(),
                        pc.min(crdate).as_py(), pc.max(crdate).as_py())


def _about(problems: list[Any], rows_read: int, spilled: BucketedFile) -> dict[str, Any]:
    return {"rows_read": rows_read, "problems": [problem_record(problem) for problem in problems],
            "buckets": spilled.buckets, "rows": spilled.rows}


def spill_inputs(
    inputs: Sequence[Input], known_servers: Iterable[str], stdin: BinaryIO | None, work: Path,
    cache: InputCache | None, timings: dict[str, float], archive_index: int | None = None,
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
            rows_read, rows_fast = int(about["rows_read"]), 0  # not checked in this build
        else:
            path = work / f"input-{input_index}.arrow"
            bucketed = BucketedFile(path)
            try:
                checked = check_input(source, input_index, known, stdin, timings, bucketed.add)
            finally:
                bucketed.close()
            problems, rows_read, rows_fast = checked.problems, checked.rows_read, checked.rows_fast
            about = _about(problems, rows_read, bucketed)
            if cache is not None and key is not None:
                path = cache.store(key, path, about)
        cached = cache is not None and key is not None and path.parent == cache.folder
        spilled = SpilledInput(path, input_index, list(about["buckets"]), list(about["rows"]), key if cached else None)
        spill.inputs.append(spilled)
        # The archive's kept rows count in the sweep, as far as the merge keeps them; not as rows read.
        archived = input_index == archive_index
        spill.tally.add_input(problems, len(problems) if archived else rows_read, 0 if archived else rows_fast)
    timings["check"] = time.perf_counter() - began - (timings.get("read", 0.0) - read_before)
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


def cached_run_steps(cache: InputCache, key: str, input_index: int, name: str, run: str
                     ) -> tuple[pa.Table, list[Problem]] | None:
    """The run's checked steps (duplicates not yet found) and the file's row errors, from the
    input cache's entry ``key`` (``InputCache.key``); None when it has none. Only the run's
    bucket is read."""
    entry = cache.load(key)
    if entry is None:
        return None
    path, about = entry
    spilled = SpilledInput(path, input_index, list(about["buckets"]), list(about["rows"]))
    bucket = bucket_of(run)
    steps = spilled.steps(bucket, bucket + 1)
    if steps is None:
        steps = CHECKED_SCHEMA.empty_table()
    return steps.filter(pc.equal(steps.column("run"), run)), [problem_of(record, name) for record in about["problems"]]
