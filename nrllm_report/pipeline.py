"""The one place that knows every stage: read → normalize and validate → aggregate → render → write."""

from __future__ import annotations

import difflib
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Iterator

import pyarrow.compute as pc

from . import __version__
from .aggregate import figures as aggregate
from .aggregate.figures import ServerStats
from .aggregate.health import ServerHealth, server_health
from .check.checked import CheckedRows, check_inputs, checked_steps
from .core.errors import UnknownRunError
from .core.options import DEFAULT_MIN_CALLS, LANGUAGES, BuildOptions, NoProgress, Progress, default_jobs
from .core.resources import sample_inputs, sample_servers
from .core.schema import CANONICAL_SCHEMA
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
from .store.spill import spill_inputs, sweep

__all__ = [
    "BuildOptions", "CheckedRows", "DEFAULT_MIN_CALLS", "LANGUAGES", "Progress", "build", "checked_steps",
    "default_jobs", "normalize", "timeline", "validate",
]


def validate(names: list[str], known_servers: list[str], stdin: BinaryIO | None) -> CheckedRows:
    """Read and check every row of the inputs."""
    return check_inputs(resolve_inputs(names), known_servers, stdin).tally


def normalize(
    names: list[str], out: Path, known_servers: list[str], stdin: BinaryIO | None
) -> CheckedRows:
    """Write every row without an error as a canonical record to ``out``, in reading order."""
    inputs = resolve_inputs(names)
    record_writer = writer.record_writer_for(out)
    checked = check_inputs(inputs, known_servers, stdin)
    in_reading_order = checked.steps.sort_by([("input_index", "ascending"), ("row", "ascending")])
    record_writer(out, in_reading_order.select(CANONICAL_SCHEMA.names))
    return checked.tally


# ---------------------------------------------------------------- build and timeline


@dataclass
class BuildResult:
    data: SiteData
    out: Path
    pages_rendered: int
    pages_reused: int
    timings: dict[str, float]


def page_kits(options: BuildOptions, time_range: tuple[int, int] | None) -> dict[str, PageKit]:
    settings = SiteSettings(options.title, options.languages, options.timezone_name, options.min_calls, time_range)
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
    output_format: str = "html", show_approvers: bool = False,
) -> None:
    """Write one run's timeline as a single self-contained HTML file, as Markdown or as JSON."""
    inputs, options = with_sample_default(names, options)
    checked = check_inputs(inputs, options.known_servers, stdin)
    steps = checked.steps.filter(pc.equal(checked.steps.column("run"), run))
    if steps.num_rows == 0:
        runs = pc.unique(checked.steps.column("run")).to_pylist()
        close = difflib.get_close_matches(run, sorted(runs), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(match) for match in close)}?" if close else ""
        raise UnknownRunError(f"run {run!r} is not in the input{hint}")
    summary = aggregate.run_summaries(steps, aggregate.tool_steps(steps))[0]
    kit = page_kits(replace(options, languages=(language,)), None)[language]
    if output_format == "json":
        writer.write_single_file(out, timeline_formats.timeline_json(summary, steps, show_approvers))
        return
    if output_format == "md":
        writer.write_single_file(out, timeline_formats.timeline_markdown(kit, summary, steps, show_approvers))
        return
    markup = TimelinePlan(steps, {language: kit}, {}).rows(language, 0, steps.num_rows)
    text = pages.run_page(kit, summary, markup, (0, steps.num_rows), {}, standalone=True)
    writer.write_single_file(out, text)
