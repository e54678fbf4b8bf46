"""The one place that knows every stage and their order (``BUILD_STAGES``).

A build reads and checks every input into scratch files by run bucket (``check``),
sweeps them a partition of whole runs at a time (``sweep``: duplicates and warnings,
figures, the kept steps for the pages; see ``pipeline.sweep``), makes each server's and
tool's latency figures from the calls the sweep handed on (``latency``), judges each server's
health and the gate (``health``), gathers what the pages show (``site data``), renders
the run pages and the overview pages, writes the archive and swaps the site in.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .. import __version__
from ..aggregate.denials import with_server_truths
from ..aggregate.diff import DiffReport, InputSide, diff_exports
from ..aggregate.figures import RunSummary, ServerStats, run_spend, run_summaries, tool_steps
from ..aggregate.gate import GateResult, evaluate_gate
from ..aggregate.health import ServerHealth, server_health, with_latency_verdict
from ..aggregate.latencies import ServerLatency, server_latencies
from ..aggregate.latency import LatencySettings
from ..aggregate.latency_diff import slow_counts, slow_diff
from ..aggregate.latency_gate import with_latency_gate
from ..aggregate.provider_latency import provider_latencies
from ..aggregate.whole_run import (
    ArchivedRuns,
    RunHeader,
    WholeRuns,
    WholeRunTables,
    archive_record,
    archived_runs,
)
from ..check.checked import CheckedRows, checked_steps
from ..check.one_run import RunChecked, RunPart, check_input_for_run, concerns_run, settle_run
from ..check.tables import INPUT_COLUMN, ROW_COLUMN, CheckedTables, check_tables
from ..core.errors import OutputError, UnknownRunError
from ..core.model import Problem
from ..core.options import (
    DEFAULT_MIN_CALLS,
    LANGUAGES,
    BuildOptions,
    GateOptions,
    NoProgress,
    Progress,
    ReportFiles,
    default_jobs,
)
from ..core.resources import code_key, sample_inputs, sample_servers
from ..core.schema import CANONICAL_SCHEMA, CHECKED_SCHEMA
from ..core.slugs import slug
from ..core.tables import NO_TRUTHS, ServerTruths
from ..core.workers import long_lived_objects
from ..output import writer
from ..output.arrow_files import scratch_folder
from ..output.writer import SiteWriter
from ..readers import Input, resolve_input, resolve_inputs
from ..readers.archive import archived_whole_runs, check_archive
from ..readers.database import DatabaseSession
from ..readers.tables import split_inputs
from ..reports import diff_report, gate_report
from ..reports.gate_report import GateReport
from ..site import pages, timeline_formats
from ..site.i18n import Formatter
from ..site.kit import PageKit, SiteSettings
from ..site.pages import SiteData
from ..site.parallel import render_run_pages, write_overview_pages
from ..site.timeline_plan import TimelinePlan
from ..site.waterfall import RunSteps
from ..site.whole_run import MergedTimeline
from ..store import ordered
from ..store.archive import write_archive
from ..store.cache import (
    InputCache,
    cache_folders_in,
    default_cache_root,
    open_site_entry,
    prune_cache_root,
    site_entry,
)
from ..store.runs import RunSpan
from ..store.spill import MergeRule, Spill, cached_run_steps, checked_partitions, spill_inputs
from .resume import next_marks, resumed_sessions, rows_fetched, with_resumed_problems
from .sweep import Swept, sweep_partitions

__all__ = [
    "BuildOptions", "CheckedRows", "DEFAULT_MIN_CALLS", "GateOptions", "LANGUAGES", "Progress", "ReportFiles",
    "Spill", "build", "check_report_files", "diff", "gate",
    "checked_partitions", "checked_spill", "checked_steps", "default_jobs", "normalize", "timeline", "validate",
]


def validate(names: list[str], known_servers: list[str]) -> CheckedRows:
    """Read and check every row of the inputs (the events a partition of whole runs at a time),
    the other tables' too."""
    events, table_inputs = split_inputs(resolve_inputs(names))
    tables = check_tables(table_inputs)
    with checked_spill(events, known_servers) as spill:
        for _steps in checked_partitions(spill):
            pass
        return tally_with_tables(spill.tally, tables, names=spill.names)


def normalize(names: list[str], out: Path, *, known_servers: list[str]) -> CheckedRows:
    """Write every row without an error as a canonical record to ``out``, in reading order.

    Each partition's kept steps are written sorted by reading order, and the files
    merged into ``out``: memory holds a partition, then a batch of each file. The other
    tables' kept rows go beside it, a file each (``table_records_path``).
    """
    inputs, table_inputs = split_inputs(resolve_inputs(names))
    record_writer = writer.record_writer_for(out)
    tables = check_tables(table_inputs)
    for table, rows in tables.tables.items():  # the other tables' kept rows, beside the steps
        record_writer(table_records_path(out, table), rows.drop_columns([INPUT_COLUMN, ROW_COLUMN]))
    with scratch_folder(out.parent) as work:
        spill = spill_inputs(inputs, known_servers, work=work, cache=None, timings={})
        batch_rows = ordered.merge_batch_rows(len(spill.partition_ranges()))
        sorted_files: list[Path] = []
        for steps in checked_partitions(spill):
            sorted_files.append(work / f"reading-order-{len(sorted_files):04d}.arrow")
            ordered.write_in_reading_order(steps, sorted_files[-1], batch_rows=batch_rows)
        record_writer(out, writer.TableStream(ordered.merged_in_reading_order(sorted_files, CANONICAL_SCHEMA)))
        return tally_with_tables(spill.tally, tables, names=spill.names)


def table_records_path(out: Path, table: str) -> Path:
    """Where ``normalize --out OUT`` writes a table's checked rows: beside ``OUT``, its name led by
    the table's, so that it is read back as that table (``records.jsonl`` →
    ``tx_nrllm_agentrun.records.jsonl``)."""
    return out.with_name(f"{table}.{out.name}")


@contextmanager
def checked_spill(
    inputs: list[Input], known_servers: Iterable[str], *, near: Path | None = None,
    timings: dict[str, float] | None = None,
) -> Iterator[Spill]:
    """Every input read and checked into scratch files by run bucket, removed afterwards.

    The bounded path for any command that looks at every row: iterate
    ``checked_partitions(spill)`` for each partition's kept steps (whole runs, sorted by
    run and sequence); ``spill.tally`` is complete, in reading order, once it is done.
    The scratch folder is made in ``near``, or in the system's temporary folder.
    """
    with scratch_folder(near) as work:
        yield spill_inputs(inputs, known_servers, work=work, cache=None, timings={} if timings is None else timings)


# ---------------------------------------------------------------- build and timeline


FAST_PATH_ROWS = "fast path rows"  # in ``timings``: rows checked this build that the fast path vouched for


@dataclass
class BuildResult:
    data: SiteData
    out: Path
    pages_rendered: int
    pages_reused: int
    timings: dict[str, float]


def page_kits(options: BuildOptions, time_range: tuple[int, int] | None, *, whole: WholeRuns | None = None,
              **shown: Any) -> dict[str, PageKit]:
    """A kit per language; ``shown`` are PageKit's ``spend`` and ``denials_shown``."""
    settings = SiteSettings(options.title, options.languages, options.timezone_name, options.min_calls, time_range,
                            options.show_approvers)
    return {
        language: PageKit(language, Formatter(language, options.zone), settings=settings, whole=whole, **shown)
        for language in options.languages
    }


DAY_SECONDS = 86_400


def with_sample_default(names: list[str], options: BuildOptions) -> tuple[list[Input], BuildOptions]:
    """The inputs as given, or the bundled sample with its server list when none are
    (with an archive and no input, the archive alone)."""
    if names or options.archive is not None:
        return resolve_inputs(names), options
    known = tuple(dict.fromkeys(options.known_servers + tuple(sample_servers())))
    # Named as in the repository, not by where the package happens to be installed.
    sample = [replace(source, name=f"sample_data/{Path(name).name}")
              for source, name in zip(resolve_inputs(sample_inputs()), sample_inputs())]
    return sample, replace(options, known_servers=known)


# The build's stages, in the order ``build`` runs them; ``--timings`` names each.
BUILD_STAGES = ("check", "sweep", "latency", "health", "site data", "run pages", "overview pages", "archive", "swap")


def build(
    names: list[str], out: Path, *, options: BuildOptions, progress: Progress | None = None,
    reports: ReportFiles = ReportFiles(), truths: ServerTruths = NO_TRUTHS,
) -> BuildResult:
    """Read, check, aggregate and render the whole site, then swap it in at ``out``.

    ``truths`` are what the other tables say about servers (the catalogue's server of each
    tool, orphaned tools, policy denials); by default, what the inputs' tables say.

    The stages of ``BUILD_STAGES``, in order: the checked steps go to disk by run bucket (``check``); the
    sweep takes them a partition of whole runs at a time and hands on the figures and each partition's kept
    steps (``sweep``); the run pages are rendered from those, a partition at a time. An archive is one more
    input, merged by run in the sweep; the merged runs replace it right after the swap."""
    progress = progress or NoProgress()
    check_report_files(reports)
    inputs, options = with_sample_default(names, options)
    inputs, table_inputs = split_inputs(inputs)
    inputs, archive_index = with_archive(inputs, options)
    sessions = resumed_sessions(inputs, options.archive if archive_index is not None else None)
    timings: dict[str, float] = {}
    with SiteWriter(out, force=options.force) as site, long_lived_objects() as all_kept_made:
        cache = _input_cache(options, site.out)
        with _stage(timings, "check"):
            tables = check_tables(table_inputs)
            whole_tables = WholeRunTables(tables.tables)
            truths = truths_of(whole_tables, truths)
            spill = spill_inputs(inputs, options.known_servers, work=site.work, cache=cache, timings=timings,
                                 archive_index=archive_index)
        timings["check"] -= timings.get("read", 0.0)  # reading is timed on its own, inside the check
        with _stage(timings, "sweep"):
            swept = _swept(spill, options, work=site.work, cache=cache, archive_index=archive_index, truths=truths)
        with _stage(timings, "latency"):
            latencies = server_latencies(swept.figures.latency_calls, latency_settings(options))
        with _stage(timings, "health"):
            healths = server_healths(swept.figures.servers, options=options, latencies=latencies)
            gate_result = evaluate(healths, options, time_range=swept.figures.time_range, latencies=latencies)
        with _stage(timings, "site data"):
            swept = with_tables(with_resumed_problems(swept, sessions, names=spill.names), tables, names=spill.names)
            whole = whole_tables.joined((summary.run for summary in swept.figures.runs),
                                        _archived_whole_runs(options, archive_index))
            data = site_data(swept, healths, gate_result=gate_result, options=options, whole=whole,
                             orphaned=truths.orphaned, latencies=latencies,
                             table_rows_kept=tables.rows_read - tables.rows_rejected)
            kits = site_kits(options, data)
        all_kept_made()
        manifest, rendered, reused = _write_pages(site, kits, swept=swept, data=data, options=options,
                                                  progress=progress, timings=timings)
        if options.archive is not None:
            with _stage(timings, "archive"):
                _replace_archive(site, swept, data=data, archive=options.archive, cache=cache, spill=spill,
                                 archive_index=archive_index, sessions=sessions)
        with _stage(timings, "swap"):
            site.commit(manifest, {"generator": "nrllm-report", "version": __version__})
        _prune_caches(cache, options, out=site.out)
    _add_sweep_timings(timings, swept, spill=spill, sessions=sessions)
    write_reports(reports, options, report=GateReport(gate_result, data.rows_read, data.rows_rejected, data.problems,
                                                      options.min_calls, latencies))
    return BuildResult(data, Path(out), rendered, reused, timings)


def _write_pages(site: SiteWriter, kits: dict[str, PageKit], *, swept: Swept, data: SiteData, options: BuildOptions,
                 progress: Progress, timings: dict[str, float]) -> tuple[dict[str, str], int, int]:
    """The run pages and the overview pages written (stages ``run pages`` and ``overview pages``):
    the manifest of the files written, and how many run pages were rendered and reused."""
    manifest: dict[str, str] = {}
    with _stage(timings, "run pages"):
        rendered, reused = render_run_pages(site, kits, partitions=swept.kept(), data=data, jobs=options.jobs,
                                                      manifest=manifest, progress=progress, timings=timings)
    with _stage(timings, "overview pages"):
        write_overview_pages(site, kits, data=data, jobs=options.jobs, manifest=manifest)
    return manifest, rendered, reused


def _archived_whole_runs(options: BuildOptions, archive_index: int | None) -> ArchivedRuns:
    """The whole runs the archive keeps, when the build merges one; none otherwise."""
    if archive_index is None or not options.archive:
        return {}
    return archived_runs(archived_whole_runs(options.archive))


def site_kits(options: BuildOptions, data: SiteData) -> dict[str, PageKit]:
    """The page kits of a site: each language's, knowing the whole runs, their spending, and
    whether the site tells denials apart."""
    return page_kits(options, data.time_range, whole=data.whole, spend=data.spend, denials_shown=data.denials_known)


def _replace_archive(site: SiteWriter, swept: Swept, *, data: SiteData, archive: Path, cache: InputCache | None,
                     spill: Spill, archive_index: int | None, sessions: list[DatabaseSession]) -> None:
    """The merged runs (and what the archive keeps of their other rows, and where the reads of the
    databases resume) replace the archive after the swap."""
    record = archive_record(data.whole, (summary.run for summary in data.summaries))
    marks = next_marks(sessions, data.problems)
    site.replace_after_swap(write_archive(swept.kept(), archive, cache=cache, whole_runs=record, database_marks=marks),
                            archive)
    if cache is not None and archive_index is not None:
        cache.forget(spill.inputs[archive_index].cache_key)  # the file it describes is replaced


def site_data(swept: Swept, healths: dict[str, ServerHealth], *, gate_result: GateResult,
              options: BuildOptions, whole: WholeRuns | None = None,
              orphaned: frozenset[str] = frozenset(),
              latencies: dict[str, ServerLatency] | None = None, table_rows_kept: int = 0) -> SiteData:
    """Everything the pages show, from the sweep's figures and tally, the servers' health and
    the whole runs' rows; a run with a uuid in its row is named by it (its page's path);
    ``orphaned`` are the tools the catalogue marks so."""
    figures, tally = swept.figures, swept.tally
    whole = whole or WholeRuns()
    summaries = figures.summaries
    for summary in summaries:
        named = whole.slug_source(summary.run)
        if named != summary.run:
            summary.slug = slug(named)
    return SiteData(
        summaries=summaries, servers=_worst_first(figures.servers, gate_result),
        outcomes=figures.outcomes, problems=tally.problems, rows_read=tally.rows_read,
        rows_rejected=tally.rows_rejected, time_range=figures.time_range,
        languages=options.languages, health=healths, min_calls=options.min_calls, gate=gate_result,
        archived=swept.archived(), whole=whole, spend=figures.spend, orphaned=orphaned,
        table_rows_kept=table_rows_kept,
        latency=latencies or {},
        providers=provider_latencies(whole, settings=latency_settings(options)(""),
                                     timezone_name=options.timezone_name),
    )


def with_tables(swept: Swept, tables: CheckedTables, *, names: list[str]) -> Swept:
    """The sweep with the other tables' kept rows, and its tally with their rows and problems."""
    if not tables.names:
        return swept
    return replace(swept, tally=tally_with_tables(swept.tally, tables, names=names))


def truths_of(tables: WholeRunTables, given: ServerTruths) -> ServerTruths:
    """The truths asked for, else what the tables say about servers (none without them)."""
    if given is not NO_TRUTHS or not tables.any:
        return given
    return tables.truths()


def tally_with_tables(events: CheckedRows, tables: CheckedTables, *, names: list[str]) -> CheckedRows:
    """The events' tally with the other tables' rows and problems added, in reading order."""
    if not tables.names:
        return events
    tally = CheckedRows(events.rows_read + tables.rows_read, events.rows_rejected + tables.rows_rejected,
                        list(events.problems) + tables.problems, events.rows_fast)
    tally.settle(list(dict.fromkeys([*names, *tables.names])))
    return tally


def _add_sweep_timings(timings: dict[str, float], swept: Swept, *, spill: Spill,
                       sessions: list[DatabaseSession]) -> None:
    """The sweep's steps in worker seconds, which path the rows took and the rows each database
    table gave, beside the stages."""
    for step, seconds in swept.step_seconds().items():
        timings[f"sweep: {step} (worker seconds)"] = seconds
    timings[FAST_PATH_ROWS] = spill.tally.rows_fast  # a count beside the seconds: which path rows took
    timings.update(rows_fetched(sessions))


def evaluate(
    healths: dict[str, ServerHealth], options: BuildOptions, *, time_range: tuple[int, int] | None,
    latencies: dict[str, ServerLatency] | None = None,
) -> GateResult:
    """The gate on the servers' health and latency; the window ends on the data's last day in the
    report's time zone."""
    last_day = None if time_range is None else datetime.fromtimestamp(time_range[1], options.zone).date()
    gate_options = options.gate
    result = evaluate_gate(healths.values(), fail_on=gate_options.failure_verdicts,
                           fail_on_change=gate_options.fail_on_change,
                           change_window=gate_options.change_window, last_day=last_day)
    return with_latency_gate(result, latencies or {}, fail_on_slow=gate_options.fail_on_slow,
                             fail_on_slower=gate_options.fail_on_slower, last_day=last_day)


def latency_settings(options: BuildOptions) -> Callable[[str], LatencySettings]:
    """Each server's latency settings: its latency budget (its own or the default), the slow budget,
    the call timeout and --min-calls."""
    def settings_for(server: str) -> LatencySettings:
        return LatencySettings(options.latency_budget_for(server) * 1000, options.slow_budget,
                               options.call_timeout * 1000, options.min_calls)
    return settings_for


def check_report_files(reports: ReportFiles) -> None:
    """Refuse a report file that could not be written before the work that fills it starts."""
    for path in (reports.junit, reports.markdown):
        if path is not None:
            writer.check_single_file(path)


def write_reports(reports: ReportFiles, options: BuildOptions, *, report: GateReport) -> None:
    """The JUnit file and the Markdown summary, where asked for."""
    if reports.junit is not None:
        write_report(reports.junit, gate_report.junit_xml(report))
    if reports.markdown is not None:
        write_report(reports.markdown, gate_report.gate_markdown(report_kit(options), report))


def gate(
    names: list[str], options: BuildOptions, *, reports: ReportFiles = ReportFiles(),
    truths: ServerTruths = NO_TRUTHS,
) -> GateReport:
    """Build's inputs (the archive included, read and never replaced), checks, figures, health and
    gate, without a site; the reports where asked for."""
    check_report_files(reports)
    inputs, options = with_sample_default(names, options)
    inputs, table_inputs = split_inputs(inputs)
    tables = check_tables(table_inputs)
    truths = truths_of(WholeRunTables(tables.tables), truths)
    inputs, archive_index = with_archive(inputs, options)
    with scratch_folder() as work:
        swept = swept_for_figures(inputs, options, work=work, archive_index=archive_index, truths=truths)
        swept = with_tables(swept, tables, names=[source.name for source in inputs])
    latencies = server_latencies(swept.figures.latency_calls, latency_settings(options))
    healths = server_healths(swept.figures.servers, options=options, latencies=latencies)
    report = GateReport(evaluate(healths, options, time_range=swept.figures.time_range, latencies=latencies),
                        swept.tally.rows_read,
                        swept.tally.rows_rejected, swept.tally.problems, options.min_calls, latencies)
    write_reports(reports, options, report=report)
    return report


def gate_output(report: GateReport, output_format: str) -> str:
    """``gate``'s table as ``text`` or ``json``."""
    return gate_report.gate_json(report) if output_format == "json" else gate_report.gate_text(report)


def gate_failure_lines(result: GateResult) -> list[str]:
    """One line per failing server, for stderr."""
    return gate_report.stderr_lines(result)


def _worst_first(servers: Sequence[ServerStats], gate: GateResult) -> list[ServerStats]:
    """The servers in the order the gate ranked their health: worst first."""
    by_server = {stats.server: stats for stats in servers}
    return [by_server[health.server] for health in gate.servers]


def server_healths(servers: list[ServerStats], *, options: BuildOptions,
                   latencies: dict[str, ServerLatency] | None = None) -> dict[str, ServerHealth]:
    """Each server's verdict, changes and cancellation figures, against its failure budget; a reliable
    server whose latency verdict is slow is shown slow."""
    healths = {}
    for stats in servers:
        health = server_health(stats, budget=options.budget_for(stats.server), min_calls=options.min_calls)
        latency = (latencies or {}).get(stats.server)
        if latency is not None:
            health = with_latency_verdict(health, latency.latency.verdict, slow=latency.latency.slow)
        healths[stats.server] = health
    return healths


def _input_cache(options: BuildOptions, out: Path) -> InputCache | None:
    """The input cache of this site in the cache folder, or None with ``--no-cache``."""
    if not options.use_cache:
        return None
    root = _cache_root(options)
    try:
        return InputCache(open_site_entry(root, out), cache_salt(options))
    except OSError as error:
        if options.cache_dir is not None:  # asked for by name: say so rather than go on without
            raise OutputError(f"{options.cache_dir}: cannot be used as the cache folder: {error.strerror}") from None
        return None  # the default place is not writable: a build without a cache is only slower


def _cache_root(options: BuildOptions) -> Path:
    """The folder the input caches live in: ``--cache-dir``, else the user's cache folder."""
    return options.cache_dir if options.cache_dir is not None else default_cache_root()


def _prune_caches(cache: InputCache | None, options: BuildOptions, *, out: Path) -> None:
    if cache is None:
        return
    cache.prune()
    root = _cache_root(options)
    prune_cache_root(root, current=site_entry(root, out))


def _keep_since(spill: Spill, keep_days: int | None) -> int | None:
    """The oldest last step a run may have: ``keep_days`` before the newest step of the data."""
    if keep_days is None:
        return None
    newest = [value for spilled in spill.inputs if (value := spilled.newest_crdate()) is not None]
    return max(newest) - keep_days * DAY_SECONDS if newest else None


@contextmanager
def _stage(timings: dict[str, float], name: str) -> Iterator[None]:
    began = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - began


def _close_runs(run: str, runs: list[str]) -> list[str]:
    """Up to three runs whose id is close to ``run``, ignoring case (a uuid copied in capitals)."""
    by_folded: dict[str, str] = {}
    for candidate in runs:
        by_folded.setdefault(candidate.casefold(), candidate)
    close = difflib.get_close_matches(run.casefold(), list(by_folded), n=3, cutoff=0.6)
    return [by_folded[match] for match in close]


def timeline(
    run: str, names: list[str], *, out: Path, language: str, options: BuildOptions,
    output_format: str = "html", truths: ServerTruths = NO_TRUTHS,
) -> list[Problem]:
    """Write one run's timeline as a single self-contained HTML file, as Markdown or as JSON;
    return the problems that concern it (its rows' errors and warnings, and every row that
    cannot be read).

    Only the rows that may be the run's are read and checked (``check_input_for_run``),
    or, for a file the input cache holds (``options.cache_dir``, by default the user's cache
    folder where build keeps it, or a folder in it), the run's bucket of its entry.
    Standard input, which can be read only once, is checked whole, in bounded memory.
    """
    inputs, options = with_sample_default(names, options)
    inputs, table_inputs = split_inputs(inputs)
    tables = check_tables(table_inputs)
    whole_tables = WholeRunTables(tables.tables)
    truths = truths_of(whole_tables, truths)
    runs: list[str] | None = None
    # The run as asked for, or as the events name it: its row's uid or uuid.
    candidates = whole_tables.run_keys(run if run.isdigit() else None, run) or [run]
    for candidate in candidates:
        if any(source.path is None for source in inputs):
            checked, runs = _whole_check_of_run(candidate, inputs, known_servers=options.known_servers)
        else:
            caches = _cache_root(options) if options.use_cache else None
            checked = _check_run(candidate, inputs, options=options, cache_folder=caches)
        if checked.steps.num_rows:
            run = candidate
            break
    steps = with_server_truths(checked.steps, truths)
    if steps.num_rows == 0:
        if runs is None:
            _checked, runs = _whole_check_of_run(run, inputs, known_servers=options.known_servers)
        close = _close_runs(run, runs)
        hint = f"; did you mean {', '.join(repr(match) for match in close)}?" if close else ""
        raise UnknownRunError(f"run {run!r} is not in the input{hint}")
    summary = run_summaries(steps, tool_steps(steps))[0]
    whole = whole_tables.joined([run])
    header = whole.header(run, run_spend(steps).get(run))
    calls, decisions = whole.entries(run)
    problems = checked.problems + [problem for problem in tables.problems if problem.run in candidates]
    kit = page_kits(replace(options, languages=(language,)), None, whole=whole,
                    denials_shown=summary.counts.denied > 0 or bool(whole.present))[language]
    if output_format == "json":
        writer.write_single_file(out, timeline_formats.timeline_json(
            summary, steps, show_approvers=options.show_approvers, header=header, calls=calls, decisions=decisions))
        return problems
    if output_format == "md":
        writer.write_single_file(out, timeline_formats.timeline_markdown(
            kit, summary, steps=steps, show_approvers=options.show_approvers, header=header, calls=calls,
            decisions=decisions))
        return problems
    writer.write_single_file(out, _standalone_run_page(kit, run, steps=steps, summary=summary, whole=whole,
                                                       header=header))
    return problems


def _standalone_run_page(kit: PageKit, run: str, *, steps: pa.Table, summary: RunSummary, whole: WholeRuns,
                         header: RunHeader | None) -> str:
    """The run's page as one file, its timeline merged as a build's run pages are."""
    plan = TimelinePlan(steps, {kit.language: kit}, server_href={})
    if whole.merged:
        merged = MergedTimeline(plan, [RunSpan(run, 0, steps.num_rows)], whole=whole, zone=kit.format)
        markup = merged.rows(kit, first=0, last=1)
    else:
        markup = plan.rows(kit.language, start=0, stop=steps.num_rows)
    return pages.run_page(kit, summary, rows=markup, span=(0, len(markup)), server_href={}, standalone=True,
                          header=header,
                          steps=RunSteps(plan.step_columns, 0, steps.num_rows))


def cache_salt(options: BuildOptions) -> str:
    """What an input cache's entries are keyed by besides the file: the code (not the templates
    or catalogs, which shape pages, not checked rows) and the server list."""
    return f"{code_key()}|{sorted(options.known_servers)!r}"


def _check_run(
    run: str, inputs: list[Input], *, options: BuildOptions, cache_folder: Path | None
) -> RunChecked:
    """The run's rows of each input, from an input cache's entry where one holds the file."""
    salt = cache_salt(options) if cache_folder is not None else ""
    caches = [InputCache(folder, salt) for folder in cache_folders_in(cache_folder)] if cache_folder else []
    parts = [
        _cached_part(caches, source, input_index=index, run=run)
        or check_input_for_run(run, source, input_index=index, known_servers=options.known_servers)
        for index, source in enumerate(inputs)
    ]
    return settle_run(run, parts, names=[source.name for source in inputs])


def _cached_part(caches: list[InputCache], source: Input, *, input_index: int, run: str) -> RunPart | None:
    """The run's part of an input file from the first cache that holds the file (its key is the
    same in every cache: the file and the salt)."""
    key = caches[0].key(source.path) if caches and source.path is not None else None
    for cache in caches if key is not None else []:
        assert key is not None
        cached = cached_run_steps(cache, key, input_index=input_index, name=source.name, run=run)
        if cached is not None:
            return RunPart(*cached)
    return None


def _whole_check_of_run(
    run: str, inputs: list[Input], *, known_servers: Iterable[str]
) -> tuple[RunChecked, list[str]]:
    """The run as a check of every row finds it, a partition at a time, and every run kept (sorted)."""
    runs: set[str] = set()
    steps = CHECKED_SCHEMA.empty_table()
    with checked_spill(inputs, known_servers) as spill:
        for partition in checked_partitions(spill):
            runs.update(pc.unique(partition.column("run")).to_pylist())
            if run in runs and steps.num_rows == 0:
                steps = partition.filter(pc.equal(partition.column("run"), run))
        problems = [problem for problem in spill.tally.problems if concerns_run(problem, run)]
    return RunChecked(steps, problems), sorted(runs)


# ---------------------------------------------------------------- figures without a site: diff and gate


def with_archive(inputs: list[Input], options: BuildOptions) -> tuple[list[Input], int | None]:
    """The inputs and, where ``--archive`` names an existing archive, the archive as one more input (and its index)."""
    if options.archive is None or not check_archive(options.archive):
        return inputs, None
    return inputs + [resolve_input(str(options.archive))], len(inputs)


def swept_for_figures(
    inputs: list[Input], options: BuildOptions, *, work: Path, archive_index: int | None = None,
    truths: ServerTruths = NO_TRUTHS,
) -> Swept:
    """The inputs checked and swept along build's path, for the figures alone (``gate``, ``diff``)."""
    spill = spill_inputs(inputs, options.known_servers, work=work, cache=None, timings={}, archive_index=archive_index)
    return _swept(spill, options, work=work, cache=None, archive_index=archive_index, pages=False, truths=truths)


def _swept(
    spill: Spill, options: BuildOptions, *, work: Path, cache: InputCache | None, archive_index: int | None,
    pages: bool = True, truths: ServerTruths = NO_TRUTHS,
) -> Swept:
    """The spilled inputs swept: an archive merged by run, ``--keep-days`` applied, duplicates
    and warnings found, the figures added up (with what the other tables say of servers),
    and (``pages``) the kept steps written."""
    merge = MergeRule(archive_index, _keep_since(spill, options.keep_days))
    return sweep_partitions(spill, timezone_name=options.timezone_name, work=work, cache=cache, jobs=options.jobs,
                            merge=merge, pages=pages, truths=truths)


def input_side(swept: Swept, names: list[str]) -> InputSide:
    return InputSide(tuple(names), swept.tally.rows_read, swept.tally.rows_rejected)


def diff(
    baseline: list[str], current: list[str], *, options: BuildOptions, truths: ServerTruths = NO_TRUTHS,
) -> DiffReport:
    """Compare the servers and tools of two sets of exports (see ``aggregate.diff``), both
    with the same ``truths`` where given (the catalogue is the installation's, not one export's),
    else each with what its own tables say."""
    baseline_inputs, baseline_tables = split_inputs(resolve_inputs(baseline))
    current_inputs, current_tables = split_inputs(resolve_inputs(current))
    checked_baseline, checked_current = check_tables(baseline_tables), check_tables(current_tables)
    if truths is NO_TRUTHS:  # each side's own tables say what they say of its runs
        baseline_truths = truths_of(WholeRunTables(checked_baseline.tables), truths)
        current_truths = truths_of(WholeRunTables(checked_current.tables), truths)
    else:
        baseline_truths = current_truths = truths
    with scratch_folder() as baseline_work:
        baseline_swept = swept_for_figures(baseline_inputs, options, work=baseline_work, truths=baseline_truths)
        baseline_swept = with_tables(baseline_swept, checked_baseline,
                                     names=[source.name for source in baseline_inputs])
    with scratch_folder() as current_work:
        current_swept = swept_for_figures(current_inputs, options, work=current_work, truths=current_truths)
        current_swept = with_tables(current_swept, checked_current, names=[source.name for source in current_inputs])
    exports = diff_exports(baseline_swept.figures.by_server, current_swept.figures.by_server)
    settings = latency_settings(options)
    slow_servers, slow_tools = slow_diff(slow_counts(baseline_swept.figures.latency_calls, settings),
                                         slow_counts(current_swept.figures.latency_calls, settings))
    return DiffReport(
        replace(exports, slow_servers=slow_servers, slow_tools=slow_tools),
        input_side(baseline_swept, [source.name for source in baseline_inputs]),
        input_side(current_swept, [source.name for source in current_inputs]),
    )


def diff_output(report: DiffReport, output_format: str, *, options: BuildOptions) -> str:
    """The report as ``text``, ``json`` or ``markdown`` (in the first of the options' languages)."""
    if output_format == "json":
        return diff_report.diff_json(report)
    if output_format == "markdown":
        return diff_report.diff_markdown(report_kit(options), report)
    return diff_report.diff_text(report)


def report_kit(options: BuildOptions) -> PageKit:
    """The kit a Markdown report is written with: the first language asked for."""
    language = options.languages[0]
    return page_kits(replace(options, languages=(language,)), None)[language]


def write_report(out: Path, text: str) -> None:
    """A report file (Markdown, JUnit XML), written whole or not at all."""
    writer.write_single_file(out, text)
