"""What a person sees: pages of the sample site rendered by a real headless Chromium.

Playwright drives Debian's chromium (tests/chromium.py, the ``browser`` and
``visit`` fixtures in conftest.py). The built site is served by ``http.server``
on 127.0.0.1, or opened from disk. Every request a page makes is recorded and,
unless it is for the site's own server or a file on this machine, aborted: a
page that tried to fetch anything from another host fails its test, and
``test_a_fetch_from_another_host_is_caught`` shows that it would. Chromium
itself resolves no host name but 127.0.0.1.

Where Chromium is missing the tests skip and say how to install it; in CI
(the environment variable ``CI`` set) they fail instead, because CI must run them.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from chromium import (
    Visit,
    assert_styled,
    computed_style,
    contrast,
    guarded_context,
    luminance,
    open_page,
    read_table,
    serving,
)
from command_line import invoke
from playwright.sync_api import Browser

from nrllm_report.core.resources import sample_inputs

LANGUAGES = ["en", "de"]
SCHEMES = ["light", "dark"]

# The sample has its other tables: a run's timeline merges its provider calls and decisions (Source first).
TIMELINE_HEADERS = {
    "en": ["Source", "#", "Time", "Kind", "Round", "Duration", "Tool", "Server", "Outcome", "Details"],
    "de": ["Quelle", "#", "Zeit", "Art", "Runde", "Dauer", "Werkzeug", "Server", "Ergebnis", "Details"],
}
SEQUENCE_COLUMN = 1
SERVERS_HEADERS = {
    # The sample has denied calls (and its tables): the servers table shows them apart.
    "en": ["Server", "Verdict", "Failure budget", "Current failure rate", "95 % interval", "Latest change",
           "Calls", "ok", "failed", "cancelled", "Denied", "Failed in 0 ms", "Cancelled share", "Last call",
           "Latency verdict", "p90"],
    "de": ["Server", "Urteil", "Fehlerbudget", "Aktuelle Fehlerquote", "95-%-Intervall", "Letzte Änderung",
           "Aufrufe", "ok", "fehlgeschlagen", "abgebrochen", "Verweigert", "In 0 ms fehlgeschlagen",
           "Anteil abgebrochen", "Letzter Aufruf", "Latenzurteil", "p90"],
}
OUTCOME_COLUMN = 8
OUTCOME_LABELS = {
    "en": {"ok": "ok", "failed": "failed", "cancelled": "cancelled"},
    "de": {"ok": "ok", "failed": "fehlgeschlagen", "cancelled": "abgebrochen"},
}
# A failure rate as a person reads it: 15.4% on an English page, 15,4 % on a German one.
PERCENT = {"en": re.compile(r"(\d+(?:\.\d+)?)%"), "de": re.compile(r"(\d+(?:,\d+)?) %")}
# Payload keys that hold content (domain.md, Privacy): none of it may reach a page.
CONTENT_KEYS = ("messagesSent", "toolArguments", "toolResult", "content", "thinking")

Opener = Callable[..., Visit]


# ---------------------------------------------------------------- the sample and the site


@dataclass
class Sample:
    """What the bundled sample says, read straight from its rows, independently of the tool."""

    outcomes: dict[str, dict[int, str | None]]  # run -> sequence -> ok / failed / cancelled / None
    content: dict[str, list[str]]  # run -> content strings a page must never show

    @property
    def showcase_run(self) -> str:
        """The shortest run that has both a failed and a cancelled call, one stored with its content first."""
        candidates = [
            run for run, steps in self.outcomes.items() if {"failed", "cancelled"} <= set(steps.values())
        ]
        assert candidates, "the sample has no run with both a failed and a cancelled call"
        return min(candidates, key=lambda run: (not self.content[run], len(self.outcomes[run]), run))


def stated_outcome(payload: dict[str, Any]) -> str | None:
    """ADR-191, decision 5: the boolean says whether, toolOutcome says which."""
    flag = payload.get("toolIsError")
    if not isinstance(flag, bool):
        return None
    return payload.get("toolOutcome") or ("failed" if flag else "ok")


def content_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if len(value) >= 12:  # long enough not to turn up on a page by chance
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from content_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from content_strings(item)


@pytest.fixture(scope="module")
def sample() -> Sample:
    outcomes: dict[str, dict[int, str | None]] = {}
    content: dict[str, list[str]] = {}
    steps: dict[str, dict[int, tuple[str, dict[str, Any], int]]] = {}
    with open(sample_inputs()[0], encoding="utf-8") as rows:
        for line in rows:
            row = json.loads(line)
            payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
            outcomes.setdefault(row["run"], {})[row["sequence"]] = stated_outcome(payload)
            steps.setdefault(row["run"], {})[row["sequence"]] = (row["kind"], payload, row["crdate"])
            for key in CONTENT_KEYS:
                content.setdefault(row["run"], []).extend(content_strings(payload.get(key)))
    for run, sequence in sample_denials(steps):
        outcomes[run][sequence] = "denied"  # failed, but no server's failure: the site marks no run for it
    return Sample(outcomes, content)


def sample_denials(steps: dict[str, dict[int, tuple[str, dict[str, Any], int]]]) -> list[tuple[str, int]]:
    """The sample's denied calls, from its rows: a 0 ms failed tool step right after an operator's
    denied approval, and the failed call of the tool a governance tool_denied names in its second."""
    folder = Path(sample_inputs()[0]).parent
    read = lambda name: [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines()]  # noqa: E731
    uuids = {row["uid"]: row["uuid"] for row in read("tx_nrllm_agentrun.jsonl")}
    denied = []
    for run, by_sequence in steps.items():
        for sequence, (kind, payload, _crdate) in by_sequence.items():
            before = by_sequence.get(sequence - 1)
            if (kind == "tool" and stated_outcome(payload) == "failed" and before is not None
                    and before[0] == "approval" and before[1].get("approved") is False):
                denied.append((run, sequence))
    for decision in read("tx_nrllm_governance_event.jsonl"):
        run = uuids.get(decision["agentrun_uid"]) or decision["correlation_id"]
        if decision["decision"] != "tool_denied" or run not in steps:
            continue
        denied += [(run, sequence) for sequence, (kind, payload, crdate) in steps[run].items()
                   if kind == "tool" and payload.get("toolName") == decision["tool_name"]
                   and stated_outcome(payload) == "failed" and crdate == decision["crdate"]]
    return denied


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample, built once for this module, both languages."""
    out = tmp_path_factory.mktemp("browser") / "site"
    result = invoke("build", "--out", str(out), "--jobs", "1")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The site's origin on 127.0.0.1."""
    with serving(site) as origin:
        yield origin


def assert_fetched_only_from_the_site(visit: Visit, path: str) -> None:
    assert visit.traffic.foreign == [], "fetched from another host"
    seen = set(visit.traffic.responses)
    assert ("GET", f"/{path}", 200) in seen, visit.traffic.responses
    assert ("GET", "/assets/style.css", 200) in seen, "the stylesheet was not loaded"


# ---------------------------------------------------------------- what the pages show


@pytest.mark.slow
@pytest.mark.parametrize("language", LANGUAGES)
def test_run_timeline_shows_every_step_with_its_outcome(
    visit: Opener, served: str, sample: Sample, language: str
) -> None:
    run = sample.showcase_run
    path = f"{language}/runs/{run}.html"
    opened = visit(f"{served}/{path}")
    assert opened.page.locator("html").get_attribute("lang") == language
    table = read_table(opened.page, "timeline")
    assert table.headers == TIMELINE_HEADERS[language]
    steps = sample.outcomes[run]
    step_rows = [row for row in table.rows if any(name.startswith("kind-") for name in row.classes)]
    assert [row.cells[SEQUENCE_COLUMN].text for row in step_rows] == [str(sequence) for sequence in sorted(steps)]
    assert len(table.rows) > len(step_rows)  # and its provider calls, merged in
    for row in step_rows:
        expected = steps[int(row.cells[SEQUENCE_COLUMN].text)]
        badge = row.cells[OUTCOME_COLUMN]
        if expected is None:
            assert "outcome-none" in badge.classes, row.texts()
        else:
            assert f"outcome-{expected}" in badge.classes, row.texts()
            assert badge.text == OUTCOME_LABELS[language][expected], row.texts()
            assert f"step-{expected}" in row.classes, row.classes
    shown = {badge_class for row in table.rows for badge_class in row.cells[OUTCOME_COLUMN].classes}
    assert {"outcome-ok", "outcome-failed", "outcome-cancelled"} <= shown
    assert_fetched_only_from_the_site(opened, path)


@pytest.mark.parametrize("language", LANGUAGES)
def test_servers_table_shows_every_server_with_its_figures(
    visit: Opener, served: str, site: Path, language: str
) -> None:
    summary = json.loads((site / "summary.json").read_text(encoding="utf-8"))
    path = f"{language}/servers/index.html"
    opened = visit(f"{served}/{path}")
    assert opened.page.locator("html").get_attribute("lang") == language
    table = read_table(opened.page, "servers")
    assert table.headers == SERVERS_HEADERS[language]
    rows = {row.cells[0].text: row for row in table.rows}
    assert len(rows) == len(table.rows) == len(summary["servers"])
    assert set(rows) == set(summary["servers"])
    for server, figures in summary["servers"].items():
        cells = rows[server].texts()
        counts = [figures["ok"], figures["failed"], figures["cancelled"]]
        # the sample has a denial: the Denied column stands between cancelled and failed in 0 ms
        assert cells[7:12] == [str(count) for count in counts + [figures["denied"], figures["failed_in_0ms"]]], (
            server, cells)
        assert f"verdict-{figures['latency']['verdict']}" in rows[server].cells[14].classes, cells
        assert int(cells[6]) >= sum(counts), (server, cells)
        assert f"verdict-{figures['verdict']}" in rows[server].cells[1].classes, cells
        assert rows[server].cells[1].text, cells
        current_rate = figures["current"]["failure_rate"]
        if current_rate is None:  # no ok or failed call: no rate to show
            assert cells[3] == "–", (server, cells)
            continue
        rate = PERCENT[language].fullmatch(cells[3])
        assert rate, f"{server}: failure rate {cells[3]!r} is not written for {language!r}"
        assert abs(float(rate.group(1).replace(",", ".")) - 100 * current_rate) < 0.051, cells
    assert_fetched_only_from_the_site(opened, path)


@pytest.mark.slow
def test_runs_index_marks_failed_runs_and_not_cancelled_ones(visit: Opener, served: str, sample: Sample) -> None:
    path = "en/index.html"
    opened = visit(f"{served}/{path}")
    table = read_table(opened.page, "runs")
    assert len(table.rows) == len(sample.outcomes)
    only_cancelled = 0
    for row in table.rows:
        run = row.cells[0].text.split()[0]
        outcomes = set(sample.outcomes[run].values())
        marked = "run-failed" in row.classes and "outcome-failed" in row.cells[0].classes
        assert marked == ("failed" in outcomes), (run, row.texts())
        if "cancelled" in outcomes and "failed" not in outcomes:
            only_cancelled += 1
            assert "run-failed" not in row.classes and "outcome-failed" not in row.cells[0].classes
    assert only_cancelled, "the sample has no run whose only bad calls were cancelled"
    assert_fetched_only_from_the_site(opened, path)


def test_run_page_shows_no_content_from_the_export(visit: Opener, served: str, sample: Sample) -> None:
    run = sample.showcase_run
    assert sample.content[run], "the sample run carries content; the test needs some to look for"
    page = visit(f"{served}/en/runs/{run}.html").page
    seen = html.unescape(page.content()) + page.locator("body").inner_text()
    shown = [text for text in sample.content[run] if text in seen]
    assert shown == [], "content from the export reached the page"


def test_run_page_is_styled_by_the_site_stylesheet(visit: Opener, served: str, sample: Sample) -> None:
    path = f"en/runs/{sample.showcase_run}.html"
    opened = visit(f"{served}/{path}")
    assert_styled(opened.page)
    assert_fetched_only_from_the_site(opened, path)


@pytest.mark.slow
def test_run_page_opened_from_disk_renders_the_same_table(
    visit: Opener, served: str, site: Path, sample: Sample
) -> None:
    path = f"de/runs/{sample.showcase_run}.html"
    from_server = read_table(visit(f"{served}/{path}").page, "timeline")
    from_disk = visit((site / path).as_uri())
    assert read_table(from_disk.page, "timeline") == from_server
    assert_styled(from_disk.page)
    assert [url for _method, url in from_disk.traffic.requests if not url.startswith("file:///")] == []


@pytest.mark.slow
def test_single_file_timeline_renders_on_its_own(
    visit: Opener, served: str, sample: Sample, tmp_path: Path
) -> None:
    run = sample.showcase_run
    attachment = tmp_path / "ticket" / "timeline.html"
    attachment.parent.mkdir()
    result = invoke("timeline", run, "--out", str(attachment), "--lang", "de")
    assert result.exit_code == 0, result.output
    alone = visit(attachment.as_uri())
    in_site = read_table(visit(f"{served}/de/runs/{run}.html").page, "timeline")
    assert read_table(alone.page, "timeline").texts() == in_site.texts()
    assert_styled(alone.page)  # the inlined CSS passed the page's own policy
    assert [url for _method, url in alone.traffic.requests] == [attachment.as_uri()], "it loaded another file"


# ---------------------------------------------------------------- the fence itself


CANARY = """<!DOCTYPE html><html lang="en"><head><title>canary</title>
<link rel="stylesheet" href="own.css"><link rel="stylesheet" href="https://cdn.example.com/a.css">
</head><body><img src="http://198.51.100.7/pixel.png" alt=""><p class="far">x</p></body></html>"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["served", "from-disk"])
def test_a_fetch_from_another_host_is_caught(browser: Browser, tmp_path: Path, where: str) -> None:
    """A page that reaches for other hosts (a stylesheet, an image, a CSS url()) is seen doing it."""
    (tmp_path / "canary.html").write_text(CANARY, encoding="utf-8")
    (tmp_path / "own.css").write_text(".far { background: url(//images.example.org/b.png); }", encoding="utf-8")
    with serving(tmp_path) as origin:
        url = f"{origin}/canary.html" if where == "served" else (tmp_path / "canary.html").as_uri()
        context, traffic = guarded_context(browser, origin if where == "served" else None)
        try:
            # A CSS background is fetched after layout, possibly after the load event.
            open_page(context, url).wait_for_load_state("networkidle")
        finally:
            context.close()
    caught = sorted(request.split(" ", 1)[1] for request in traffic.foreign)
    far_image = "http://images.example.org/b.png" if where == "served" else "file://images.example.org/b.png"
    assert caught == sorted(["https://cdn.example.com/a.css", "http://198.51.100.7/pixel.png", far_image])
    assert traffic.problems(), "the visit fixture would fail this page"


# ---------------------------------------------------------------- colour schemes


@pytest.mark.parametrize("scheme", SCHEMES)
def test_pages_follow_the_reader_colour_scheme(visit: Opener, served: str, sample: Sample, scheme: str) -> None:
    style = computed_style(visit(f"{served}/en/runs/{sample.showcase_run}.html", color_scheme=scheme).page)
    paper = luminance(style["paper"])
    assert paper > 0.8 if scheme == "light" else paper < 0.05, style["paper"]
    assert contrast(style["paper"], style["ink"]) >= 7, (style["paper"], style["ink"])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_outcome_badges_differ_without_colour(visit: Opener, served: str, sample: Sample, scheme: str) -> None:
    """Each badge carries its word, its own mark and its own border (style or weight), in both schemes."""
    page = visit(f"{served}/en/runs/{sample.showcase_run}.html", color_scheme=scheme).page
    badges = computed_style(page)["badges"]
    assert {outcome: badge["text"] for outcome, badge in badges.items()} == OUTCOME_LABELS["en"]
    assert len({badge["mark"] for badge in badges.values()}) == 3, badges
    assert len({(badge["border"], badge["borderWidth"]) for badge in badges.values()}) == 3, badges


@pytest.mark.slow
@pytest.mark.parametrize("language", LANGUAGES)
def test_no_page_is_wider_than_a_laptop_window(visit: Opener, served: str, sample: Sample, language: str) -> None:
    """Headings wrap and the servers' wide tables scroll in their own box: at 1280 px no page scrolls
    sideways (German's long words included)."""
    width = 1280
    pages = ["index.html", f"runs/{sample.showcase_run}.html", "servers/index.html", "servers/github.html",
             "problems.html", "servers/github/runs.html", "runs-with-failed-calls.html"]
    wider = {}
    for page_path in pages:
        page = visit(f"{served}/{language}/{page_path}", viewport={"width": width, "height": 900}).page
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        if scroll_width > width:
            wider[page_path] = scroll_width
    assert wider == {}, f"pages wider than {width} px: {wider}"
