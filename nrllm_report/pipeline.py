"""The one place that knows every stage: read → normalize and validate → aggregate → render → write."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from datetime import date, timezone, tzinfo
from operator import attrgetter
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Iterator, Protocol
from zoneinfo import ZoneInfo

from . import __version__, pages, sitebuild, writer
from .aggregate import DEFAULT_MIN_CALLS, OutcomeCounts, ServerTally, newest_first, summarize_run
from .errors import UnknownRunError
from .i18n import LANGUAGES, Formatter
from .model import Problem, Severity, Step
from .pages import SiteData
from .readers import Input, resolve_inputs
from .render import PageKit, SiteSettings
from .resources import sample_inputs, sample_servers
from .validate import RowChecker
from .writer import SiteWriter


@dataclass
class CheckedRows:
    """Counts and problems of a pass over the inputs; steps go to whoever consumes them."""

    rows_read: int = 0
    rows_rejected: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def rows_valid(self) -> int:
        return self.rows_read - self.rows_rejected

    @property
    def has_errors(self) -> bool:
        return self.rows_rejected > 0

    def to_json(self) -> dict[str, object]:
        return {
            "rows_read": self.rows_read,
            "rows_valid": self.rows_valid,
            "rows_rejected": self.rows_rejected,
            "problems": [problem.to_json() for problem in self.problems],
        }


def checked_steps(
    inputs: Iterable[Input], checker: RowChecker, tally: CheckedRows, stdin: BinaryIO | None
) -> Iterator[Step]:
    """Every kept step of every input, in input order; problems and counts go to ``tally``."""
    for source in inputs:
        for row_number, raw in source.rows(stdin):
            result = checker.check(source.name, row_number, raw)
            tally.rows_read += 1
            if result.step is None:
                tally.rows_rejected += 1
            else:
                yield result.step
            if result.problems:
                tally.problems.extend(result.problems)


def validate(names: list[str], known_servers: list[str], stdin: BinaryIO | None) -> CheckedRows:
    """Read and check every row of the inputs; keep nothing but the tally."""
    inputs = resolve_inputs(names)
    tally = CheckedRows()
    for _step in checked_steps(inputs, RowChecker(known_servers), tally, stdin):
        pass
    return tally


def normalize(
    names: list[str], out: Path, known_servers: list[str], stdin: BinaryIO | None
) -> CheckedRows:
    """Write every row without an error as a canonical record to ``out`` (.jsonl or .parquet)."""
    inputs = resolve_inputs(names)
    record_writer = writer.record_writer_for(out)
    tally = CheckedRows()
    steps = checked_steps(inputs, RowChecker(known_servers), tally, stdin)
    record_writer(out, steps)
    return tally


def error_count(problems: Iterable[Problem]) -> int:
    return sum(1 for problem in problems if problem.severity is Severity.ERROR)


# ---------------------------------------------------------------- build and timeline


class Progress(Protocol):
    def start(self, total: int) -> None: ...
    def advance(self, count: int) -> None: ...
    def finish(self) -> None: ...


class NoProgress:
    def start(self, total: int) -> None:
        pass

    def advance(self, count: int) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass(frozen=True)
class BuildOptions:
    languages: tuple[str, ...] = LANGUAGES
    title: str | None = None
    timezone_name: str = "UTC"
    known_servers: tuple[str, ...] = ()
    min_calls: int = DEFAULT_MIN_CALLS
    force: bool = False
    jobs: int = 1

    @property
    def zone(self) -> tzinfo:
        return timezone.utc if self.timezone_name == "UTC" else ZoneInfo(self.timezone_name)


@dataclass
class BuildResult:
    data: SiteData
    out: Path
    pages_rendered: int
    pages_reused: int


def collect_runs(
    inputs: Iterable[Input], checker: RowChecker, tally: CheckedRows, stdin: BinaryIO | None
) -> dict[str, list[Step]]:
    """Kept steps grouped by run, each run in sequence order."""
    runs: dict[str, list[Step]] = {}
    for step in checked_steps(inputs, checker, tally, stdin):
        steps = runs.get(step.run)
        if steps is None:
            runs[step.run] = [step]
        else:
            steps.append(step)
    for steps in runs.values():
        steps.sort(key=attrgetter("sequence"))
    return runs


def aggregate_site(
    runs: dict[str, list[Step]], tally: CheckedRows, options: BuildOptions, day_of: Callable[[int], date]
) -> SiteData:
    server_tally = ServerTally(day_of)
    outcomes = OutcomeCounts()
    summaries = []
    for run, steps in runs.items():
        summary = summarize_run(run, steps)
        summaries.append(summary)
        outcomes.merge(summary.counts)
        server_tally.add_run(steps)
    starts = [summary.start for summary in summaries if summary.start is not None]
    ends = [summary.end for summary in summaries if summary.end is not None]
    return SiteData(
        summaries=newest_first(summaries),
        servers=server_tally.ranked(),
        outcomes=outcomes,
        problems=tally.problems,
        rows_read=tally.rows_read,
        rows_rejected=tally.rows_rejected,
        time_range=(min(starts), max(ends)) if starts else None,
        languages=options.languages,
    )


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
    return resolve_inputs(sample_inputs()), replace(options, known_servers=known)


def build(
    names: list[str], out: Path, options: BuildOptions, stdin: BinaryIO | None,
    progress: Progress | None = None,
) -> BuildResult:
    """Read, check, aggregate and render the whole site, then swap it in at ``out``."""
    progress = progress or NoProgress()
    inputs, options = with_sample_default(names, options)
    with SiteWriter(out, force=options.force) as site:
        tally = CheckedRows()
        runs = collect_runs(inputs, RowChecker(options.known_servers), tally, stdin)
        day_of = Formatter("en", options.zone).day_of
        data = aggregate_site(runs, tally, options, day_of)
        kits = page_kits(options, data.time_range)
        manifest: dict[str, str] = {}
        rendered, reused = sitebuild.render_run_pages(site, kits, runs, data, options, manifest, progress)
        sitebuild.write_overview_pages(site, kits, data, manifest)
        site.commit(manifest, {"generator": "nrllm-report", "version": __version__})
    return BuildResult(data, Path(out), rendered, reused)


def timeline(
    run: str, names: list[str], out: Path, language: str, options: BuildOptions, stdin: BinaryIO | None
) -> Step | None:
    """Write one run's timeline as a single self-contained HTML file."""
    inputs, options = with_sample_default(names, options)
    tally = CheckedRows()
    steps: list[Step] = []
    run_ids: set[str] = set()
    for step in checked_steps(inputs, RowChecker(options.known_servers), tally, stdin):
        run_ids.add(step.run)
        if step.run == run:
            steps.append(step)
    if not steps:
        close = difflib.get_close_matches(run, sorted(run_ids), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(match) for match in close)}?" if close else ""
        raise UnknownRunError(f"run {run!r} is not in the input{hint}")
    steps.sort(key=attrgetter("sequence"))
    summary = summarize_run(run, steps)
    kit = page_kits(replace(options, languages=(language,)), None)[language]
    text = pages.run_page(kit, summary, steps, {}, standalone=True)
    writer.write_single_file(out, text)
    return steps[0]
