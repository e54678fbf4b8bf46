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
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from . import pages
from .model import Step
from .render import PageKit
from .resources import PACKAGE_DIR, resource_path
from .writer import SiteWriter

if TYPE_CHECKING:
    from .pipeline import BuildOptions, Progress

PARALLEL_THRESHOLD = 2_000  # pages; below this, forking costs more than it saves
CHUNK_PAGES = 200


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


def steps_key(steps: Sequence[Step]) -> str:
    return hashlib.sha256(repr(steps).encode("utf-8", "surrogatepass")).hexdigest()


def page_key(language: str, options: "BuildOptions", data_key: str) -> str:
    settings = repr((options.title, options.timezone_name, options.languages, language))
    return hashlib.sha256(f"{version_key()}|{settings}|{data_key}".encode("utf-8", "surrogatepass")).hexdigest()


# Set in the parent before forking, read by the workers: fork shares it without pickling.
_WORK: dict[str, object] = {}


def _render_chunk(chunk: list[tuple[str, str, str]]) -> int:
    kits: dict[str, PageKit] = _WORK["kits"]  # type: ignore[assignment]
    runs: dict[str, list[Step]] = _WORK["runs"]  # type: ignore[assignment]
    summaries = _WORK["summaries"]
    server_slugs: dict[str, str] = _WORK["server_slugs"]  # type: ignore[assignment]
    for language, run, target in chunk:
        text = pages.run_page(kits[language], summaries[run], runs[run], server_slugs)  # type: ignore[index]
        Path(target).write_bytes(text.encode("utf-8"))
    return len(chunk)


def _ignore_interrupts() -> None:
    """Workers leave Ctrl-C to the parent, which stops them and cleans up."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def render_run_pages(
    site: SiteWriter,
    kits: dict[str, PageKit],
    runs: dict[str, list[Step]],
    data: pages.SiteData,
    options: "BuildOptions",
    manifest: dict[str, str],
    progress: "Progress",
) -> tuple[int, int]:
    """Every run page in every language; returns (rendered, reused)."""
    work: list[tuple[str, str, str]] = []
    reused = 0
    for summary in data.summaries:
        data_key = steps_key(runs[summary.run])
        for language in kits:
            path = pages.run_page_path(language, summary)
            key = page_key(language, options, data_key)
            manifest[path] = key
            if site.reuse(path, key):
                reused += 1
            else:
                work.append((language, summary.run, str(site.claim(path))))
    _WORK.update(
        kits=kits,
        runs=runs,
        summaries={summary.run: summary for summary in data.summaries},
        server_slugs={stats.server: stats.slug for stats in data.servers},
    )
    progress.start(len(work))
    try:
        chunks = [work[start : start + CHUNK_PAGES] for start in range(0, len(work), CHUNK_PAGES)]
        if options.jobs > 1 and len(work) >= PARALLEL_THRESHOLD:
            context = multiprocessing.get_context("fork")
            with context.Pool(options.jobs, initializer=_ignore_interrupts) as pool:
                for count in pool.imap_unordered(_render_chunk, chunks):
                    progress.advance(count)
        else:
            for chunk in chunks:
                progress.advance(_render_chunk(chunk))
    finally:
        _WORK.clear()
        progress.finish()
    return len(work), reused


def write_overview_pages(
    site: SiteWriter, kits: dict[str, PageKit], data: pages.SiteData, manifest: dict[str, str]
) -> None:
    """Indexes, servers, problems, the language choice, the stylesheet and summary.json."""
    first_kit = next(iter(kits.values()))
    site.write_text("index.html", pages.language_choice_page(first_kit, data.languages))
    site.write_text(pages.STYLESHEET_PATH, pages.stylesheet())
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
