"""The waterfall above every run's timeline: a bar per step, on a shared time axis, linked to its row.

A crafted run whose starts are known by hand (a step's second less its duration, never
before the step before), drawn by Chromium on its run page and in the single-file timeline,
in both languages: the bars' count, order, links, starts and lengths against the steps;
a 200-step run on lanes by round; the sample's pages; printing to A4.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from chromium import Visit
from command_line import invoke
from pypdf import PdfReader
from site_helpers import SAMPLE, SAMPLE_TABLES, build_ok, failure_text, write_jsonl

from nrllm_report.site.waterfall import GROUP_ABOVE, MAX_LANES, nice_ticks, step_starts

LANGUAGES = ["en", "de"]
RUN = "waterfall-run"
LONG_RUN = "long-run"
BASE_TIME = 1_788_000_000
# (kind, seconds after BASE_TIME, duration in ms, outcome) and the start (s) each must be drawn at.
STEPS = [
    ("request", 0, 0.0, None, 0.0),
    ("llm", 3, 2500.0, None, 0.5),
    ("tool", 5, 1800.0, "ok", 3.2),
    ("tool", 5, 3000.0, "failed", 3.2),  # its second less its duration (2.0) is before the step before
    ("tool", 9, 3500.0, "cancelled", 5.5),
    ("llm", 12, 2000.0, None, 10.0),
    ("tool", 14, 0.0, "ok", 14.0),
    ("llm", 20, 5000.0, None, 15.0),
]
TOTAL_S = 20.0
CAPTION = {"en": "A bar starts at its row’s second less its duration", "de": "Ein Balken beginnt zur Sekunde"}
LONGEST = {"en": "Longest: LLM (5 s), mcp_files_read (3.5 s), mcp_files_read (3 s).",
           "de": "Am längsten: LLM (5 s), mcp_files_read (3,5 s), mcp_files_read (3 s)."}
TRACK = 0.75  # the bars' share of a row; the first quarter is the label's
SLACK = 0.012  # whole percent of the axis, and a pixel or two

Opener = Callable[..., Visit]


def step_row(sequence: int, kind: str, second: int, duration: float, outcome: str | None,
             run: str = RUN, round_: int = 1) -> dict[str, Any]:
    payload: dict[str, Any] = {}
    if kind == "tool":
        payload = {"toolName": "mcp_files_read", "toolIsError": outcome != "ok", "toolOutcome": outcome}
    return {"uid": sequence + 1, "run": run, "sequence": sequence, "kind": kind, "round": round_,
            "duration_ms": duration, "crdate": BASE_TIME + second, "payload": payload}


def long_run_rows() -> list[dict[str, Any]]:
    """200 steps in 20 rounds: an llm step and nine tool calls a round, a second apart."""
    return [step_row(sequence, "llm" if sequence % 10 == 0 else "tool", sequence, 400.0 + sequence % 7 * 50,
                     "ok", run=LONG_RUN, round_=sequence // 10) for sequence in range(200)]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The crafted runs' site and the crafted run's single-file timeline in each language."""
    folder = tmp_path_factory.mktemp("waterfall")
    rows = [step_row(sequence, *step[:4]) for sequence, step in enumerate(STEPS)] + long_run_rows()
    export = write_jsonl(folder / "rows.jsonl", rows)
    build_ok(export, "--out", folder / "site", "--jobs", "1")
    files = {"site": folder / "site"}
    for language in LANGUAGES:
        out = folder / f"timeline-{language}.html"
        result = invoke("timeline", RUN, str(export), "--out", str(out), "--lang", language)
        assert result.exit_code == 0, failure_text(result)
        files[f"timeline-{language}"] = out
    return files


def page_file(drawn: dict[str, Path], where: str, language: str, run: str = RUN) -> Path:
    return drawn[f"timeline-{language}"] if where == "timeline" else drawn["site"] / language / "runs" / f"{run}.html"


# ---------------------------------------------------------------- the starts, as the rows tell them


def test_a_start_is_the_rows_second_less_its_duration_never_before_the_step_before() -> None:
    crdates = [BASE_TIME + step[1] for step in STEPS]
    starts = step_starts(crdates, [step[2] for step in STEPS])
    assert [round(start / 1000 - BASE_TIME, 3) for start in starts] == [step[4] for step in STEPS]


def test_an_undated_step_starts_with_the_one_before_it() -> None:
    assert step_starts([None, 10, None, 12], [0.0, 500.0, 100.0, 0.0]) == [9500.0, 9500.0, 9500.0, 12000.0]
    assert step_starts([None, None], [5.0, 0.0]) == [0.0, 0.0]


@pytest.mark.parametrize(("total", "ticks"), [
    (0.0, [0.0]), (20_000.0, [0.0, 5_000.0, 10_000.0, 15_000.0, 20_000.0]), (950.0, [0.0, 500.0]),
    (61_000.0, [0.0, 20_000.0, 40_000.0, 60_000.0]),
], ids=["none", "20s", "under-a-second", "a-minute"])
def test_the_axis_has_round_ticks(total: float, ticks: list[float]) -> None:
    assert nice_ticks(total) == ticks


# ---------------------------------------------------------------- the markup


def figure_of(text: str) -> str:
    found = re.findall(r'<figure class="waterfall">.*?</figure>', text, re.S)
    assert len(found) == 1, "expected one waterfall"
    return found[0]


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_sample_run_page_draws_a_bar_per_step_linked_to_its_row(tmp_path: Path, language: str) -> None:
    build_ok(SAMPLE, *SAMPLE_TABLES, "--out", tmp_path / "site", "--jobs", "1")
    pages = sorted((tmp_path / "site" / language / "runs").glob("*.html"))
    assert pages
    calls = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        figure = figure_of(text)
        assert text.index("<figure") < text.index('<table class="timeline"'), "the waterfall is above the table"
        rows = re.findall(r'<tr class="kind-[^"]*" id="(s\d+)"', text)
        bars = re.findall(r'<a href="#(s\d+)"', figure)
        assert bars == sorted(rows, key=lambda row: int(row[1:])), page.name  # one a step, in step order
        for target in re.findall(r'<a href="#([cd]\d+)"', figure):  # provider calls' and decisions' lanes
            assert f'id="{target}"' in text, (page.name, target)
            calls += 1
        assert CAPTION[language] in figure
    assert calls, "no sample run page drew its provider calls"


# ---------------------------------------------------------------- what Chromium draws


READ_BARS = """() => [...document.querySelectorAll("figure.waterfall > a")].map(bar => {
  const after = getComputedStyle(bar, "::after");
  const row = document.getElementById(bar.getAttribute("href").slice(1));
  return {href: bar.getAttribute("href"), label: bar.innerText, row: row && row.cells[0].innerText,
          rowWidth: bar.getBoundingClientRect().width, left: parseFloat(after.left), width: parseFloat(after.width),
          height: parseFloat(after.height), classes: bar.className};
})"""


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("where", ["run-page", "timeline"])
def test_the_bars_stand_for_the_steps_in_count_order_and_proportion(
    visit: Opener, drawn: dict[str, Path], where: str, language: str
) -> None:
    page = visit(page_file(drawn, where, language).as_uri(), viewport={"width": 1280, "height": 900}).page
    bars = page.evaluate(READ_BARS)
    assert len(bars) == len(STEPS) == page.locator("table.timeline tr[class^='kind-']").count()
    assert [bar["href"] for bar in bars] == [f"#s{sequence}" for sequence in range(len(STEPS))]
    assert [bar["row"] for bar in bars] == [str(sequence) for sequence in range(len(STEPS))], "a bar links its row"
    for bar, (kind, _second, duration, outcome, start) in zip(bars, STEPS):
        track = bar["rowWidth"] * TRACK
        assert bar["left"] - bar["rowWidth"] * (1 - TRACK) == pytest.approx(track * start / TOTAL_S, abs=SLACK * track)
        assert bar["width"] == pytest.approx(max(track * duration / 1000 / TOTAL_S, 2), abs=SLACK * track + 1)
        assert bar["height"] > 5
        assert bar["label"] == ("mcp_files_read" if kind == "tool" else {"llm": "LLM", "request": {
            "en": "Request", "de": "Anfrage"}[language]}[kind])
        assert (outcome in bar["classes"].split()) == (outcome in ("failed", "cancelled")), bar
    figure = page.locator("figure.waterfall")
    assert LONGEST[language] in figure.inner_text().replace("\xa0", " ")
    assert figure.bounding_box()["width"] <= 1280


@pytest.mark.parametrize("language", LANGUAGES)
def test_failed_and_cancelled_bars_are_patterned_not_only_coloured(
    visit: Opener, drawn: dict[str, Path], language: str
) -> None:
    page = visit(page_file(drawn, "run-page", language).as_uri()).page
    styles = page.evaluate("""() => Object.fromEntries(["s2", "s3", "s4"].map(id => {
      const after = getComputedStyle(document.querySelector(`a[href="#${id}"]`), "::after");
      return [id, [after.backgroundImage, after.borderTopStyle]];
    }))""")
    assert styles["s2"] == ["none", "none"]
    assert "repeating-linear-gradient" in styles["s3"][0] and styles["s3"][1] == "solid"
    assert "repeating-linear-gradient" in styles["s4"][0] and styles["s4"][1] == "dashed"
    legend = page.locator("figure.waterfall .legend").inner_text()
    assert {"en": "failed", "de": "fehlgeschlagen"}[language] in legend


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_200_step_run_is_drawn_on_lanes_by_round(visit: Opener, drawn: dict[str, Path], language: str) -> None:
    assert 200 > GROUP_ABOVE
    page = visit(page_file(drawn, "run-page", language, LONG_RUN).as_uri(),
                 viewport={"width": 1280, "height": 900}).page
    lanes = page.locator("figure.waterfall .lane:not(.axis)")
    assert lanes.count() == 20 <= MAX_LANES
    names = lanes.evaluate_all("lanes => lanes.map(lane => lane.firstElementChild.innerText)")
    assert names[0] == {"en": "Round 0", "de": "Runde 0"}[language]
    bars = page.evaluate("""() => [...document.querySelectorAll("figure.waterfall .lane > a")].map(bar => {
      const box = bar.getBoundingClientRect();
      return {href: bar.getAttribute("href"), title: bar.getAttribute("title"), left: box.left, width: box.width};
    })""")
    assert [bar["href"] for bar in bars] == [f"#s{sequence}" for sequence in range(200)]
    assert all(bar["title"] in ("LLM", "mcp_files_read") for bar in bars)
    assert all(later["left"] >= earlier["left"] for earlier, later in zip(bars, bars[1:])), "bars in time order"
    assert page.locator("figure.waterfall").bounding_box()["height"] < 700, "the figure stays a glance"


def test_the_waterfall_prints_on_a4_with_its_labels(visit: Opener, drawn: dict[str, Path]) -> None:
    page = visit(page_file(drawn, "run-page", "en").as_uri(), color_scheme="dark").page
    first = PdfReader(io.BytesIO(page.pdf(format="A4"))).pages[0].extract_text()
    flat = " ".join(first.split())
    assert "A bar starts at its row’s second" in flat and "mcp_files_read" in flat and "LLM" in flat
    page.emulate_media(media="print")
    printed = page.evaluate("""() => {
      const after = getComputedStyle(document.querySelector('a[href="#s7"]'), "::after");
      return {adjust: after.printColorAdjust || after.webkitPrintColorAdjust, width: parseFloat(after.width),
              figure: document.querySelector("figure.waterfall").scrollWidth,
              page: document.documentElement.clientWidth};
    }""")
    assert printed["adjust"] == "exact" and printed["width"] > 10
    assert printed["figure"] <= printed["page"]
