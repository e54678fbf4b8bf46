"""The markup ``site/fast_markup.py`` makes in Python for speed is, byte for byte, what the
templates make of the same values: the run page's frame against ``run.html`` rendered by Jinja,
the rows of a list of runs against the ``run_row`` macro, a timeline's rows (merged with its
provider calls and decisions or not) against ``timeline_row``, ``call_row`` and
``decision_row``, the run header against ``run_header``, the waterfall against ``waterfall``,
the outcome badge against its macro. Hostile values (markup, quotes, ampersands, Unicode)
included. And the templates hold no page
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
from nrllm_report.aggregate.whole_run import CallRow, DecisionRow, RunHeader, RunRow, Spend, Tokens, WholeRuns
from nrllm_report.core.options import BuildOptions
from nrllm_report.core.schema import CANONICAL_SCHEMA, DENIAL_COLUMN
from nrllm_report.core.slugs import slug
from nrllm_report.core.tables import CALLS_TABLE, GOVERNANCE_TABLE, RUNS_TABLE
from nrllm_report.site import pages
from nrllm_report.site.fast_markup import header_markup, outcome_badge, waterfall_markup
from nrllm_report.site.i18n import MILLISECONDS, SECONDS, SECONDS_FROM_MS
from nrllm_report.site.kit import PageKit
from nrllm_report.site.labels import DECISION_LABEL_KEYS, label, status_text
from nrllm_report.site.run_header import SPENT_LABELS, cost_parts
from nrllm_report.site.timeline_plan import TimelinePlan, seconds_of_day
from nrllm_report.site.waterfall import (
    GROUP_ABOVE,
    MAX_LANES,
    OUTCOME_FLAGS,
    RunSteps,
    StepColumns,
    axis_ticks,
    entry_bars,
    round_lanes,
    waterfall_duration,
)
from nrllm_report.site.whole_run import MergedTimeline, merged_order
from nrllm_report.store.runs import RunSpan

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


def steps_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Steps of the canonical schema (and the denial column) from a few columns each."""
    schema = CANONICAL_SCHEMA.append(pa.field(DENIAL_COLUMN, pa.string()))
    return pa.Table.from_pylist([{name: None for name in schema.names} | row for row in rows], schema=schema)


def time_text(kit: PageKit, crdate: int | None) -> str:
    if crdate is None:
        return ""
    return kit.format.time_of_day(seconds_of_day(pa.chunked_array([[crdate]]), kit.format)[0].as_py())


T0 = 1_787_190_600
CALLS = [
    CallRow(T0 + 5, HOSTILE[0], HOSTILE[1], HOSTILE[2], HOSTILE[3], HOSTILE[0], True, None, 812, 95, True, 2,
            10, 20, 0.5, None),
    CallRow(None, None, None, None, None, None, False, HOSTILE[2], None, None, None, None, None, None, None, None),
    CallRow(T0 + 5, "chat", "openai", "gpt-4o", "openai", "gpt-4o", None, HOSTILE[0], 0, 15_000, False, 0,
            None, None, None, 3),
    CallRow(T0 + 99, HOSTILE[3], "anthropic", None, "mistral", None, True, "", 61_234, None, None, 1, 1, 1, 0.0,
            None),
]
DECISIONS = [
    DecisionRow(T0 + 5, "tool_denied", HOSTILE[0], HOSTILE[1], HOSTILE[2], HOSTILE[3], 4),
    DecisionRow(None, HOSTILE[1], None, None, None, None, None),
    DecisionRow(T0 + 1, "approval_required", "", "", "", "", None),
]


def merged_kit(language: str, *, calls: dict[str, list[CallRow]],
               decisions: dict[str, list[DecisionRow]]) -> PageKit:
    whole = WholeRuns(present=frozenset({CALLS_TABLE, GOVERNANCE_TABLE}), calls=calls, decisions=decisions)
    return kit_of(language, whole=whole, denials=True)


def call_view(kit: PageKit, call: CallRow, number: int) -> SimpleNamespace:
    """A provider call as the ``call_row`` macro takes it: its texts, formatted."""
    fmt = kit.format
    return SimpleNamespace(
        number=number, outcome="ok" if call.success else "failed", time=time_text(kit, call.crdate),
        operation=call.operation, provider=call.provider, model=call.model, swapped=call.swapped,
        served_provider=call.served_provider, served_model=call.served_model,
        latency="" if call.latency_ms is None else fmt.duration(call.latency_ms),
        ttft="" if call.ttft_ms is None else fmt.duration(call.ttft_ms), cache_hit=call.cache_hit,
        fallbacks=fmt.number(call.fallback_attempts) if call.fallback_attempts else "", error_class=call.error_class)


def decision_view(kit: PageKit, decision: DecisionRow, number: int) -> SimpleNamespace:
    return SimpleNamespace(number=number, time=time_text(kit, decision.crdate),
                           kind=label(kit, DECISION_LABEL_KEYS, value=decision.decision), tool=decision.tool,
                           reason=decision.reason, guardrail=decision.guardrail, detail=decision.detail)


@pytest.mark.parametrize("language", ["en", "de"])
def test_a_merged_timeline_is_what_the_row_macros_make(language: str) -> None:
    """Steps (with their Source cell), provider calls and decisions of two runs, in nr-llm's
    order, through the build's path (``MergedTimeline.rows``, parts joined by Arrow)."""
    runs = {"a": STEP_ROWS[:3], HOSTILE[0]: STEP_ROWS[3:]}
    calls = {"a": CALLS, HOSTILE[0]: CALLS[1:3]}
    decisions = {"a": DECISIONS[:1], HOSTILE[0]: DECISIONS}
    kit = merged_kit(language, calls=calls, decisions=decisions)
    rows = [{"run": run, "sequence": number} | step for run in sorted(runs) for number, step in enumerate(runs[run])]
    steps = steps_table(rows)
    hrefs = {HOSTILE[0]: "../servers/h.html?a=1&b=2"}
    plan = TimelinePlan(steps, {language: kit}, server_href=hrefs)
    spans, start = [], 0
    for run in sorted(runs):
        spans.append(RunSpan(run, start, start + len(runs[run])))
        start += len(runs[run])
    merged = MergedTimeline(plan, spans, whole=kit.whole, zone=kit.format)
    fast = merged.rows(kit, first=0, last=len(spans))
    step_row, call_row, decision_row = (macro(kit, name) for name in ("timeline_row", "call_row", "decision_row"))
    by_macro = []
    for span in spans:
        records = steps.slice(span.start, span.stop - span.start).to_pylist()
        keys = [(record["crdate"], record["sequence"]) for record in records]
        run_calls, run_decisions = calls[span.run], decisions[span.run]
        for source, place in merged_order(keys, run_calls, decisions=run_decisions):
            if source == "step":
                by_macro.append(str(step_row(step_view(kit, records[place]), kit.format, hrefs, kit)))
            elif source == "call":
                by_macro.append(str(call_row(call_view(kit, run_calls[place], place + 1), kit)))
            else:
                by_macro.append(str(decision_row(decision_view(kit, run_decisions[place], place + 1), kit)))
    assert fast == by_macro
    assert sum(row.startswith('<tr class="source-call') for row in fast) == len(CALLS) + 2
    assert not any("<script>" in row for row in fast)


def headers() -> list[RunHeader]:
    made = []
    for number, text in enumerate(HOSTILE):
        row = RunRow(uid=number, uuid=text if number % 2 else None,
                     status=["completed", "failed", None, HOSTILE[0], "cancelled"][number],
                     termination_reason=[None, "provider_failed", "cancelled", HOSTILE[1], None][number],
                     configuration=None if number == 3 else text, be_user=[None, 7, 0, 12, 3][number],
                     created=None if number == 2 else T0 + number, finished=T0 + 600 if number % 2 else None,
                     iterations=None if number == 1 else number * 1000,
                     truncated=[None, True, False, True, None][number],
                     tokens=Tokens(prompt=1234 * number or None, completion=None if number == 3 else 99, total=1333),
                     estimated_cost=0.01 * number, error_class=HOSTILE[4 - number] if number % 3 else None)
        source = ["telemetry", "steps", "run", "telemetry", "steps"][number]
        spent = Spend(Tokens(prompt=5 * number, completion=7, total=None if number == 4 else 5 * number + 7), 0.5)
        made.append(RunHeader(row, cost=None if number == 2 else 0.123456 * number, cost_source=source,
                              calls_priced=number, calls=2 * number, spent=spent,
                              spent_source=None if number == 2 else ["telemetry", "steps"][number % 2]))
    return made


def header_view(kit: PageKit, header: RunHeader) -> SimpleNamespace:
    """A run header as the ``run_header`` macro takes it: its texts, formatted."""
    fmt, row = kit.format, header.row

    def shown(value: int | None) -> str:
        return "–" if value is None else fmt.number(value)

    def tokens(counts: Tokens) -> SimpleNamespace:
        return SimpleNamespace(prompt=shown(counts.prompt), completion=shown(counts.completion),
                               total=shown(counts.total))

    cost, source = cost_parts(kit, header)
    spent = header.totals_differ and header.spent_source is not None
    return SimpleNamespace(
        uuid=row.uuid, status=row.status, status_text=status_text(kit, row.status, reason=row.termination_reason),
        configuration=row.configuration, created=fmt.datetime(row.created), finished=fmt.datetime(row.finished),
        rounds=shown(row.iterations), truncated=row.truncated, tokens=tokens(row.tokens), cost=cost,
        cost_source=source, spent=tokens(header.spent.tokens) if spent else None,
        spent_label=kit.gettext(SPENT_LABELS[header.spent_source]) if spent and header.spent_source else None,
        error_class=row.error_class, be_user=row.be_user)


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("approvers", [False, True])
def test_the_run_header_is_what_the_run_header_macro_makes(language: str, approvers: bool) -> None:
    options = BuildOptions(languages=("en", "de"), show_approvers=approvers)
    kit = pipeline.page_kits(options, None, denials_shown=True)[language]
    made = headers()
    fast = [header_markup(kit, header) for header in made]
    assert fast == [str(macro(kit, "run_header")(header_view(kit, header), kit)) for header in made]
    assert header_markup(kit, None) == ""
    assert sum("cost-source" in text for text in fast) == len(made)
    assert any(header.totals_differ for header in made) and not any("<script>" in text for text in fast)
    truncated = {"en": "(truncated)", "de": "(gekürzt)"}[language]  # the catalog's word, in each language
    assert sum(truncated in text for text in fast) == sum(bool(header.row.truncated) for header in made)


def waterfall_steps(count: int, *, durations: bool = True) -> list[dict[str, Any]]:
    """``count`` steps of one run: every kind, hostile tool names and kinds, every outcome and a
    denial, rounds that repeat (and one without a round), some undated."""
    kinds = ["llm", "tool", "tool", HOSTILE[1], "request", None, "approval"]
    outcomes = [None, "ok", "failed", "cancelled", None, None, None]
    rows = []
    for number in range(count):
        index = number % len(kinds)
        rows.append({"run": "r", "sequence": number, "kind": kinds[index], "outcome": outcomes[index],
                     "toolName": HOSTILE[number % len(HOSTILE)] if kinds[index] == "tool" else None,
                     "round": None if number == 3 else number // 2, "crdate": None if number % 5 == 4 else T0 + number,
                     "durationMs": (number * 137.5) % 20_000 if durations else None,
                     DENIAL_COLUMN: "operator" if number == 2 else None})
    return rows


def waterfall_view(kit: PageKit, steps: RunSteps, *, calls: list[CallRow],
                   decisions: list[DecisionRow]) -> SimpleNamespace:
    """A run's waterfall as the ``waterfall`` macro takes it, from the waterfall's geometry."""
    columns, fmt = steps.columns, kit.format
    entries = entry_bars(kit, calls, decisions=decisions)
    geometry = columns.geometry(steps.start, steps.stop, entries=entries)
    labels = columns.labels(kit.kind_labels)

    def bar(row: int, place: str, *, titled: bool) -> SimpleNamespace:
        return SimpleNamespace(sequence=columns.sequence[row], classes=columns.classes[row], place=place,
                               text="" if titled else labels[row], title=labels[row] if titled else "")

    def shown(value: Any) -> str:
        return fmt.number(value) if isinstance(value, int) else "–"

    lanes = None
    if steps.stop - steps.start > GROUP_ABOVE:
        lanes = [SimpleNamespace(rounds=lane.rounds, first=shown(lane.first), last=shown(lane.last),
                                 bars=[bar(steps.start + offset, geometry.places[offset], titled=True)
                                       for offset in lane.offsets]) for lane in round_lanes(steps)]
    entry_lanes = []
    for source in ("call", "governance"):
        bars = [SimpleNamespace(href=entry.href, classes=entry.classes, place=place, title=entry.label)
                for entry, place in zip(entries, geometry.entry_positions) if entry.lane == source]
        if bars:
            entry_lanes.append(SimpleNamespace(source_key=f"source.{source}", bars=bars))
    return SimpleNamespace(
        longest=[SimpleNamespace(text=labels[row], duration=waterfall_duration(fmt, columns.duration[row]))
                 for row in geometry.longest],
        legend=[name for name, flag in OUTCOME_FLAGS if geometry.flags & flag],
        ticks=[SimpleNamespace(x=x, text=waterfall_duration(fmt, tick)) for x, tick in axis_ticks(geometry.total)],
        lanes=lanes, bars=[bar(row, place, titled=False)
                           for row, place in zip(range(steps.start, steps.stop), geometry.places)],
        entry_lanes=entry_lanes)


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize(("count", "durations", "entries"), [
    (7, True, True), (7, False, False), (1, True, False), (GROUP_ABOVE + 1, True, False), (3 * MAX_LANES, True, True),
])
def test_the_waterfall_is_what_the_waterfall_macro_makes(language: str, count: int, durations: bool,
                                                         entries: bool) -> None:
    """A short run's bars, a long run's lanes of rounds (shared past ``MAX_LANES``), lanes of
    provider calls and decisions, a run without durations; the legend of what its bars show."""
    kit = kit_of(language)
    columns = StepColumns(steps_table(waterfall_steps(count + 2, durations=durations)))
    steps = RunSteps(columns, 2, count + 2)  # rows of a table the run shares with others
    calls, decisions = (CALLS, DECISIONS) if entries else ([], [])
    fast = waterfall_markup(kit, steps, calls=calls, decisions=decisions)
    by_macro = str(macro(kit, "waterfall")(waterfall_view(kit, steps, calls=calls, decisions=decisions), kit))
    assert fast == by_macro
    assert fast.startswith('<figure class="waterfall">') and "<script>" not in fast
    assert ('class="lane"><span>' in fast) == (entries or count > GROUP_ABOVE)
    assert waterfall_markup(kit, RunSteps(columns, 1, 1)) == ""


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


def list_page_by_jinja(kit: PageKit, run_list: pages.RunList, *, path: str, chunk: list[RunSummary],
                       pagination: pages.Pagination) -> str:
    """A page of a list of runs as Jinja renders ``run_list.html``, its parts made apart from ``run_list_pages``."""
    values = {"page_number": pagination.current, "page_links": macro(kit, "pagination")(pagination),
              "run_rows": kit.run_rows.rows(chunk, run_prefix=pages.urls.runs_prefix_from(path),
                                            server_runs=run_list.calls),
              **{f"switch {number}": switch.href for number, switch in enumerate(kit.switches(path))}}
    return pages.run_list_page_by_jinja(kit, run_list, path=path, values=values)


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("title", [HOSTILE[0], "Runs that called a\x00page_number\x00b"])
def test_the_pages_of_a_list_of_runs_are_what_jinja_makes_of_run_list_html(
        language: str, title: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kit = kit_of(language, whole=whole_runs(), denials=True)
    summaries = [summary_of(HOSTILE[number % len(HOSTILE)] + f"-{number}", number) for number in range(1, 700)]
    calls = {summary.run: OutcomeCounts(ok=1, failed=number % 2, denied=number % 3)
             for number, summary in enumerate(summaries)}
    run_list = pages.RunList("servers/x/tools/" + slug(HOSTILE[1]) + "/runs", title, summaries, calls=calls,
                             called=HOSTILE[2], around=(("a.html", HOSTILE[3]), None), up=("../x.html", HOSTILE[1]))
    filled = []
    original_fill = pages.PagedListFrame.fill
    monkeypatch.setattr(pages.PagedListFrame, "fill",
                        lambda frame, values: filled.append(1) or original_fill(frame, values))
    made = list(pages.run_list_pages(kit, run_list))
    expected = [(path, list_page_by_jinja(kit, run_list, path=path, chunk=list(chunk), pagination=pagination))
                for path, chunk, pagination in pages.paginated(language, run_list.stem, items=summaries,
                                                               per_page=pages.RUNS_PER_INDEX_PAGE)]
    assert [path for path, _page in made] == [path for path, _page in expected] and len(made) == 3
    for (path, page), (_path, jinja_page) in zip(made, expected):
        assert page == jinja_page, path
        assert "<script>" not in page
    number = kit.format.number
    assert kit.gettext("Page %(page)s of %(pages)s.") % {"page": 2, "pages": 3} in made[1][1]
    assert made[2][1].count('<tr class="run-') == len(summaries) - 2 * pages.RUNS_PER_INDEX_PAGE
    assert number(len(summaries)) in made[2][1]
    # The frame is checked against page 1, then fills pages 2 and 3, unless the title holds its marker.
    assert len(filled) == (1 if "\x00" in title else 3)
