"""Jinja2 environment and pages. Pages get plain, pre-formatted rows; Jinja only lays them out.

Templates receive the dataclasses below and timeline rows made by ``TimelineMarkup``
from the canonical columns, which are the allow-list: nothing else reaches a page.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import date
from typing import Any, Sequence

import jinja2
from markupsafe import Markup, escape

from . import __version__
from .aggregate import OutcomeCounts, RunSummary, ServerStats
from .i18n import LANGUAGES, OUTCOME_LABEL_KEYS, Formatter, translations
from .model import KNOWN_KINDS, N_, Outcome, Problem, Verdict
from .resources import resource_path

LANGUAGE_NAMES = {"en": "English", "de": "Deutsch"}
KIND_LABEL_KEYS = {kind: f"kind.{kind}" for kind in KNOWN_KINDS}
VERDICT_LABEL_KEYS = {
    Verdict.HEALTHY: N_("verdict.healthy"),
    Verdict.FLAKY: N_("verdict.flaky"),
    Verdict.FAILING: N_("verdict.failing"),
    Verdict.TOO_FEW_CALLS: N_("verdict.too-few-calls"),
}
# Extraction markers for the kind labels, which are selected by the kind's value.
_KIND_LABELS = (
    N_("kind.context"), N_("kind.request"), N_("kind.llm"), N_("kind.tool"),
    N_("kind.assembled"), N_("kind.dropped"), N_("kind.approval"), N_("kind.input"),
)
assert set(_KIND_LABELS) == set(KIND_LABEL_KEYS.values())
assert all(key == f"verdict.{verdict.value}" for verdict, key in VERDICT_LABEL_KEYS.items())

CSP_SITE = (
    "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; "
    "base-uri 'none'; form-action 'none'"
)


def make_environment(language: str) -> jinja2.Environment:
    """The one Jinja2 environment per language: autoescaped, strict, with its catalog."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_path("templates"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.i18n"],
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.install_gettext_translations(translations(language), newstyle=True)  # type: ignore[attr-defined]
    return environment


def stylesheet() -> str:
    return (resource_path("templates") / "assets" / "style.css").read_text(encoding="utf-8")


def inline_style_csp(css: str) -> str:
    """A policy for the single-file timeline: only the one inlined stylesheet, by its hash."""
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


@dataclass(frozen=True)
class SiteSettings:
    title: str | None
    languages: tuple[str, ...]
    timezone_name: str
    min_calls: int
    time_range: tuple[int, int] | None


class PageKit:
    """What every page of one language needs: environment, formatter, labels."""

    def __init__(self, language: str, formatter: Formatter, settings: SiteSettings) -> None:
        self.language = language
        self.environment = make_environment(language)
        self.gettext = translations(language).gettext
        self.format = formatter
        self.settings = settings
        self.outcome_labels = {outcome.value: self.gettext(key) for outcome, key in OUTCOME_LABEL_KEYS.items()}
        self.kind_labels = {kind: self.gettext(key) for kind, key in KIND_LABEL_KEYS.items()}
        self.verdict_labels = {verdict.value: self.gettext(key) for verdict, key in VERDICT_LABEL_KEYS.items()}
        self.title = settings.title if settings.title else self.gettext("nr-llm agent runs")
        time_range = settings.time_range or (None, None)
        self.time_range = self.range_text(*time_range)
        self.timeline = TimelineMarkup(self)
        self._skeletons: dict[tuple[str, bool], Any] = {}

    def range_text(self, first: int | None, last: int | None) -> str:
        """The header's time range: of the whole data, or of the one run a page shows."""
        if first is None or last is None:
            return self.gettext("no dated steps")
        return self.gettext("%(first)s to %(last)s") % {
            "first": self.format.datetime(first),
            "last": self.format.datetime(last),
        }

    def skeleton(self, name: str, make: Any, variant: bool = False) -> Any:
        """A per-language page skeleton, made once on first use."""
        key = (name, variant)
        if key not in self._skeletons:
            self._skeletons[key] = make()
        return self._skeletons[key]

    def servers_fact(self, servers: Sequence[str], server_href: dict[str, str]) -> Markup:
        """The run page's list of servers it called, linked where the site has their page."""
        if not servers:
            return Markup("")
        links = [
            Markup('<a href="{0}">{1}</a>').format(server_href[server], server) if server in server_href
            else escape(server)
            for server in servers
        ]
        return Markup('<div><dt>{0}</dt><dd>{1}</dd></div>').format(self.gettext("Servers"), Markup(", ").join(links))

    def render(self, template: str, path: str, **context: Any) -> str:
        """A page at ``path`` (relative to the site root), with the chrome every page has."""
        depth = path.count("/")
        root = "../" * depth
        rest = path.split("/", 1)[1] if "/" in path else path
        switches = [
            {"language": other, "name": LANGUAGE_NAMES[other], "href": f"{root}{other}/{rest}"}
            for other in self.settings.languages
            if other != self.language or (depth == 0 and len(self.settings.languages) > 1)
        ]
        page = {
            "lang": self.language,
            "root": root,
            "here": root + self.language + "/",
            "title": self.title,
            "time_range": self.time_range,
            "timezone": self.settings.timezone_name,
            "switches": switches,
            "csp": CSP_SITE,
            "inline_css": None,
            "standalone": False,
            "version": __version__,
        }
        page.update(context.pop("page", {}))
        return self.environment.get_template(template).render(page=page, labels=self, **context)


# ---------------------------------------------------------------- rows for templates


@dataclass(frozen=True, slots=True)
class CountsRow:
    calls: str
    ok: str
    failed: str
    cancelled: str
    failure_rate: str
    interval: str


def counts_row(counts: OutcomeCounts, kit: PageKit) -> CountsRow:
    number = kit.format.number
    interval = counts.wilson_interval()
    return CountsRow(
        calls=number(counts.calls),
        ok=number(counts.ok),
        failed=number(counts.failed),
        cancelled=number(counts.cancelled),
        failure_rate=kit.format.percent(counts.failure_rate),
        interval="–" if interval is None else f"{kit.format.percent(interval[0])} – {kit.format.percent(interval[1])}",
    )


@dataclass(frozen=True, slots=True)
class RunRow:
    run: str
    href: str
    start: str
    duration: str
    steps: str
    tool_calls: str
    ok: str
    failed: str
    cancelled: str
    has_failure: bool
    only_cancelled: bool


def run_row(summary: RunSummary, kit: PageKit, href: str) -> RunRow:
    number = kit.format.number
    counts = summary.counts
    return RunRow(
        run=summary.run,
        href=href,
        start=kit.format.datetime(summary.start),
        duration=kit.format.duration(summary.duration_ms),
        steps=number(summary.steps),
        tool_calls=number(summary.tool_calls),
        ok=number(counts.ok),
        failed=number(counts.failed),
        cancelled=number(counts.cancelled),
        has_failure=counts.failed > 0,
        only_cancelled=counts.failed == 0 and counts.cancelled > 0,
    )


# Columns of the checked-steps table a timeline row reads (see columnar.CHECKED_SCHEMA).
TIMELINE_COLUMNS = (
    "sequence", "crdate", "kind", "round", "durationMs", "toolName", "server", "outcome",
    "finishReason", "promptTokens", "completionTokens", "totalTokens", "requestedToolCallCount",
    "messageCount", "toolSpecCount", "artifactCount", "droppedSourceCount", "estimatedCost",
    "approved", "decidedBy",
)
COUNT_FACT_LABELS = (
    ("promptTokens", N_("Prompt tokens")),
    ("completionTokens", N_("Completion tokens")),
    ("totalTokens", N_("Total tokens")),
    ("requestedToolCallCount", N_("Requested tool calls")),
    ("messageCount", N_("Messages sent")),
    ("toolSpecCount", N_("Tool specs")),
    ("artifactCount", N_("Artifacts")),
    ("droppedSourceCount", N_("Dropped sources")),
)


def fact_opening(label: str) -> str:
    """The markup of a fact up to its value: ``<span class="fact">…label…</span> ``."""
    return f'<span class="fact"><span class="fact-label">{escape(label)}</span> '


class TimelineMarkup:
    """Timeline rows as HTML, built in Python: per cell, Jinja costs more than the page.

    Every data string passes through markupsafe's ``escape``; labels come from the
    catalog, escaped once per language.
    """

    def __init__(self, kit: "PageKit") -> None:
        _ = kit.gettext
        self.format = kit.format
        self.kinds = {kind: escape(label) for kind, label in kit.kind_labels.items()}
        self.badges = {
            value: Markup('<span class="outcome outcome-{0}"><span class="outcome-mark" aria-hidden="true">'
                          "</span>{1}</span>").format(value, label)
            for value, label in kit.outcome_labels.items()
        }
        self.no_outcome = Markup('<span class="outcome outcome-none">–</span>')
        # Each fact opens with its label; the value and "</span>" follow.
        self.count_labels = tuple((name, fact_opening(_(label))) for name, label in COUNT_FACT_LABELS)
        self.finish_label = fact_opening(_("Finish reason"))
        self.cost_label = fact_opening(_("Cost"))
        self.approval_label = fact_opening(_("Approval"))
        self.approval_values = {True: escape(_("approved")), False: escape(_("denied"))}
        self.decided_label = fact_opening(_("Decided by"))

    def rows(self, columns: dict[str, list[Any]], start: int, stop: int, server_href: dict[str, str]) -> Markup:
        """The ``<tr>`` elements of steps ``start``..``stop`` of the column lists."""
        number, time_of, duration_of, kinds = self.format.number, self.format.time, self.format.duration, self.kinds
        sequence, crdate, kind, round_number = (columns[name] for name in ("sequence", "crdate", "kind", "round"))
        duration, tool, server, outcome = (columns[name] for name in ("durationMs", "toolName", "server", "outcome"))
        html = []
        for index in range(start, stop):
            step_kind, step_server, step_outcome = kind[index], server[index], outcome[index]
            if step_server is None:
                server_cell = ""
            elif step_server in server_href:
                server_cell = f'<a href="{escape(server_href[step_server])}">{escape(step_server)}</a>'
            else:
                server_cell = escape(step_server)
            kind_label = kinds.get(step_kind)
            step_tool = tool[index]
            step_duration = duration[index]
            html.append(
                f'<tr class="kind-{step_kind if kind_label else "other"}'
                f'{f" step-{step_outcome}" if step_outcome else ""}">\n'
                f'  <td class="number">{sequence[index]}</td><td>{time_of(crdate[index])}</td>'
                f"<td>{kind_label or escape(step_kind)}</td>"
                f'<td class="number">{number(round_number[index])}</td>'
                f'<td class="number">{duration_of(step_duration) if step_duration else ""}</td>\n'
                f'  <td>{f"<code>{escape(step_tool)}</code>" if step_tool else ""}</td>\n'
                f"  <td>{server_cell}</td>\n"
                f"  <td>{self.badges[step_outcome] if step_outcome else self.no_outcome}</td>\n"
                f'  <td class="details">{self.facts(columns, index)}</td>\n</tr>\n'
            )
        return Markup("".join(html))

    def facts(self, columns: dict[str, list[Any]], index: int) -> str:
        """The allow-listed facts of a step, in a fixed order."""
        number, facts = self.format.number, []
        finish_reason = columns["finishReason"][index]
        if finish_reason is not None:
            facts.append(f'{self.finish_label}{escape(finish_reason)}</span>')
        for name, label in self.count_labels:
            value = columns[name][index]
            if value is not None:
                facts.append(f"{label}{number(value)}</span>")
        cost = columns["estimatedCost"][index]
        if cost is not None:
            facts.append(f"{self.cost_label}{self.format.cost(cost)}</span>")
        approved = columns["approved"][index]
        if approved is not None:
            facts.append(f"{self.approval_label}{self.approval_values[approved]}</span>")
        decided_by = columns["decidedBy"][index]
        if decided_by is not None:
            facts.append(f"{self.decided_label}{number(decided_by)}</span>")
        return "".join(facts)


@dataclass(frozen=True, slots=True)
class ProblemRow:
    input: str
    row: str
    run: str | None
    sequence: str
    rule: str
    severity: str
    message: str


def problem_row(problem: Problem, kit: PageKit) -> ProblemRow:
    return ProblemRow(
        input=problem.input,
        row=kit.format.number(problem.row),
        run=problem.run,
        sequence="" if problem.sequence is None else kit.format.number(problem.sequence),
        rule=problem.rule.value,
        severity=problem.severity.value,
        message=problem.text(kit.gettext),
    )


@dataclass(frozen=True, slots=True)
class ServerRow:
    server: str
    href: str
    counts: CountsRow
    first_seen: str
    last_seen: str
    verdict: str
    verdict_label: str


def server_row(stats: ServerStats, kit: PageKit, href: str) -> ServerRow:
    verdict = stats.counts.verdict(kit.settings.min_calls).value
    return ServerRow(
        server=stats.server,
        href=href,
        counts=counts_row(stats.counts, kit),
        first_seen=kit.format.datetime(stats.first_seen),
        last_seen=kit.format.datetime(stats.last_seen),
        verdict=verdict,
        verdict_label=kit.verdict_labels[verdict],
    )


# ---------------------------------------------------------------- the per-day chart


@dataclass(frozen=True, slots=True)
class ChartBar:
    x: int
    segments: tuple[tuple[str, int, int], ...]  # (outcome value, y, height)
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    plot_top: int
    plot_bottom: int
    bar_width: int
    bars: tuple[ChartBar, ...]
    first_day: str
    last_day: str
    max_calls: str


CHART_BAR_WIDTH = 10
CHART_GAP = 2
CHART_PLOT_HEIGHT = 120
CHART_MARGIN = 20


def day_chart(days: dict[date, OutcomeCounts], kit: PageKit) -> Chart | None:
    """Calls per day, ok / failed / cancelled stacked, every day of the span shown."""
    if not days:
        return None
    first, last = min(days), max(days)
    span = (last - first).days + 1
    peak = max(counts.ok + counts.failed + counts.cancelled for counts in days.values()) or 1
    bars = []
    bottom = CHART_MARGIN + CHART_PLOT_HEIGHT
    for index in range(span):
        day = date.fromordinal(first.toordinal() + index)
        counts = days.get(day, OutcomeCounts())
        y = bottom
        segments = []
        for outcome in Outcome:
            value = counts.of(outcome)
            height = round(value * CHART_PLOT_HEIGHT / peak)
            if value and height == 0:
                height = 1
            y -= height
            if height:
                segments.append((outcome.value, y, height))
        title = "%s: %s %s, %s %s, %s %s" % (
            kit.format.date(day),
            kit.format.number(counts.ok), kit.outcome_labels["ok"],
            kit.format.number(counts.failed), kit.outcome_labels["failed"],
            kit.format.number(counts.cancelled), kit.outcome_labels["cancelled"],
        )
        bars.append(ChartBar(CHART_MARGIN + index * (CHART_BAR_WIDTH + CHART_GAP), tuple(segments), title))
    width = CHART_MARGIN * 2 + span * (CHART_BAR_WIDTH + CHART_GAP)
    return Chart(
        width=width,
        height=bottom + CHART_MARGIN + 10,
        plot_top=CHART_MARGIN,
        plot_bottom=bottom,
        bar_width=CHART_BAR_WIDTH,
        bars=tuple(bars),
        first_day=kit.format.date(first),
        last_day=kit.format.date(last),
        max_calls=kit.format.number(peak),
    )


def languages_or_default(languages: Sequence[str]) -> tuple[str, ...]:
    return tuple(languages) if languages else LANGUAGES

