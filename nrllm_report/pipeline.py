"""The one place that knows every stage: read → normalize and validate → aggregate → render → write."""

from __future__ import annotations

import difflib
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

import pyarrow.compute as pc

from . import __version__
from .aggregate import figures as aggregate
from .aggregate.figures import ServerStats
from .aggregate.health import ServerHealth, server_health
from .check.checked import CheckedRows, checked_steps
from .check.one_run import RunChecked, check_run, concerns_run
from .core.errors import UnknownRunError
from .core.options import DEFAULT_MIN_CALLS, LANGUAGES, BuildOptions, NoProgress, Progress, default_jobs
from .core.resources import sample_inputs, sample_servers
from .core.model import Problem
from .core.schema import CANONICAL_SCHEMA, CHECKED_SCHEMA
from .output import writer
from .output.writer import SiteWriter
from .readers import Input, resolve_inputs
from .site import pages
from .site import parallel as sitebuild
from .site import timeline_formats
from .site.i18n import Formatter
from .site.pages import SiteData
from .site.render import PageKit, SiteSettings, TimelinePlan
from .store.cache import InputCache
from .output.arrow_files import scratch_folder
from .store import ordered
from .store.spill import Spill, checked_partitions, spill_inputs, sweep

__all__ = [
    "BuildOptions", "CheckedRows", "DEFAULT_MIN_CALLS", "LANGUAGES", "Progress", "Spill", "build",
    "checked_partitions", "checked_spill", "checked_steps", "default_jobs", "normalize", "timeline", "validate",
]


def validate(names: list[str], known_servers: list[str], stdin: BinaryIO | None) -> CheckedRows:
    """Read and check every row of the inputs, a partition of whole runs at a time."""
    with checked_spill(resolve_inputs(names), known_servers, stdin) as spill:
        for _steps in checked_partitions(spill):
            pass
        return spill.tally


def normalize(
    names: list[str], out: Path, known_servers: list[str], stdin: BinaryIO | None
) -> CheckedRows:
    """Write every row without an error as a canonical record to ``out``, in reading order.

    Each partition's kept steps are written sorted by reading order, and the files
    merged into ``out``: memory holds a partition, then a batch of each file.
    """
    inputs = resolve_inputs(names)
    record_writer = writer.record_writer_for(out)
    with scratch_folder(out.parent) as work:
        spill = spill_inputs(inputs, known_servers, stdin, work, None, {})
        batch_rows = ordered.merge_batch_rows(len(spill.partition_ranges()))
        sorted_files: list[Path] = []
        for steps in checked_partitions(spill):
            sorted_files.append(work / f"reading-order-{len(sorted_files):04d}.arrow")
            ordered.write_in_reading_order(steps, sorted_files[-1], batch_rows)
        record_writer(out, writer.TableStream(ordered.merged_in_reading_order(sorted_files, CANONICAL_SCHEMA)))
        return spill.tally


@contextmanager
def checked_spill(
    inputs: list[Input], known_servers: Iterable[str], stdin: BinaryIO | None, near: Path | None = None,
    timings: dict[str, float] | None = None,
) -> Iterator[Spill]:
    """Every input read and checked into scratch files by run bucket, removed afterwards.

    The bounded path for any command that looks at every row: iterate
    ``checked_partitions(spill)`` for each partition's kept steps (whole runs, sorted by
    run and sequence); ``spill.tally`` is complete, in reading order, once it is done.
    The scratch folder is made in ``near``, or in the system's temporary folder.
    """
    with scratch_folder(near) as work:
        yield spill_inputs(inputs, known_servers, stdin, work, None, {} if timings is None else timings)


# ---------------------------------------------------------------- build and timeline


@dataclass
class BuildResult:
    data: SiteData
    out: Path
    pages_rendered: int
    pages_reused: int
    timings: dict[str, float]


def page_kits(options: BuildOptions, time_range: tuple[int, int] | None) -> dict[str, PageKit]:
    settings = SiteSettings(options.title, options.languages, options.timezone_name, options.min_calls, time_range,
                            options.show_approvers)
    return {
        language: PageKit(language, Formatter(language, options.zone), settings)
        for language in options.languages
    }


def with_sample_default(names: list[str], options: BuildOptions) -> tuple[list[Input], BuildOptions]:
    """The inputs as given, or the bundled sample with its server list when none are."""
    if names:
        return resolve_inputs(names), options
    known = tuple(dict.fromkeys(options.known_servers + tuple(sample_servers())))
    # Named as in the repository, not by where the package happens to be installed.
    sample = [replace(source, name=f"sample_data/{Path(name).name}")
              for source, name in zip(resolve_inputs(sample_inputs()), sample_inputs())]
    return sample, replace(options, known_servers=known)


def build(
    names: list[str], out: Path, options: BuildOptions, stdin: BinaryIO | None,
    progress: Progress | None = None,
) -> BuildResult:
    """Read, check, aggregate and render the whole site, then swap it in at ``out``.

    The checked steps go to disk by partition (``spill``): the first pass over the
    partitions finds duplicates and warnings and adds up the figures, the second
    renders the run pages; a process holds one partition's steps at a time.
    """
    progress = progress or NoProgress()
    inputs, options = with_sample_default(names, options)
    timings: dict[str, float] = {}
    with SiteWriter(out, force=options.force) as site:
        salt = f"{sitebuild.version_key()}|{sorted(options.known_servers)!r}"
        cache = InputCache(site.cache_folder, salt)
        spill = spill_inputs(inputs, options.known_servers, stdin, site.work, cache, timings)
        with _stage(timings, "aggregate"):
            figures, swept = sweep(spill, options.timezone_name, site.work, cache, options.jobs)
            spill.tally.settle(spill.names)
        with _stage(timings, "health"):
            healths = server_healths(figures.servers, options)
        with _stage(timings, "aggregate"):
            data = SiteData(
                summaries=figures.summaries, servers=sorted(figures.servers, key=lambda s: healths[s.server].rank()),
                outcomes=figures.outcomes, problems=spill.tally.problems, rows_read=spill.tally.rows_read,
                rows_rejected=spill.tally.rows_rejected, time_range=figures.time_range,
                languages=options.languages, health=healths, min_calls=options.min_calls,
            )
            kits = page_kits(options, data.time_range)
        manifest: dict[str, str] = {}
        with _stage(timings, "run pages"):
            partitions = [(partition.path, partition.keys) for partition in swept]
            rendered, reused = sitebuild.render_run_pages(
                site, kits, partitions, data, options.jobs, manifest, progress, timings
            )
        with _stage(timings, "overview pages"):
            sitebuild.write_overview_pages(site, kits, data, options.jobs)
        with _stage(timings, "swap"):
            site.commit(manifest, {"generator": "nrllm-report", "version": __version__})
        cache.prune()
    return BuildResult(data, Path(out), rendered, reused, timings)


def server_healths(servers: list[ServerStats], options: BuildOptions) -> dict[str, ServerHealth]:
    """Each server's verdict, changes and cancellation figures, against its failure budget."""
    return {
        stats.server: server_health(stats, options.budget_for(stats.server), options.min_calls) for stats in servers
    }


@contextmanager
def _stage(timings: dict[str, float], name: str) -> Iterator[None]:
    began = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - began


def timeline(
    run: str, names: list[str], out: Path, language: str, options: BuildOptions, stdin: BinaryIO | None,
    output_format: str = "html", show_approvers: bool | None = None,
) -> list[Problem]:
    """Write one run's timeline as a single self-contained HTML file, as Markdown or as JSON;
    return the problems that concern it (its rows' errors and warnings, and every row that
    cannot be read).

    Only the rows that may be the run's are read and checked (``check_run``); standard
    input, which can be read only once, is checked whole, in bounded memory.
    """
    inputs, options = with_sample_default(names, options)
    if show_approvers is not None:
        options = replace(options, show_approvers=show_approvers)
    show_approvers = options.show_approvers
    runs: list[str] | None = None
    if any(source.path is None for source in inputs):
        checked, runs = _whole_check_of_run(run, inputs, options.known_servers, stdin)
    else:
        checked = check_run(run, inputs, options.known_servers, stdin)
    steps = checked.steps
    if steps.num_rows == 0:
        if runs is None:
            _checked, runs = _whole_check_of_run(run, inputs, options.known_servers, stdin)
        close = difflib.get_close_matches(run, runs, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(match) for match in close)}?" if close else ""
        raise UnknownRunError(f"run {run!r} is not in the input{hint}")
    summary = aggregate.run_summaries(steps, aggregate.tool_steps(steps))[0]
    kit = page_kits(replace(options, languages=(language,)), None)[language]
    if output_format == "json":
        writer.write_single_file(out, timeline_formats.timeline_json(summary, steps, show_approvers))
        return checked.problems
    if output_format == "md":
        writer.write_single_file(out, timeline_formats.timeline_markdown(kit, summary, steps, show_approvers))
        return checked.problems
    markup = TimelinePlan(steps, {language: kit}, {}).rows(language, 0, steps.num_rows)
    text = pages.run_page(kit, summary, markup, (0, steps.num_rows), {}, standalone=True)
    writer.write_single_file(out, text)
    return checked.problems


def _whole_check_of_run(
    run: str, inputs: list[Input], known_servers: Iterable[str], stdin: BinaryIO | None
) -> tuple[RunChecked, list[str]]:
    """The run as a check of every row finds it, a partition at a time, and every run kept (sorted)."""
    runs: set[str] = set()
    steps = CHECKED_SCHEMA.empty_table()
    with checked_spill(inputs, known_servers, stdin) as spill:
        for partition in checked_partitions(spill):
            runs.update(pc.unique(partition.column("run")).to_pylist())
            if run in runs and steps.num_rows == 0:
                steps = partition.filter(pc.equal(partition.column("run"), run))
        problems = [problem for problem in spill.tally.problems if concerns_run(problem, run)]
    return RunChecked(steps, problems), sorted(runs)
