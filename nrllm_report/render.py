"""Jinja2 environment and pages. Pages get plain, pre-formatted rows; Jinja only lays them out.

Templates receive the dataclasses below, never a Step: a Step's fields are the
allow-list, and these rows choose from it what a page may show.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import date
from typing import Any, Sequence

import jinja2

from . import __version__
from .aggregate import OutcomeCounts, RunSummary, ServerStats
from .i18n import LANGUAGES, OUTCOME_LABEL_KEYS, Formatter, translations
from .model import KNOWN_KINDS, N_, Outcome, Problem, Step, Verdict
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

    def range_text(self, first: int | None, last: int | None) -> str:
        """The header's time range: of the whole data, or of the one run a page shows."""
        if first is None or last is None:
            return self.gettext("no dated steps")
        return self.gettext("%(first)s to %(last)s") % {
            "first": self.format.datetime(first),
            "last": self.format.datetime(last),
        }

    def render(self, template: str, path: str, **context: Any) -> str:
        """A page at ``path`` (relative to the site root), with the chrome every page has."""
        depth = path.count("/")
        root = "../" * depth
        rest = path.split("/", 1)[1] if "/" in path else path
        switches = [
            {"language": other, "name": LANGUAGE_NAMES[other], "href": f"{root}{other}/{rest}"}
            for other in self.settings.languages
            if other != self.language
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


@dataclass(frozen=True, slots=True)
class TimelineRow:
    sequence: int
    time: str
    kind_class: str
    kind_label: str
    round: str
    duration: str
    tool_name: str | None
    server: str | None
    server_href: str | None
    outcome: str | None
    outcome_label: str | None
    facts: tuple[tuple[str, str], ...]


def step_facts(step: Step, kit: PageKit) -> tuple[tuple[str, str], ...]:
    """The allow-listed facts of a step as (label, value) pairs, in a fixed order."""
    _ = kit.gettext
    number = kit.format.number
    facts: list[tuple[str, str]] = []
    if step.finish_reason is not None:
        facts.append((_("Finish reason"), step.finish_reason))
    for label, value in (
        (N_("Prompt tokens"), step.prompt_tokens),
        (N_("Completion tokens"), step.completion_tokens),
        (N_("Total tokens"), step.total_tokens),
        (N_("Requested tool calls"), step.requested_tool_call_count),
        (N_("Messages sent"), step.message_count),
        (N_("Tool specs"), step.tool_spec_count),
        (N_("Artifacts"), step.artifact_count),
        (N_("Dropped sources"), step.dropped_source_count),
    ):
        if value is not None:
            facts.append((_(label), number(value)))
    if step.estimated_cost is not None:
        facts.append((_("Cost"), kit.format.cost(step.estimated_cost)))
    if step.approved is not None:
        facts.append((_("Approval"), _("approved") if step.approved else _("denied")))
    if step.decided_by is not None:
        facts.append((_("Decided by"), number(step.decided_by)))
    return tuple(facts)


def timeline_rows(steps: Sequence[Step], kit: PageKit, server_href: dict[str, str]) -> list[TimelineRow]:
    rows = []
    for step in steps:
        outcome = step.outcome.value if step.outcome is not None else None
        rows.append(
            TimelineRow(
                sequence=step.sequence,
                time=kit.format.time(step.crdate),
                kind_class=step.kind if step.kind in KNOWN_KINDS else "other",
                kind_label=kit.kind_labels.get(step.kind, step.kind),
                round=kit.format.number(step.round),
                duration=kit.format.duration(step.duration_ms) if step.duration_ms else "",
                tool_name=step.tool_name,
                server=step.server,
                server_href=server_href.get(step.server) if step.server else None,
                outcome=outcome,
                outcome_label=kit.outcome_labels[outcome] if outcome else None,
                facts=step_facts(step, kit),
            )
        )
    return rows


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

