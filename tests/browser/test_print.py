"""Printing: a 40-step run, its run page and its single-file timeline, printed by Chromium to A4 and read back.

The PDF's text (pypdf) must hold every step row whole, on one page, with its
outcome as a mark and a word, and no navigation. The layout in print media at
A4's printable width must not spill out of any cell. The reader here prefers a
dark screen; the paper is printed light all the same.
"""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chromium import Visit, computed_style, luminance, read_table
from command_line import run_cli
from pypdf import PdfReader
from safety_helpers import write_jsonl
from site_helpers import build_ok

RUN = "print-run"
STEPS = 40
BASE_TIME = 1_788_000_000  # 2026-08-29 10:40:00 UTC
TOOL = "mcp_archive_find_customer_record_by_ticket_reference_step{sequence:02d}"  # long: wraps in print
OUTCOMES = ("ok", "failed", "cancelled")
MARKS = {"ok": "\u2713", "failed": "\u2717", "cancelled": "\u2298"}  # the stylesheet's ::before marks
# A4 is 210 mm wide; the stylesheet's @page leaves 12 mm each side: 186 mm at 96 px an inch.
PRINTABLE_WIDTH = round(186 / 25.4 * 96)
PRINTED = ["single-file", "run-page"]

Opener = Callable[..., Visit]


def print_run_rows() -> list[dict[str, Any]]:
    """One run of 40 steps, seven seconds apart: a request, then an llm step and three tool
    calls (ok, failed, cancelled in turn) each round. Rows as domain.md describes the export."""
    rows: list[dict[str, Any]] = [
        {"uid": 1, "run": RUN, "sequence": 0, "kind": "request", "round": 1, "duration_ms": 0, "crdate": BASE_TIME,
         "payload": {"messagesSentCount": 3, "toolSpecs": ["mcp_archive_find"]}},
    ]
    for sequence in range(1, STEPS):
        row: dict[str, Any] = {"uid": 1 + sequence, "run": RUN, "sequence": sequence, "round": 1 + sequence // 4,
               "crdate": BASE_TIME + 7 * sequence}
        if sequence % 4 == 1:
            row |= {"kind": "llm", "duration_ms": 900.0 + sequence, "payload": {
                "finishReason": "tool_calls", "promptTokens": 1000 + sequence, "completionTokens": 40 + sequence,
                "totalTokens": 1040 + 2 * sequence, "estimatedCost": round(0.001 * sequence + 0.00007, 5)}}
        else:
            outcome = OUTCOMES[(sequence + 2) % 4]
            row |= {"kind": "tool", "duration_ms": 120.0 + sequence, "payload": {
                "toolName": TOOL.format(sequence=sequence), "toolIsError": outcome != "ok", "toolOutcome": outcome}}
        rows.append(row)
    return rows


def expected_outcome(sequence: int) -> str | None:
    return None if sequence == 0 or sequence % 4 == 1 else OUTCOMES[(sequence + 2) % 4]


@pytest.fixture(scope="module")
def printable(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The single-file timeline (written by the real command) and the run page of a built site."""
    folder = tmp_path_factory.mktemp("print")
    export = write_jsonl(folder / "rows.jsonl", print_run_rows())
    timeline = folder / "timeline.html"
    completed = run_cli("timeline", RUN, export, "--out", timeline)
    assert completed.returncode == 0, completed.stderr
    build_ok(export, "--out", folder / "site", "--jobs", "1")
    return {"single-file": timeline, "run-page": folder / "site" / "en" / "runs" / f"{RUN}.html"}


def compact(text: str) -> str:
    """Text without any whitespace, ligatures spelled out: what survives a PDF's line breaks."""
    return "".join(unicodedata.normalize("NFKC", text).split())


def printed_pages(visit: Opener, page_file: Path) -> tuple[list[str], list[list[str]], Visit]:
    """The PDF's pages as compact text, and the timeline's rows as the screen shows them."""
    opened = visit(page_file.as_uri(), color_scheme="dark")
    rows = read_table(opened.page, "timeline").texts()
    reader = PdfReader(io.BytesIO(opened.page.pdf(format="A4")))
    return [compact(page.extract_text()) for page in reader.pages], rows, opened


@pytest.mark.slow
@pytest.mark.parametrize("printed", PRINTED)
def test_every_step_is_printed_whole_on_one_page_with_its_outcome_in_words(
    visit: Opener, printable: dict[str, Path], printed: str
) -> None:
    pages, rows, _ = printed_pages(visit, printable[printed])
    assert [int(row[0]) for row in rows] == list(range(STEPS))
    for sequence, cells in enumerate(rows):
        outcome = expected_outcome(sequence)
        assert cells[7] == (outcome or "–"), cells
        if outcome is not None:  # on paper the badge is its mark and its word
            cells = [*cells[:7], MARKS[outcome] + outcome, *cells[8:]]
        row = compact("".join(cells))
        holding = [number for number, text in enumerate(pages, 1) if row in text]
        assert len(holding) == 1, f"step {sequence} ({row!r}) is not printed whole on one page: {holding}"


@pytest.mark.slow
@pytest.mark.parametrize("printed", PRINTED)
def test_a_printed_run_takes_a_few_pages_and_no_navigation(
    visit: Opener, printable: dict[str, Path], printed: str
) -> None:
    pages, _, opened = printed_pages(visit, printable[printed])
    # 40 rows of up to six lines: more than one page at a readable size, and not one a page.
    assert 2 <= len(pages) <= 6, f"{len(pages)} pages"
    navigation = opened.page.locator("nav.site-nav a").all_inner_texts()
    assert (printed == "run-page") == bool(navigation)
    for link in navigation:
        if link != "Servers":  # also the label of the run's servers, which is no navigation
            assert not any(compact(link) in text for text in pages), f"the navigation's {link!r} is printed"
    if navigation:
        assert not any(compact("".join(navigation)) in text for text in pages)


@pytest.mark.slow
@pytest.mark.parametrize("printed", PRINTED)
def test_in_print_the_timeline_fits_the_page_width_on_light_paper(
    visit: Opener, printable: dict[str, Path], printed: str
) -> None:
    page = visit(printable[printed].as_uri(), color_scheme="dark",
                 viewport={"width": PRINTABLE_WIDTH, "height": 1000}).page
    page.emulate_media(media="print")
    assert page.evaluate("document.documentElement.scrollWidth") <= PRINTABLE_WIDTH
    spilling = page.evaluate("""() => [...document.querySelectorAll("table.timeline th, table.timeline td")]
        .filter(cell => cell.scrollWidth > cell.clientWidth).map(cell => cell.innerText)""")
    assert spilling == [], "text spills out of its cell"
    style = computed_style(page)
    assert luminance(style["paper"]) > 0.9 and luminance(style["ink"]) < 0.1, style
    assert page.locator("nav.site-nav").count() == 0 or not page.locator("nav.site-nav").is_visible()
