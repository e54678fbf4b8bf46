"""The sweep: the build's middle stage, one partition of whole runs at a time.

Each partition goes through the same steps, in the order of ``PARTITION_STEPS``:

1. ``merge``: its rows of every input gathered, the archive's rows of a run that an
   input holds dropped, and with ``--keep-days`` the old runs (``store.spill``);
2. ``duplicates and warnings``: the second half of the check, on whole runs (``check``);
3. ``figures``: what the other tables say (``ServerTruths``: the catalogue's server of each
   tool, which failed calls were denied) applied to the steps, then runs, servers, tools and
   days added up (``aggregate``);
4. ``keep``: the kept steps written for the pages and the archive, with each run's span
   and data key (``store``).

The steps are named here, where every stage may be imported; forked workers take a
partition each, and the seconds each step took travel back with its result.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..aggregate.denials import with_server_truths
from ..aggregate.figures import SiteFigures
from ..aggregate.records import figures_from_record, figures_record
from ..check.checked import CheckedRows, kept_steps
from ..core.model import Problem
from ..core.tables import NO_TRUTHS, ServerTruths
from ..core.workers import forked_map
from ..store.cache import InputCache
from ..store.records import problem_of, problem_record
from ..store.spill import (
    ArchivedSpan,
    KeptPartition,
    MergeRule,
    Spill,
    SpilledInput,
    archived_in,
    keep_partition,
    kept_partition_of,
    merged_steps,
    partition_ranges,
)

PARTITION_STEPS = ("merge", "duplicates and warnings", "figures", "keep")


@dataclass(frozen=True)
class SweptPartition:
    """A partition after the sweep: its kept steps (``kept``), its duplicates and warnings,
    its figures, what of it came from the archive, and the seconds each step took in this
    build (none for a partition the input cache brought along)."""

    kept: KeptPartition
    problems: list[Problem]
    figures: SiteFigures
    archived: ArchivedSpan
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Swept:
    """What the sweep hands on: every partition, the figures added up over them, and the
    tally of the whole check (the inputs' row errors, then the partitions' problems), in
    reading order."""

    partitions: list[SweptPartition]
    figures: SiteFigures
    tally: CheckedRows

    def kept(self) -> list[KeptPartition]:
        return [partition.kept for partition in self.partitions]

    def archived(self) -> ArchivedSpan:
        """What of the whole site came from the archive alone."""
        total = ArchivedSpan()
        for partition in self.partitions:
            total = total.plus(partition.archived)
        return total

    def step_seconds(self) -> dict[str, float]:
        """Each step's seconds, summed over the partitions (and so over the workers)."""
        return {step: sum(partition.seconds.get(step, 0.0) for partition in self.partitions)
                for step in PARTITION_STEPS}


def sweep_partitions(
    spill: Spill, *, timezone_name: str, work: Path, cache: InputCache | None, jobs: int = 1,
    merge: MergeRule = MergeRule(), pages: bool = True, truths: ServerTruths = NO_TRUTHS,
) -> Swept:
    """Every partition through the steps; with ``pages``, each partition's kept steps
    written for the run pages and the archive. ``truths`` (what the other tables say about
    servers) set each tool's server and the denials before the figures; the kept steps
    carry both (the catalogue's ``server`` and a ``denial`` column).

    When no run has rows in two inputs, which is how exports grow (a new file holds
    new runs), each input is swept on its own, and an input from the cache brings its
    swept partitions along: a rebuild after a new day's file sweeps only that file.
    """
    if spill.runs_shared_by_inputs():
        job = SweepJob(spill.inputs, spill.names, timezone_name, work, "kept", None, merge, pages, truths)
        partitions = sweep_ranges(job, spill.partition_ranges(), jobs=jobs)
    else:
        partitions = []
        for spilled in spill.inputs:
            partitions += _sweep_input(spilled, spill.names, timezone_name=timezone_name, work=work,
                                       cache=cache if pages else None, jobs=jobs,
                                       merge=merge, pages=pages, truths=truths)
    figures = SiteFigures(timezone_name)
    for partition in partitions:
        figures.absorb(partition.figures)
    return Swept(partitions, figures, _whole_tally(spill, partitions))


def _whole_tally(spill: Spill, partitions: list[SweptPartition]) -> CheckedRows:
    """The inputs' tally with every partition's problems added, in reading order; the
    archive's rows count where the merge kept them."""
    tally = CheckedRows(spill.tally.rows_read, spill.tally.rows_rejected, list(spill.tally.problems),
                        spill.tally.rows_fast)
    for partition in partitions:
        tally.add_checked(partition.problems)
        tally.rows_read += partition.archived.rows
    tally.settle(spill.names)
    return tally


def _sweep_input(
    spilled: SpilledInput, names: list[str], *, timezone_name: str, work: Path, cache: InputCache | None, jobs: int,
    merge: MergeRule, pages: bool, truths: ServerTruths,
) -> list[SweptPartition]:
    ranges = partition_ranges(spilled.bucket_rows())
    name = names[spilled.input_index]
    if cache is None or spilled.cache_key is None:
        job = SweepJob([spilled], names, timezone_name, work, f"input-{spilled.input_index}.kept", None, merge, pages,
                       truths)
        return sweep_ranges(job, ranges, jobs=jobs)
    record = cache.load_swept(spilled.cache_key)
    identity = {"timezone": timezone_name, "ranges": [list(r) for r in ranges], "merge": merge.identity(),
                "truths": _truths_key(truths)}
    if record is not None and all(record.get(field) == value for field, value in identity.items()):
        try:
            return [_swept_of(cache, partition, name=name) for partition in record["partitions"]]
        except (OSError, KeyError, TypeError, ValueError):
            pass  # a record this version cannot read: sweep again
    cache.drop_swept(spilled.cache_key)  # its files are about to be replaced

    def keep(partition: SweptPartition) -> None:
        about = {
            "kept": partition.kept.record(),
            "problems": [problem_record(problem) for problem in partition.problems],
            "figures": figures_record(partition.figures),
            "archived": partition.archived.record(),
        }
        try:
            cache.write_json(partition.kept.file().with_suffix(".json").name, about)
        except OSError:
            pass  # without it the record is incomplete, and the next build sweeps this input again

    job = SweepJob([spilled], names, timezone_name, cache.folder, f"{spilled.cache_key}.kept", keep, merge, True,
                   truths)
    swept = sweep_ranges(job, ranges, jobs=jobs)
    files = [partition.kept.file() for partition in swept]
    cache.store_swept(spilled.cache_key, {
        **identity, "partitions": [[file.name, file.with_suffix(".json").name] for file in files],
    })
    return swept


def _truths_key(truths: ServerTruths) -> str:
    """What a cached sweep depends on of the other tables, as a hash: a record per input holds it,
    and the governance table's decisions may be many."""
    return hashlib.sha256(truths.identity().encode("utf-8", "surrogatepass")).hexdigest()


def _swept_of(cache: InputCache, files: list[str], *, name: str) -> SweptPartition:
    """A partition of a cached input's sweep, as ``keep`` wrote it."""
    steps_file, about_file = files
    about = cache.read_json(about_file)
    return SweptPartition(kept_partition_of(cache.folder / steps_file, about["kept"]),
                          [problem_of(problem, name) for problem in about["problems"]],
                          figures_from_record(about["figures"]), ArchivedSpan(*about["archived"]))


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
    truths: ServerTruths = NO_TRUTHS


def sweep_ranges(job: SweepJob, ranges: list[tuple[int, int]], *, jobs: int = 1) -> list[SweptPartition]:
    """Sweep ``job.inputs`` together, range by range; ``job.keep`` gets each partition as it is made.

    With more than one job, forked workers take a range each; the results come back in
    range order, so nothing depends on the jobs.
    """
    swept = forked_map(_sweep_range, job, items=ranges, processes=jobs)
    return [partition for partition in swept if partition is not None]


@contextmanager
def _timed(seconds: dict[str, float], step: str) -> Iterator[None]:
    began = time.perf_counter()
    yield
    seconds[step] = seconds.get(step, 0.0) + time.perf_counter() - began


def _sweep_range(job: SweepJob, bucket_range: tuple[int, int]) -> SweptPartition | None:
    """One partition through ``PARTITION_STEPS``, in their order."""
    first, stop = bucket_range
    seconds: dict[str, float] = {}
    with _timed(seconds, "merge"):
        tables = [(spilled.input_index, table) for spilled in job.inputs
                  if (table := spilled.steps(first, stop)) is not None]
        if not tables:
            return None
        merged = merged_steps(tables, job.merge)
        del tables
    with _timed(seconds, "duplicates and warnings"):
        steps, problems = kept_steps(merged, job.names)
        del merged
        archive_index = job.merge.archive_index
        if archive_index is not None:  # the archive's rows were checked when they came in: not reported again
            problems = [problem for problem in problems if problem.input != job.names[archive_index]]
    with _timed(seconds, "figures"):
        steps = with_server_truths(steps, job.truths)
        figures = SiteFigures.of(steps, job.timezone_name)
    with _timed(seconds, "keep"):
        path = job.folder / f"{job.stem}-{first:03d}-{stop:03d}.arrow" if job.pages else None
        kept = keep_partition(steps, path, buckets=(first, stop))
        archived = archived_in(steps, archive_index)
    swept = SweptPartition(kept, problems, figures, archived, seconds)
    if job.keep is not None:
        job.keep(swept)
    return swept
