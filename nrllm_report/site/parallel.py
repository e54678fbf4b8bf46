"""Rendering the site's pages into a SiteWriter: run pages incrementally and in parallel.

A run page's content key hashes everything its bytes depend on: the code, templates
and catalogs (``version_key``), the page's settings and the run's steps. A previous
build's page with the same key is reused as it is; the others are rendered, by
forked workers when there are enough of them to pay for the processes.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..aggregate.figures import RunSummary
from ..aggregate.whole_run import RunHeader, WholeRuns
from ..core.options import Progress
from ..core.resources import PACKAGE_DIR, files_key, resource_path
from ..core.workers import FORK, forked_map, free_memory_returned
from ..output.writer import SiteWriter
from ..store.runs import RunSpan, read_steps
from ..store.spill import KeptPartition
from . import pages, urls
from .filter_data import Vocabulary, filter_files, filter_script
from .filter_page import run_filter_context
from .kit import PageKit
from .run_groups import run_groups
from .timeline_plan import TimelinePlan
from .waterfall import RunSteps
from .whole_run import MergedTimeline

PARALLEL_THRESHOLD = 2_000  # pages; below this, forking costs more than it saves
BATCH_ROWS = 32_768  # steps a worker renders at a time: bounds the Python objects it holds


@lru_cache(maxsize=1)
def version_key() -> str:
    """A hash of everything that shapes a page besides its data: code, templates, catalogs.

    The code and the resources are hashed apart, so a wheel, which copies the templates and
    catalogs into the package, keys its pages as a checkout of the same files does.
    """
    return layout_key(PACKAGE_DIR, templates=resource_path("templates"), translations=resource_path("translations"))


def layout_key(package: Path, *, templates: Path, translations: Path) -> str:
    """``version_key`` of a package folder and its resource folders, wherever these lie."""
    code = files_key([package], {".py"})
    resources = files_key([templates, translations], {".html", ".css", ".po"})
    return hashlib.sha256(f"{code}|{resources}".encode()).hexdigest()


def page_key_prefix(language: str, kit: PageKit) -> bytes:
    """What a run page's key hashes besides its rows: the code and the page's settings.

    Nothing else from other runs shapes a run page: the servers it links are those of
    its own tool steps, and every one of them has a page.
    """
    settings = kit.settings
    shown = repr((settings.title, settings.timezone_name, settings.languages, language, settings.show_approvers))
    return f"{version_key()}|{shown}|".encode("utf-8", "surrogatepass")


def page_key(prefix: bytes, data_key: str) -> str:
    return hashlib.sha256(prefix + data_key.encode("ascii")).hexdigest()


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
    partitions: list[KeptPartition]
    manifest: dict[str, str]  # every run page's path and content key
    count_done: Callable[[int], None] = lambda pages: None  # pages done, told to the progress bar
    plan: TimelinePlan | None = None  # the rows of the partition being rendered
    headers: dict[str, RunHeader] = field(default_factory=dict)  # by run: its run row's header
    merged: MergedTimeline | None = None  # the plan's rows with provider calls and decisions, where the site has them


def render_run_pages(
    site: SiteWriter,
    kits: dict[str, PageKit],
    *,
    partitions: list[KeptPartition],
    data: pages.SiteData,
    jobs: int,
    manifest: dict[str, str],
    progress: Progress,
    timings: dict[str, float] | None = None,
) -> tuple[int, int]:
    """Every run page in every language, taken from the previous build where its content
    key is unchanged, rendered otherwise; returns (rendered, reused).

    ``partitions`` are the sweep's kept steps: each file with its runs' spans and data keys.
    This process fills ``manifest`` and claims every path; the pages themselves are made a
    partition at a time, with many pages by forked workers, each taking a share of every
    partition's runs in every language (``Share``). ``timings`` gets the seconds spent
    rendering (summed over workers) and writing.
    """
    timings = {} if timings is None else timings
    summaries = {summary.run: summary for summary in data.summaries}
    _claim_run_pages(site, kits, partitions=partitions, summaries=summaries, manifest=manifest, whole=data.whole)
    server_href = pages.server_links({stats.server: stats.slug for stats in data.servers})
    whole = data.whole
    headers = {run: header for run in whole.rows if run in summaries and (header := data.header(run)) is not None}
    job = RenderJob(site, kits, summaries, server_href, partitions, manifest, headers=headers)
    progress.start(len(summaries) * len(kits))
    try:
        if jobs > 1 and len(summaries) * len(kits) >= PARALLEL_THRESHOLD:
            return _by_share(job, jobs, progress=progress, timings=timings)
        return _in_this_process(replace(job, count_done=progress.advance), timings=timings)
    finally:
        progress.finish()


def _claim_run_pages(
    site: SiteWriter, kits: dict[str, PageKit], *, partitions: list[KeptPartition],
    summaries: dict[str, RunSummary], manifest: dict[str, str], whole: WholeRuns,
) -> None:
    """Each run page's path and content key into ``manifest``, its path claimed in ``site``; the
    key covers the run's rows of the other tables too, where the site has them."""
    prefixes = {language: page_key_prefix(language, kit) for language, kit in kits.items()}
    for partition in partitions:
        for span, data_key in zip(partition.spans, partition.keys, strict=True):
            whole_key = whole.page_key(span.run) if whole.present else ""
            for language in kits:
                page_path = pages.run_page_path(language, summaries[span.run])
                manifest[page_path] = page_key(prefixes[language], data_key + whole_key)
                site.claim(page_path)


def _pages_of(job: RenderJob, number: int, *, share: Share) -> tuple[pa.Table, list[PageWork], int]:
    """Partition ``number``'s steps and the pages of its ``share`` of runs to render, in every
    language, a run's pages one after the other; the unchanged pages are linked from the
    previous build on the way. Returns (steps, pages, reused)."""
    partition = job.partitions[number]
    steps = read_steps(partition.file())
    work: list[PageWork] = []
    reused = 0
    for span in share.of(partition.spans, rows=steps.num_rows):
        summary = job.summaries[span.run]
        for language in job.kits:
            path = pages.run_page_path(language, summary)
            key = job.manifest[path]
            if job.site.reusable(path, key) and job.site.link_previous(path):
                reused += 1
            else:
                work.append(PageWork(language, path, key, span))
    return steps, work, reused


@dataclass(frozen=True, slots=True)
class Share:
    """Which of a partition's runs a worker renders: the ``number``-th of ``of_shares`` runs of
    about equal rows, consecutive in the partition's file."""

    number: int = 0
    of_shares: int = 1

    def languages(self, languages: list[str]) -> list[str]:
        """The order in which this share writes a batch's languages: each worker starts at another,
        so that two workers mostly create files in different folders (on ext4, two processes
        creating files in one folder took 1.5 to 3.5 times as long as in two)."""
        turn = self.number % len(languages)
        return languages[turn:] + languages[:turn]

    def of(self, spans: list[RunSpan], *, rows: int) -> list[RunSpan]:
        """The runs of ``spans`` (a partition's, covering its ``rows``) whose first row falls in the share."""
        if self.of_shares == 1:
            return spans
        return [span for span in spans
                if self.number * rows <= span.start * self.of_shares < (self.number + 1) * rows]


def _in_this_process(job: RenderJob, *, timings: dict[str, float]) -> tuple[int, int]:
    """Every partition's pages rendered and written in this process."""
    rendered, reused, render_seconds, write_seconds = _share_pages(job, Share())
    _add_seconds(timings, render=render_seconds, write=write_seconds)
    return rendered, reused


def _add_seconds(timings: dict[str, float], *, render: float, write: float) -> None:
    """A share's render and write seconds added to the build's (summed over the workers, if any)."""
    for name, seconds in (("render (worker seconds)", render), ("write (worker seconds)", write)):
        timings[name] = timings.get(name, 0.0) + seconds


def _by_share(job: RenderJob, jobs: int, *, progress: Progress, timings: dict[str, float]) -> tuple[int, int]:
    """Each worker takes its share of every partition's runs and renders and writes their pages
    in every language: a partition is read, planned and its runs laid out on their waterfalls
    once for all languages, and the shares, of about equal rows, keep the workers equally busy."""
    counter = FORK.Value("q", 0)
    reported = 0

    def count_done(pages: int) -> None:
        """In a worker: add to the counter the parent reads (``report``)."""
        with counter.get_lock():
            counter.value += pages

    def report() -> None:
        nonlocal reported
        done = counter.value
        progress.advance(done - reported)
        reported = done

    rendered = reused = 0
    shares = [Share(number, jobs) for number in range(jobs)]
    for made, linked, render_seconds, write_seconds in forked_map(
        _share_pages, replace(job, count_done=count_done), items=shares, processes=jobs, on_wait=report
    ):
        rendered, reused = rendered + made, reused + linked
        _add_seconds(timings, render=render_seconds, write=write_seconds)
    report()
    return rendered, reused


def _share_pages(job: RenderJob, share: Share) -> tuple[int, int, float, float]:
    """A worker's (or this process's) share of every partition's pages; returns the pages
    rendered and reused and the seconds spent rendering and writing. The texts formatted
    for one partition are kept for the next."""
    totals = [0, 0, 0.0, 0.0]
    texts_made: dict[tuple[str, int], dict[Any, str]] = {}
    for number in range(len(job.partitions)):
        made = _share_of_partition(job, share, number=number, texts_made=texts_made)
        totals = [total + part for total, part in zip(totals, made)]
        free_memory_returned()
    rendered, reused, render_seconds, write_seconds = totals
    return int(rendered), int(reused), render_seconds, write_seconds


def _share_of_partition(
    job: RenderJob, share: Share, *, number: int, texts_made: dict[tuple[str, int], dict[Any, str]]
) -> tuple[int, int, float, float]:
    """One partition's pages of ``share``, every language, written as they are rendered."""
    steps, work, linked = _pages_of(job, number, share=share)
    job.count_done(linked)
    if not work:
        return 0, linked, 0.0, 0.0
    began = time.perf_counter()
    steps, work = _only_rows_of(steps, work)
    planned = _planned(job, steps, work=work, kits=job.kits, texts_made=texts_made)
    render_seconds = time.perf_counter() - began
    write_seconds = 0.0
    languages = share.languages(list(job.kits))
    for batch in _batches(work, BATCH_ROWS):
        seconds, written = _render_and_write(planned, batch, languages=languages)
        render_seconds += seconds
        write_seconds += written
        job.count_done(len(batch))
    return len(work), linked, render_seconds, write_seconds


def _planned(job: RenderJob, steps: pa.Table, *, work: list[PageWork], kits: dict[str, PageKit],
             texts_made: dict[tuple[str, int], dict[Any, str]]) -> RenderJob:
    """The job with the plan of a partition's rows to render (``work`` in table order), merged
    with the runs' provider calls and decisions where the site has them."""
    plan = TimelinePlan(steps, kits, server_href=job.server_href, texts_made=texts_made)
    kit = next(iter(kits.values()))
    if not kit.whole.merged:
        return replace(job, plan=plan)
    spans = list({page.span.run: page.span for page in work}.values())
    return replace(job, plan=plan, merged=MergedTimeline(plan, spans, whole=kit.whole, zone=kit.format))


def _render_and_write(job: RenderJob, work: list[PageWork], *, languages: list[str]) -> tuple[float, float]:
    """Render pages of consecutive runs of the job's plan (``work`` in table order), each written
    as soon as it is made (a batch's pages are not held), a language's after another's in the
    order of ``languages``; returns the seconds spent rendering and writing."""
    assert job.plan is not None
    began = time.perf_counter()
    write_seconds = 0.0
    merged = job.merged
    if merged is None:
        first, last = work[0].span.start, work[-1].span.stop
        bounds = {page.span.run: (page.span.start - first, page.span.stop - first) for page in work}
    else:
        first, last = merged.number[work[0].span.run], merged.number[work[-1].span.run] + 1
        base, offsets = merged.offsets[first], merged.offsets
        bounds = {page.span.run: (offsets[number] - base, offsets[number + 1] - base)
                  for page in work for number in (merged.number[page.span.run],)}
    markup: dict[str, list[str]] = {}
    rank = {language: number for number, language in enumerate(languages)}
    for page in sorted(work, key=lambda page: rank[page.language]):  # stable: each language in table order
        kit = job.kits[page.language]
        if page.language not in markup:
            markup[page.language] = (job.plan.rows(page.language, start=first, stop=last) if merged is None
                                     else merged.rows(kit, first=first, last=last))
        run = page.span.run
        text = pages.run_page(kit, job.summaries[run], rows=markup[page.language], span=bounds[run],
                              server_href=job.server_href,
                              header=job.headers.get(run),
                              steps=RunSteps(job.plan.step_columns, page.span.start, page.span.stop))
        written = time.perf_counter()
        job.site.write_claimed_bytes(page.path, text.encode("utf-8"))
        write_seconds += time.perf_counter() - written
    return time.perf_counter() - began - write_seconds, write_seconds


def _only_rows_of(steps: pa.Table, work: list[PageWork]) -> tuple[pa.Table, list[PageWork]]:
    """The rows of the runs to render, and the pages with their spans in that smaller table,
    in table order (consecutive runs, such as a share's: a slice of the table)."""
    work = sorted(work, key=lambda page: page.span.start)
    runs: dict[str, RunSpan] = {}
    for page in work:
        runs.setdefault(page.span.run, page.span)
    spans = list(runs.values())
    first, rows = spans[0].start, sum(span.stop - span.start for span in spans)
    if spans[-1].stop - first == rows:
        subset = steps if rows == steps.num_rows else steps.slice(first, rows)
        moved = {span.run: RunSpan(span.run, span.start - first, span.stop - first) for span in spans}
    else:
        positions: list[int] = []
        moved = {}
        for span in spans:
            moved[span.run] = RunSpan(span.run, len(positions), len(positions) + span.stop - span.start)
            positions.extend(range(span.start, span.stop))
        subset = steps.take(pa.array(positions, pa.int64()))
    if subset is steps:
        return steps, work
    return subset, [replace(page, span=moved[page.span.run]) for page in work]


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


def write_overview_pages(site: SiteWriter, kits: dict[str, PageKit], *, data: pages.SiteData, jobs: int = 1,
                         manifest: dict[str, str] | None = None) -> None:
    """Indexes, servers, problems, the lists of runs, the language choice, the stylesheet, the
    filter's files and summary.json, with each file's content key into ``manifest``.

    With many runs and more than one language, forked workers take whole languages: each
    writes its own language's folder, the first also the filter's data, the last summary.json.
    """
    first_kit = next(iter(kits.values()))
    site.write_text(urls.ROOT_INDEX, pages.language_choice_page(first_kit, data.languages))
    site.write_text(urls.STYLESHEET, pages.stylesheet())
    if first_kit.whole_run_styled:
        site.write_text(urls.WHOLE_RUN_STYLESHEET, pages.whole_run_stylesheet())
    site.write_text(urls.FAVICON, pages.favicon())
    site.write_text(urls.FILTER_SCRIPT, filter_script())
    job = OverviewJob(site, kits, data)
    parallel = jobs > 1 and len(kits) > 1 and len(data.summaries) * len(kits) >= PARALLEL_THRESHOLD
    written = forked_map(_write_language_overview, job, items=list(kits), processes=jobs if parallel else 1)
    if manifest is not None:
        for keys in [site.written_keys, *written]:
            manifest.update(keys)


def _write_language_overview(job: OverviewJob, language: str) -> dict[str, str]:
    """A language's overview pages; returns the content keys of the files written in this process."""
    kit, data, site = job.kits[language], job.data, job.site
    languages = list(job.kits)
    if language == languages[0]:  # the filter's data, shared by the languages, beside one language's pages
        for path, text in filter_files(data, kit.format.local_day):
            site.write_text(path, text)
    if language == languages[-1]:  # summary.json (0.4 s at 50,000 whole runs) beside another's, where there are two
        site.write_text(urls.SUMMARY, pages.summary_json(data))
    outcome, days = pages.outcome_lists(kit, data), pages.runs_by_day(kit, data)
    by_status, by_configuration = run_groups(kit, data)
    words = Vocabulary(data)
    run_filter = run_filter_context(kit, words.statuses, reasons=words.reasons)
    for path, text in pages.run_index_pages(kit, data, outcome=[*outcome, *by_status, *by_configuration], days=days,
                                            run_filter=run_filter):
        site.write_text(path, text)
    site.write_text(*pages.servers_index_page(kit, data))
    if data.whole.runs_known:
        site.write_text(*pages.configurations_page(kit, data))
    for run_list in [*outcome, *by_status, *by_configuration, *pages.day_lists(kit, days)]:
        for path, text in pages.run_list_pages(kit, run_list):
            site.write_text(path, text)
    for stats in data.servers:
        run_lists = pages.server_lists(kit, data, stats=stats)
        tool_runs = pages.tool_lists(kit, data, stats=stats)
        site.write_text(*pages.server_page(kit, data, stats=stats, run_lists=run_lists, tool_runs=tool_runs))
        for run_list in [*run_lists, *tool_runs.values()]:
            for path, text in pages.run_list_pages(kit, run_list):
                site.write_text(path, text)
    for path, text in pages.problems_pages(kit, data):
        site.write_text(path, text)
    return site.written_keys
