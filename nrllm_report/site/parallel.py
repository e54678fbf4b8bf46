"""Rendering the site's pages into a SiteWriter: run pages incrementally and in parallel.

A run page's content key hashes everything its bytes depend on: the code, templates
and catalogs (``version_key``), the page's settings and the run's steps. A previous
build's page with the same key is reused as it is; the others are rendered, by
forked workers when there are enough of them to pay for the processes.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import signal
import time
from collections import deque
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..site import pages
from ..aggregate.figures import RunSummary
from ..site.render import TIMELINE_COLUMNS, PageKit, TimelinePlan
from ..core.resources import PACKAGE_DIR, resource_path
from ..output.writer import SiteWriter

if TYPE_CHECKING:
    from ..pipeline import BuildOptions, Progress

PARALLEL_THRESHOLD = 2_000  # pages; below this, forking costs more than it saves
FIELD_END = "\x1f"
BATCH_ROWS = 32_768  # steps a worker renders at a time: bounds the Python objects it holds


@lru_cache(maxsize=1)
def version_key() -> str:
    """A hash of everything that shapes a page besides its data: code, templates, catalogs."""
    digest = hashlib.sha256()
    roots = [PACKAGE_DIR, resource_path("templates"), resource_path("translations")]
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in {".py", ".html", ".css", ".po"}:
                digest.update(path.relative_to(root).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def page_key_prefix(language: str, options: "BuildOptions") -> bytes:
    """What a run page's key hashes besides its rows: the code and the page's settings.

    Nothing else from other runs shapes a run page: the servers it links are those of
    its own tool steps, and every one of them has a page.
    """
    settings = repr((options.title, options.timezone_name, options.languages, language))
    return f"{version_key()}|{settings}|".encode("utf-8", "surrogatepass")


def page_key(prefix: bytes, data_key: str) -> str:
    return hashlib.sha256(prefix + data_key.encode("ascii")).hexdigest()


@dataclass(frozen=True, slots=True)
class RunSpan:
    """A run's rows in the table sorted by (run, sequence)."""

    run: str
    start: int
    stop: int


@dataclass(frozen=True, slots=True)
class PageWork:
    """A run page to render: its language, path, content key, and its run's rows."""

    language: str
    path: str
    key: str
    span: RunSpan


@dataclass(frozen=True)
class RenderJob:
    """Everything the workers need; set before forking, so that they share it unpickled."""

    site: SiteWriter
    kits: dict[str, PageKit]
    summaries: dict[str, RunSummary]
    server_href: dict[str, str]
    partition_paths: list[Path]
    manifest: dict[str, str]  # every run page's path and content key
    pages_done: Any = None  # a shared counter the workers add to, for the progress bar
    plan: TimelinePlan | None = None  # the rows of the partition being rendered


_JOB: list[RenderJob] = []


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
        if pa.types.is_string(column.type):
            column = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), FIELD_END, "\\e")
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


def render_run_pages(
    site: SiteWriter,
    kits: dict[str, PageKit],
    partitions: list[tuple[Path, list[str]]],
    data: pages.SiteData,
    options: "BuildOptions",
    manifest: dict[str, str],
    progress: "Progress",
    timings: dict[str, float] | None = None,
) -> tuple[int, int]:
    """Every run page in every language, taken from the previous build where its content
    key is unchanged, rendered otherwise; returns (rendered, reused).

    ``partitions`` are the kept steps' files, each with the data key of each of its runs
    (``run_data_keys``). This process fills ``manifest`` and claims every path; the pages
    themselves are made a partition at a time, with many pages and more than one language
    by a forked worker per language. ``timings`` gets the seconds spent rendering (summed
    over workers) and writing.
    """
    timings = {} if timings is None else timings
    summaries = {summary.run: summary for summary in data.summaries}
    prefixes = {language: page_key_prefix(language, options) for language in kits}
    for path, data_keys in partitions:
        for span, data_key in zip(run_spans(read_steps(path).select(["run"])), data_keys, strict=True):
            for language in kits:
                page_path = pages.run_page_path(language, summaries[span.run])
                manifest[page_path] = page_key(prefixes[language], data_key)
                site.claim(page_path)
    server_href = pages.server_links({stats.server: stats.slug for stats in data.servers})
    job = RenderJob(site, kits, summaries, server_href, [path for path, _keys in partitions], manifest)
    progress.start(len(summaries) * len(kits))
    try:
        if options.jobs > 1 and len(kits) > 1 and len(summaries) * len(kits) >= PARALLEL_THRESHOLD:
            return _by_language(job, options, progress, timings)
        return _in_this_process(job, options, progress, timings)
    finally:
        progress.finish()


def _pages_of(job: RenderJob, number: int, languages: list[str]) -> tuple[pa.Table, list[PageWork], int]:
    """Partition ``number``'s steps and its pages in ``languages`` to render; the unchanged
    pages are linked from the previous build on the way. Returns (steps, pages, reused)."""
    steps = read_steps(job.partition_paths[number])
    work: list[PageWork] = []
    reused = 0
    for span in run_spans(steps.select(["run"])):
        summary = job.summaries[span.run]
        for language in languages:
            path = pages.run_page_path(language, summary)
            key = job.manifest[path]
            if job.site.reusable(path, key) and job.site.link_previous(path):
                reused += 1
            else:
                work.append(PageWork(language, path, key, span))
    return steps, work, reused


def _in_this_process(
    job: RenderJob, options: "BuildOptions", progress: "Progress", timings: dict[str, float]
) -> tuple[int, int]:
    """Partition by partition in this process; a partition with many pages (one language)
    is rendered by forked workers while this process writes."""
    rendered = reused = 0
    texts_made: dict[tuple[str, int], dict[Any, str]] = {}
    for number in range(len(job.partition_paths)):
        steps, work, linked = _pages_of(job, number, list(job.kits))
        reused += linked
        progress.advance(linked)
        if not work:
            continue
        steps, work = _only_rows_of(steps, work)
        _JOB[:] = [replace(job, plan=TimelinePlan(steps, job.kits, job.server_href, texts_made))]
        try:
            if options.jobs > 1 and len(work) >= PARALLEL_THRESHOLD:
                _render_in_pool(job.site, work, options, progress, timings)
            else:
                for batch in _batches(work, BATCH_ROWS):
                    _write(job.site, _render_pages(batch), progress, timings)
        finally:
            _JOB.clear()
        rendered += len(work)
    return rendered, reused


def _render_in_pool(
    site: SiteWriter, work: list[PageWork], options: "BuildOptions", progress: "Progress", timings: dict[str, float]
) -> None:
    """One language's pages: forked workers render, this process writes."""
    with forked_pool(options.jobs) as pool:
        # A few batches in flight: enough to keep the workers busy while this
        # process writes, few enough that rendered pages do not pile up in memory.
        in_flight: deque[Any] = deque()
        for batch in _batches(work, BATCH_ROWS):
            in_flight.append(pool.apply_async(_render_pages, (batch,)))
            if len(in_flight) > 2 * options.jobs:
                _write(site, in_flight.popleft().get(), progress, timings)
        while in_flight:
            _write(site, in_flight.popleft().get(), progress, timings)


def _by_language(
    job: RenderJob, options: "BuildOptions", progress: "Progress", timings: dict[str, float]
) -> tuple[int, int]:
    """Each worker links and renders whole languages, every partition: files made in one
    folder by two processes contend for it, files made in two folders do not. A worker
    keeps the texts it formatted from one partition to the next."""
    languages = list(job.kits)
    groups = [languages[index :: options.jobs] for index in range(min(options.jobs, len(languages)))]
    counter = FORK.Value("q", 0)
    _JOB[:] = [replace(job, pages_done=counter)]
    reported = rendered = reused = 0
    try:
        with forked_pool(len(groups)) as pool:
            pending = pool.map_async(_language_pages, groups)
            while not pending.ready():
                pending.wait(0.2)
                done = counter.value
                progress.advance(done - reported)
                reported = done
            for made, linked, render_seconds, write_seconds in pending.get():
                rendered, reused = rendered + made, reused + linked
                timings["render (worker seconds)"] = timings.get("render (worker seconds)", 0.0) + render_seconds
                timings["write (worker seconds)"] = timings.get("write (worker seconds)", 0.0) + write_seconds
    finally:
        _JOB.clear()
    progress.advance(counter.value - reported)
    return rendered, reused


def _language_pages(languages: list[str]) -> tuple[int, int, float, float]:
    """In a worker: every page of ``languages``; returns the pages rendered and reused and
    the seconds spent rendering and writing."""
    job = _JOB[0]
    rendered = reused = 0
    render_seconds = write_seconds = 0.0
    for language in languages:
        kits = {language: job.kits[language]}
        texts_made: dict[tuple[str, int], dict[Any, str]] = {}
        for number in range(len(job.partition_paths)):
            steps, work, linked = _pages_of(job, number, [language])
            reused += linked
            with job.pages_done.get_lock():
                job.pages_done.value += linked
            if not work:
                continue
            began = time.perf_counter()
            steps, work = _only_rows_of(steps, work)
            _JOB[:] = [replace(job, plan=TimelinePlan(steps, kits, job.server_href, texts_made))]
            render_seconds += time.perf_counter() - began
            for batch in _batches(work, BATCH_ROWS):
                results, seconds = _render_pages(batch)
                written = time.perf_counter()
                for page, content in results:
                    job.site.write_claimed_bytes(page.path, content)
                render_seconds += seconds
                write_seconds += time.perf_counter() - written
                with job.pages_done.get_lock():
                    job.pages_done.value += len(results)
            rendered += len(work)
            del steps, work
    return rendered, reused, render_seconds, write_seconds


def _render_pages(work: list[PageWork]) -> tuple[list[tuple[PageWork, bytes]], float]:
    """Render pages of consecutive runs of the current plan's table; returns their bytes
    and the seconds it took."""
    job = _JOB[0]
    assert job.plan is not None
    began = time.perf_counter()
    first, last = work[0].span.start, work[-1].span.stop
    markup: dict[str, list[str]] = {}
    results = []
    for page in work:
        if page.language not in markup:
            markup[page.language] = job.plan.rows(page.language, first, last)
        text = pages.run_page(job.kits[page.language], job.summaries[page.span.run], markup[page.language],
                              (page.span.start - first, page.span.stop - first), job.server_href)
        results.append((page, text.encode("utf-8")))
    return results, time.perf_counter() - began


def _only_rows_of(steps: pa.Table, work: list[PageWork]) -> tuple[pa.Table, list[PageWork]]:
    """The rows of the runs to render, and the pages with their spans in that smaller table,
    in table order (all rows: as they are)."""
    work = sorted(work, key=lambda page: page.span.start)
    runs: dict[str, RunSpan] = {}
    for page in work:
        runs.setdefault(page.span.run, page.span)
    if sum(span.stop - span.start for span in runs.values()) == steps.num_rows:
        return steps, work
    positions: list[int] = []
    moved: dict[str, RunSpan] = {}
    for run, span in runs.items():
        moved[run] = RunSpan(run, len(positions), len(positions) + span.stop - span.start)
        positions.extend(range(span.start, span.stop))
    subset = steps.take(pa.array(positions, pa.int64()))
    return subset, [replace(page, span=moved[page.span.run]) for page in work]


def _write(
    site: SiteWriter, rendered: tuple[list[tuple[PageWork, bytes]], float], progress: "Progress",
    timings: dict[str, float],
) -> None:
    results, render_seconds = rendered
    began = time.perf_counter()
    for page, content in results:
        site.write_claimed_bytes(page.path, content)
    timings["render (worker seconds)"] = timings.get("render (worker seconds)", 0.0) + render_seconds
    timings["write"] = timings.get("write", 0.0) + time.perf_counter() - began
    progress.advance(len(results))


FORK = multiprocessing.get_context("fork")


def forked_pool(processes: int) -> Any:
    """A pool of forked workers, which see what this process set before it (no pickling)
    and leave Ctrl-C to this process, which stops them and cleans up."""
    return FORK.Pool(processes, initializer=_ignore_interrupts)


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _batches(work: list[PageWork], rows_per_batch: int) -> list[list[PageWork]]:
    batches: list[list[PageWork]] = []
    current: list[PageWork] = []
    rows = 0
    for page in work:
        current.append(page)
        rows += page.span.stop - page.span.start
        if rows >= rows_per_batch:
            batches.append(current)
            current, rows = [], 0
    if current:
        batches.append(current)
    return batches


@dataclass(frozen=True)
class OverviewJob:
    """What a worker needs to write one language's overview pages; set before forking."""

    site: SiteWriter
    kits: dict[str, PageKit]
    data: pages.SiteData
    run_slugs: dict[str, str]
    run_order: dict[str, int]


_OVERVIEW: list[OverviewJob] = []


def write_overview_pages(site: SiteWriter, kits: dict[str, PageKit], data: pages.SiteData, jobs: int = 1) -> None:
    """Indexes, servers, problems, the language choice, the stylesheet and summary.json.

    With many runs and more than one language, forked workers take whole languages,
    as for the run pages: each writes its own language's folder.
    """
    first_kit = next(iter(kits.values()))
    site.write_text("index.html", pages.language_choice_page(first_kit, data.languages))
    site.write_text(pages.STYLESHEET_PATH, pages.stylesheet())
    site.write_text(pages.FAVICON_PATH, pages.favicon())
    site.write_text(pages.SUMMARY_PATH, pages.summary_json(data))
    run_slugs = {summary.run: summary.slug for summary in data.summaries}
    run_order = {summary.run: position for position, summary in enumerate(data.summaries)}
    _OVERVIEW[:] = [OverviewJob(site, kits, data, run_slugs, run_order)]
    try:
        if jobs > 1 and len(kits) > 1 and len(data.summaries) * len(kits) >= PARALLEL_THRESHOLD:
            with forked_pool(min(jobs, len(kits))) as pool:
                pool.map(_write_language_overview, list(kits), chunksize=1)
        else:
            for language in kits:
                _write_language_overview(language)
    finally:
        _OVERVIEW.clear()


def _write_language_overview(language: str) -> None:
    job = _OVERVIEW[0]
    kit, data, site = job.kits[language], job.data, job.site
    for path, text in pages.run_index_pages(kit, data):
        site.write_text(path, text)
    site.write_text(*pages.servers_index_page(kit, data))
    for stats in data.servers:
        site.write_text(*pages.server_page(kit, stats, job.run_slugs, job.run_order))
    for path, text in pages.problems_pages(kit, data):
        site.write_text(path, text)


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
