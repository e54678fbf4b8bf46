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
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from . import pages
from .aggregate import RunSummary
from .render import TIMELINE_COLUMNS, PageKit, TimelinePlan
from .resources import PACKAGE_DIR, resource_path
from .writer import SiteWriter

if TYPE_CHECKING:
    from .pipeline import BuildOptions, Progress

PARALLEL_THRESHOLD = 2_000  # pages; below this, forking costs more than it saves
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


def page_key(language: str, options: "BuildOptions", data_key: str) -> str:
    settings = repr((options.title, options.timezone_name, options.languages, language))
    return hashlib.sha256(f"{version_key()}|{settings}|{data_key}".encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class RunSpan:
    """A run's rows in the table sorted by (run, sequence), and its pages' paths by language."""

    run: str
    start: int
    stop: int
    paths: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class RenderJob:
    """Everything a worker needs; set before forking, so the workers share it unpickled."""

    site: SiteWriter
    kits: dict[str, PageKit]
    steps: pa.Table
    summaries: dict[str, RunSummary]
    server_slugs: dict[str, str]
    options: "BuildOptions"
    timeline: TimelinePlan


_JOB: list[RenderJob] = []


def run_spans(steps: pa.Table, summaries: dict[str, RunSummary], languages: Sequence[str]) -> list[RunSpan]:
    """Where each run's rows start and stop in the sorted table."""
    if steps.num_rows == 0:
        return []
    run = steps.column("run")
    changes = pc.not_equal(run.slice(1), run.slice(0, steps.num_rows - 1))
    starts = [0] + [position + 1 for position in pc.indices_nonzero(changes).to_pylist()]
    stops = starts[1:] + [steps.num_rows]
    runs = pc.take(run, pa.array(starts)).to_pylist()
    return [
        RunSpan(name, start, stop, tuple((language, pages.run_page_path(language, summaries[name]))
                                         for language in languages))
        for name, start, stop in zip(runs, starts, stops)
    ]


# (path, content key, page bytes or None when the previous page was reused), render seconds
SpanResults = tuple[list[tuple[str, str, bytes | None]], float]


def _render_spans(spans: list[RunSpan]) -> SpanResults:
    """Render the pages of consecutive runs, or link the previous build's where unchanged.

    The pages come back as bytes for the parent to write: writing does not get faster
    with a second process (files made in one folder contend for it), rendering does.
    """
    job = _JOB[0]
    began = time.perf_counter()
    first, last = spans[0].start, spans[-1].stop
    window = job.steps.slice(first, last - first)
    columns = {name: window.column(name).to_pylist() for name in TIMELINE_COLUMNS}
    server_href = pages.server_links(job.server_slugs)
    markup: dict[str, list[str]] = {}
    results: list[tuple[str, str, bytes | None]] = []
    for span in spans:
        start, stop = span.start - first, span.stop - first
        data_key = hashlib.sha256(
            repr([columns[name][start:stop] for name in TIMELINE_COLUMNS]).encode("utf-8", "surrogatepass")
        ).hexdigest()
        for language, path in span.paths:
            key = page_key(language, job.options, data_key)
            if job.site.reuse_claimed(path, key):
                results.append((path, key, None))
                continue
            if language not in markup:
                markup[language] = job.timeline.rows(language, first, last)
            text = pages.run_page(job.kits[language], job.summaries[span.run], markup[language],
                                  (start, stop), server_href)
            results.append((path, key, text.encode("utf-8")))
    return results, time.perf_counter() - began


def _ignore_interrupts() -> None:
    """Workers leave Ctrl-C to the parent, which stops them and cleans up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _batches(spans: list[RunSpan], rows_per_batch: int) -> list[list[RunSpan]]:
    batches: list[list[RunSpan]] = []
    current: list[RunSpan] = []
    rows = 0
    for span in spans:
        current.append(span)
        rows += span.stop - span.start
        if rows >= rows_per_batch:
            batches.append(current)
            current, rows = [], 0
    if current:
        batches.append(current)
    return batches


def render_run_pages(
    site: SiteWriter,
    kits: dict[str, PageKit],
    steps: pa.Table,
    data: pages.SiteData,
    options: "BuildOptions",
    manifest: dict[str, str],
    progress: "Progress",
    timings: dict[str, float] | None = None,
) -> tuple[int, int]:
    """Every run page in every language, reused where unchanged; returns (rendered, reused).

    ``timings`` gets the seconds (summed over workers) spent rendering and writing.
    """
    timings = {} if timings is None else timings
    summaries = {summary.run: summary for summary in data.summaries}
    spans = run_spans(steps, summaries, list(kits))
    for span in spans:
        for _language, path in span.paths:
            site.claim(path)
    server_slugs = {stats.server: stats.slug for stats in data.servers}
    plan = TimelinePlan(steps, kits, pages.server_links(server_slugs))
    _JOB[:] = [RenderJob(site, kits, steps, summaries, server_slugs, options, plan)]
    batches = _batches(spans, BATCH_ROWS)
    rendered = reused = 0
    progress.start(len(spans) * len(kits))
    try:
        if options.jobs > 1 and len(spans) * len(kits) >= PARALLEL_THRESHOLD:
            context = multiprocessing.get_context("fork")
            with context.Pool(options.jobs, initializer=_ignore_interrupts) as pool:
                # A few batches in flight: enough to keep the workers busy while this
                # process writes, few enough that rendered pages do not pile up in memory.
                in_flight: deque[Any] = deque()
                for batch in batches:
                    in_flight.append(pool.apply_async(_render_spans, (batch,)))
                    if len(in_flight) > 2 * options.jobs:
                        rendered, reused = _record(site, in_flight.popleft().get(), manifest, progress, timings,
                                                   rendered, reused)
                while in_flight:
                    rendered, reused = _record(site, in_flight.popleft().get(), manifest, progress, timings,
                                               rendered, reused)
        else:
            for batch in batches:
                rendered, reused = _record(site, _render_spans(batch), manifest, progress, timings,
                                           rendered, reused)
    finally:
        _JOB.clear()
        progress.finish()
    return rendered, reused


def _record(
    site: SiteWriter, span_results: SpanResults, manifest: dict[str, str], progress: "Progress",
    timings: dict[str, float], rendered: int, reused: int,
) -> tuple[int, int]:
    """Write a batch's pages, note their keys in the manifest, and count them."""
    results, render_seconds = span_results
    began = time.perf_counter()
    for path, key, content in results:
        manifest[path] = key
        if content is None:
            reused += 1
        else:
            site.write_claimed_bytes(path, content)
            rendered += 1
    timings["render (worker seconds)"] = timings.get("render (worker seconds)", 0.0) + render_seconds
    timings["write"] = timings.get("write", 0.0) + time.perf_counter() - began
    progress.advance(len(results))
    return rendered, reused


def write_overview_pages(site: SiteWriter, kits: dict[str, PageKit], data: pages.SiteData) -> None:
    """Indexes, servers, problems, the language choice, the stylesheet and summary.json."""
    first_kit = next(iter(kits.values()))
    site.write_text("index.html", pages.language_choice_page(first_kit, data.languages))
    site.write_text(pages.STYLESHEET_PATH, pages.stylesheet())
    site.write_text(pages.FAVICON_PATH, pages.favicon())
    site.write_text(pages.SUMMARY_PATH, pages.summary_json(data))
    run_slugs = {summary.run: summary.slug for summary in data.summaries}
    run_order = {summary.run: position for position, summary in enumerate(data.summaries)}
    for kit in kits.values():
        for path, text in pages.run_index_pages(kit, data):
            site.write_text(path, text)
        site.write_text(*pages.servers_index_page(kit, data))
        for stats in data.servers:
            site.write_text(*pages.server_page(kit, stats, run_slugs, run_order))
        for path, text in pages.problems_pages(kit, data):
            site.write_text(path, text)


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 8))
