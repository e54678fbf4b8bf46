"""The markup ``site/fast_markup.py`` makes in Python for speed is, byte for byte, what the
templates make of the same values: the run page's frame against ``run.html`` rendered by Jinja,
the rows of a list of runs against the ``run_row`` macro, the outcome badge against its macro.
Hostile values (markup, quotes, ampersands, Unicode) included. And the templates hold no page
path of their own (every link comes from ``site/urls.py``) and do no arithmetic."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from nrllm_report import pipeline
from nrllm_report.aggregate.figures import OutcomeCounts, RunSummary
from nrllm_report.aggregate.whole_run import RunRow, Tokens, WholeRuns
from nrllm_report.core.options import BuildOptions
from nrllm_report.core.schema import CANONICAL_SCHEMA, DENIAL_COLUMN
from nrllm_report.core.slugs import slug
from nrllm_report.core.tables import RUNS_TABLE
from nrllm_report.site import pages
from nrllm_report.site.fast_markup import outcome_badge
from nrllm_report.site.i18n import MILLISECONDS, SECONDS, SECONDS_FROM_MS
from nrllm_report.site.kit import PageKit
from nrllm_report.site.labels import status_text
from nrllm_report.site.timeline_plan import TimelinePlan, seconds_of_day

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
HOSTILE = ["<script>alert(1)</script>", 'a"b\'c', "Tom & Jerry &amp;", "Zürich ✓ 東京", "plain-7"]


def kit_of(language: str, *, whole: WholeRuns | None = None, denials: bool = False) -> PageKit:
    return pipeline.page_kits(BuildOptions(languages=("en", "de")), (1_700_000_000, 1_700_090_000), whole=whole,
                              denials_shown=denials)[language]


def summary_of(run: str, number: int) -> RunSummary:
    counts = OutcomeCounts(ok=number, failed=number % 2, cancelled=number % 3)
    return RunSummary(run=run, slug=slug(run), start=1_700_000_000 + number * 61 if number % 4 else None,
                      end=1_700_000_900 + number if number % 4 else None, duration_ms=1234.5 * number,
                      steps=number + 2, tool_calls=number + 1, counts=counts, servers=(run, "github"))


def whole_runs() -> WholeRuns:
    rows = {run: RunRow(uid=number, uuid=run, status=["finished", "failed", None][number % 3],
                        termination_reason=["provider_failed", None][number % 2], configuration=run if number else None,
                        be_user=None, created=None, finished=None, iterations=None, truncated=None, tokens=Tokens(),
                        estimated_cost=0.25 * number, error_class=None)
            for number, run in enumerate(HOSTILE[:-1])}
    return WholeRuns(present=frozenset({RUNS_TABLE}), rows=rows)


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("standalone", [False, True])
def test_a_run_page_is_what_jinja_makes_of_run_html(language: str, standalone: bool) -> None:
    kit = kit_of(language, denials=True)
    rows = ['<tr class="kind-tool"><td>1</td></tr>\n', '<tr class="kind-llm"><td>&lt;2&gt;</td></tr>\n']
    hrefs = {HOSTILE[0]: "../servers/x.html", "github": "../servers/github.html"}
    for number, run in enumerate(HOSTILE, 1):
        summary = summary_of(run, number)
        page = pages.run_page(kit, summary, rows=rows, span=(0, 2), server_href=hrefs, standalone=standalone)
        values = pages.run_page_values(kit, summary, rows=rows, server_href=hrefs)
        assert page == pages.run_page_by_jinja(kit, values, standalone=standalone)
        assert "<script>" not in page
        assert ("&lt;script&gt;" in page) == ("<script>" in run)


def run_view(kit: PageKit, summary: RunSummary) -> SimpleNamespace:
    """A run as the ``run_row`` macro takes it: its texts, formatted."""
    fmt, counts = kit.format, summary.counts
    row = kit.whole.rows.get(summary.run)
    header = kit.whole.header(summary.run, None)
    return SimpleNamespace(
        run=summary.run, slug=summary.slug, counts=counts, start=fmt.datetime(summary.start),
        duration=fmt.duration(summary.duration_ms), steps=fmt.number(summary.steps),
        tool_calls=fmt.number(summary.tool_calls), ok=fmt.number(counts.ok), failed=fmt.number(counts.failed),
        cancelled=fmt.number(counts.cancelled), row=row,
        status=None if row is None else status_text(kit, row.status, reason=row.termination_reason),
        cost="" if header is None or header.cost is None else fmt.cost(header.cost))


def calls_view(kit: PageKit, counts: OutcomeCounts) -> SimpleNamespace:
    number = kit.format.number
    return SimpleNamespace(counts=counts, ok=number(counts.ok), failed=number(counts.failed),
                           cancelled=number(counts.cancelled), denied=number(counts.denied))


def macro(kit: PageKit, name: str) -> Any:
    return getattr(kit.environment.get_template("macros.html").module, name)


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("whole", [None, "runs"])
@pytest.mark.parametrize("calls", [False, True])
def test_the_rows_of_a_list_of_runs_are_what_the_run_row_macro_makes(language: str, whole: str | None,
                                                                      calls: bool) -> None:
    kit = kit_of(language, whole=whole_runs() if whole else None, denials=calls)
    summaries = [summary_of(run, number) for number, run in enumerate(HOSTILE)]
    server_runs = {summary.run: OutcomeCounts(ok=number, failed=number % 2, cancelled=1, denied=number % 3)
                   for number, summary in enumerate(summaries)} if calls else None
    prefix = "../../runs/"
    fast = kit.run_rows.rows(summaries, run_prefix=prefix, server_runs=server_runs)
    by_macro = "".join(
        macro(kit, "run_row")(run_view(kit, summary), prefix, kit,
                              None if server_runs is None else calls_view(kit, server_runs[summary.run]))
        for summary in summaries)
    assert str(fast) == by_macro
    assert "<script>" not in fast


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_outcome_badge_is_what_its_macro_makes(language: str) -> None:
    kit = kit_of(language)
    for outcome in ("ok", "failed", "cancelled", None, ""):
        for text in HOSTILE:
            assert str(outcome_badge(outcome, text)) == str(macro(kit, "outcome_badge")(outcome, text))


STEP_ROWS = [
    {"kind": "llm", "outcome": None, "round": 1, "durationMs": 897.83, "crdate": 1_787_190_607,
     "finishReason": HOSTILE[0], "promptTokens": 2074, "completionTokens": 96, "totalTokens": 2170,
     "estimatedCost": 0.006145, "contentRedacted": True, "contentLength": 0, "thinkingLength": 12_345,
     "requestedToolCallCount": 2, "requestedToolNames": [HOSTILE[1], HOSTILE[2]]},
    {"kind": "request", "round": 1, "durationMs": 0.0, "crdate": 1_787_190_606, "toolSpecCount": 3,
     "toolSpecs": [HOSTILE[3]], "messageCount": 2, "contentRedacted": False, "artifactCount": None,
     "toolArtifactTypes": []},
    {"kind": "tool", "outcome": "failed", "round": 2, "durationMs": 15_000.0, "crdate": None, "toolName": HOSTILE[0],
     "server": HOSTILE[0], "toolResultLength": 1, "denial": "operator"},
    {"kind": "tool", "outcome": "ok", "round": 2, "durationMs": 4817.36, "crdate": 1_787_190_622,
     "toolName": "mcp_github_list_issues", "server": "github", "droppedSourceCount": 1, "droppedSources": HOSTILE},
    {"kind": "approval", "round": 1, "durationMs": 0.0, "crdate": 1_787_190_615, "approved": False, "decidedBy": 4},
    {"kind": HOSTILE[2], "outcome": "cancelled", "round": None, "durationMs": 12.25, "crdate": 1_787_190_699,
     "artifactCount": 2},
]


def step_view(kit: PageKit, step: dict[str, Any]) -> dict[str, Any]:
    """A step as the ``timeline_row`` macro takes it: its columns, its time and duration formatted."""
    fmt = kit.format
    second = None if step["crdate"] is None else seconds_of_day(pa.chunked_array([[step["crdate"]]]), fmt)[0].as_py()
    milliseconds = step["durationMs"]
    duration = ("" if not milliseconds else fmt.number(float(round(milliseconds, 1))) + MILLISECONDS
                if milliseconds < SECONDS_FROM_MS else fmt.number(float(round(milliseconds / 1000, 1))) + SECONDS)
    return {**step, "time": "" if second is None else fmt.time_of_day(second), "duration": duration}


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("approvers", [False, True])
def test_timeline_rows_are_what_the_timeline_row_macro_makes(language: str, approvers: bool) -> None:
    options = BuildOptions(languages=("en", "de"), show_approvers=approvers)
    kit = pipeline.page_kits(options, None, denials_shown=True)[language]
    rows = [{name: None for name in CANONICAL_SCHEMA.names} | {"run": "r", "sequence": number} | step
            for number, step in enumerate(STEP_ROWS)]
    schema = CANONICAL_SCHEMA.append(pa.field(DENIAL_COLUMN, pa.string()))
    steps = pa.Table.from_pylist(rows, schema=schema)
    hrefs = {HOSTILE[0]: "../servers/h.html?a=1&b=2"}
    fast = TimelinePlan(steps, {language: kit}, server_href=hrefs).rows(language, start=0, stop=len(rows))
    row = macro(kit, "timeline_row")
    by_macro = [str(row(step_view(kit, step), kit.format, hrefs, kit)) for step in steps.to_pylist()]
    assert fast == by_macro
    assert not any("<script>" in text for text in fast)


def template_expressions() -> list[tuple[str, str]]:
    return [(path.name, expression) for path in sorted(TEMPLATES.glob("*.html"))
            for expression in re.findall(r"{{(.*?)}}", path.read_text(encoding="utf-8"), re.S)]


def test_templates_take_their_links_from_urls() -> None:
    """No page, stylesheet or script path in a template, other than the names of templates."""
    for path in sorted(TEMPLATES.glob("*.html")):
        text = re.sub(r"{#.*?#}", "", path.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r'{%[-+]?\s*(extends|import|from|include)\s+"[^"]+"', "", text)
        assert not re.findall(r"[\w/-]+\.(?:html|css|js|svg)\b", text), path.name


def test_templates_do_no_arithmetic() -> None:
    """The numbers a template prints are computed in Python (``site/charts.py``): no ``+ - * /``
    outside a string in an expression."""
    for name, expression in template_expressions():
        outside_strings = re.sub(r'"[^"]*"|\'[^\']*\'', "", expression).strip("-+ \n")  # whitespace control
        assert not re.search(r"[-+*/]", outside_strings), (name, expression)
