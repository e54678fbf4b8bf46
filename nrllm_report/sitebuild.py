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
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from . import pages
from .aggregate import RunSummary
from .render import TIMELINE_COLUMNS, PageKit
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


SpanResults = tuple[list[tuple[str, str, bool]], float, float]


def _render_spans(spans: list[RunSpan]) -> SpanResults:
    """Render (or reuse) the pages of consecutive runs.

    Returns (path, key, reused) for each page, and the seconds spent rendering and writing.
    """
    job = _JOB[0]
    render_seconds = write_seconds = 0.0
    first, last = spans[0].start, spans[-1].stop
    window = job.steps.slice(first, last - first)
    columns = {name: window.column(name).to_pylist() for name in TIMELINE_COLUMNS}
    server_href = pages.server_links(job.server_slugs)
    markup = {language: kit.timeline.row_markup(window, server_href) for language, kit in job.kits.items()}
    results = []
    for span in spans:
        start, stop = span.start - first, span.stop - first
        data_key = hashlib.sha256(
            repr([columns[name][start:stop] for name in TIMELINE_COLUMNS]).encode("utf-8", "surrogatepass")
        ).hexdigest()
        for language, path in span.paths:
            key = page_key(language, job.options, data_key)
            began = time.perf_counter()
            reused = job.site.reuse_claimed(path, key)
            if not reused:
                text = pages.run_page(job.kits[language], job.summaries[span.run], markup[language],
                                      (start, stop), server_href)
                rendered_at = time.perf_counter()
                render_seconds += rendered_at - began
                job.site.write_claimed(path, text)
                began = rendered_at
            write_seconds += time.perf_counter() - began
            results.append((path, key, reused))
    return results, render_seconds, write_seconds


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
    _JOB[:] = [RenderJob(site, kits, steps, summaries, {s.server: s.slug for s in data.servers}, options)]
    batches = _batches(spans, BATCH_ROWS)
    rendered = reused = 0
    progress.start(len(spans) * len(kits))
    try:
        if options.jobs > 1 and len(spans) * len(kits) >= PARALLEL_THRESHOLD:
            context = multiprocessing.get_context("fork")
            with context.Pool(options.jobs, initializer=_ignore_interrupts) as pool:
                for batch_results in pool.imap(_render_spans, batches):
                    rendered, reused = _record(batch_results, manifest, progress, timings, rendered, reused)
        else:
            for batch in batches:
                rendered, reused = _record(_render_spans(batch), manifest, progress, timings, rendered, reused)
    finally:
        _JOB.clear()
        progress.finish()
    return rendered, reused


def _record(
    span_results: SpanResults, manifest: dict[str, str], progress: "Progress", timings: dict[str, float],
    rendered: int, reused: int,
) -> tuple[int, int]:
    results, render_seconds, write_seconds = span_results
    timings["render (cpu)"] = timings.get("render (cpu)", 0.0) + render_seconds
    timings["write (cpu)"] = timings.get("write (cpu)", 0.0) + write_seconds
    for path, key, was_reused in results:
        manifest[path] = key
        if was_reused:
            reused += 1
        else:
            rendered += 1
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
