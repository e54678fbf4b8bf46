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
import pyarrow as pa
import pyarrow.compute as pc
from markupsafe import Markup, escape

from . import __version__
from .aggregate import OutcomeCounts, RunSummary, ServerStats
from .i18n import LANGUAGES, MILLISECONDS, OUTCOME_LABEL_KEYS, SECONDS, SECONDS_FROM_MS, Formatter, translations
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
    """Timeline rows as HTML, built column by column: per cell, Jinja costs more than the page.

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
        self._cells: dict[str, dict[Any, str]] = {}

    def row_markup(self, window: pa.Table, server_href: dict[str, str]) -> list[str]:
        """One ``<tr>`` per row of ``window`` (a slice of the checked steps), as strings.

        Each cell's text is made in Python once per distinct value in the window and
        spread over the rows by Arrow, which also joins the cells: a million steps
        cost a few thousand formatting calls, not a million.
        """
        if window.num_rows == 0:
            return []
        column = window.column
        fmt = self.format
        cells: list[pa.ChunkedArray | pa.Array | str] = [
            '<tr class="kind-',
            self._spread("kind class", column("kind"), lambda kind: kind if kind in self.kinds else "other"),
            self._spread("step class", column("outcome"), lambda outcome: f" step-{outcome}"),
            '">\n  <td class="number">',
            pc.cast(column("sequence"), pa.string()),
            "</td><td>",
            self._spread("time", self._seconds_of_day(column("crdate")), fmt.time_of_day),
            "</td><td>",
            self._spread("kind", column("kind"), lambda kind: self.kinds.get(kind) or escape(kind)),
            '</td><td class="number">',
            self._spread("round", column("round"), fmt.number),
            '</td><td class="number">',
            self._durations(column("durationMs")),
            "</td>\n  <td>",
            self._spread("tool", column("toolName"), lambda name: f"<code>{escape(name)}</code>" if name else ""),
            "</td>\n  <td>",
            _spread_values(column("server"), lambda server: (
                f'<a href="{escape(server_href[server])}">{escape(server)}</a>' if server in server_href
                else escape(server)), pa.string()).fill_null(""),
            "</td>\n  <td>",
            self._spread("outcome", column("outcome"), self.badges.__getitem__, self.no_outcome),
            '</td>\n  <td class="details">',
            self._spread("finishReason", column("finishReason"), lambda reason: f"{self.finish_label}{escape(reason)}</span>"),
            *[self._spread(name, column(name), lambda value, label=label: f"{label}{fmt.number(value)}</span>")
              for name, label in self.count_labels],
            self._spread("estimatedCost", column("estimatedCost"), lambda cost: f"{self.cost_label}{fmt.cost(cost)}</span>"),
            self._spread("approved", column("approved"), lambda approved: f"{self.approval_label}{self.approval_values[approved]}</span>"),
            self._spread("decidedBy", column("decidedBy"), lambda uid: f"{self.decided_label}{fmt.number(uid)}</span>"),
            "</td>\n</tr>\n",
        ]
        joined = pc.binary_join_element_wise(*cells, "")
        return joined.to_pylist()

    def _spread(self, cell: str, values: pa.ChunkedArray, make: Any, missing: str = "") -> pa.ChunkedArray:
        """``make(value)`` as text for each distinct value, spread over the rows; ``missing`` for nulls."""
        cache = self._cells.setdefault(cell, {})
        return pc.fill_null(_spread_values(values, lambda value: str(make(value)), pa.string(), cache), missing)

    def _seconds_of_day(self, crdate: pa.ChunkedArray) -> pa.ChunkedArray:
        """The second of the local day of each step (the zone's offset taken per minute)."""
        minutes = pc.divide(crdate, 60)
        offsets = _spread_values(minutes, lambda minute: self.format.offset_at(minute * 60), pa.int64(),
                                 self._cells.setdefault("offset", {}))
        local = pc.cast(pc.add(crdate, offsets), pa.float64())
        days = pc.floor(pc.divide(local, 86_400.0))
        return pc.cast(pc.subtract(local, pc.multiply(days, 86_400.0)), pa.int64())

    def _durations(self, milliseconds: pa.ChunkedArray) -> pa.ChunkedArray:
        """Step durations as ``Formatter.duration`` writes them; empty for none (0).

        Rounded first, so each distinct shown value is formatted once, not each raw one.
        """
        number = self.format.number
        in_milliseconds = self._spread("ms", _tenths(milliseconds), lambda value: number(value) + MILLISECONDS)
        in_seconds = self._spread("s", _tenths(pc.divide(milliseconds, 1000.0)), lambda value: number(value) + SECONDS)
        text = pc.if_else(pc.less(milliseconds, SECONDS_FROM_MS), in_milliseconds, in_seconds)
        return pc.if_else(pc.equal(milliseconds, 0.0), "", text)


CELL_CACHE_LIMIT = 200_000
TENTHS_EXACT_BELOW = 1e15


def _tenths(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Values rounded half-even to one decimal as their decimal text says (``round_tenths``)."""
    exact = pc.less(values, TENTHS_EXACT_BELOW)
    decimals = pc.cast(pc.if_else(exact, values, 0.0), pa.decimal128(38, 6))
    rounded = pc.cast(pc.round(decimals, 1, round_mode="half_to_even"), pa.float64())
    return pc.if_else(exact, rounded, values)


def _spread_values(
    values: pa.ChunkedArray, make: Any, type_: pa.DataType, cache: dict[Any, Any] | None = None
) -> pa.ChunkedArray:
    """``make(value)`` for each distinct value (remembered in ``cache``), spread over the rows."""
    distinct = pc.unique(values).drop_null()
    cache = {} if cache is None else cache
    made = []
    for value in distinct.to_pylist():
        result = cache.get(value)
        if result is None:
            result = make(value)
            if len(cache) < CELL_CACHE_LIMIT:
                cache[value] = result
        made.append(result)
    return pc.take(pa.array(made, type_), pc.index_in(values, value_set=distinct))


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

