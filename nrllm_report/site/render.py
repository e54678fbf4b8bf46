"""Jinja2 environment and pages. Pages get plain, pre-formatted rows; Jinja only lays them out.

Templates receive the dataclasses below and timeline rows made by ``TimelineMarkup``
from the canonical columns, which are the allow-list: nothing else reaches a page.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from functools import cached_property
from typing import Any, cast

import jinja2
import pyarrow as pa
import pyarrow.compute as pc
from markupsafe import Markup, escape

from .. import __version__
from ..aggregate.changepoints import Direction
from ..aggregate.figures import OutcomeCounts, RunSummary, ServerStats
from ..aggregate.health import RateChange, ServerHealth
from ..aggregate.verdicts import Proportion
from ..aggregate.whole_run import WholeRuns
from ..core.lists import joined_items, split_items
from ..core.model import KNOWN_KINDS, N_, Outcome, Problem, Verdict
from ..core.resources import resource_path
from ..core.schema import DENIAL_COLUMN
from . import urls
from .i18n import DENIAL_LABELS, MILLISECONDS, OUTCOME_LABEL_KEYS, SECONDS, SECONDS_FROM_MS, Formatter, translations
from .labels import status_text
from .waterfall import StepColumns

LANGUAGE_NAMES = {"en": "English", "de": "Deutsch"}
KIND_LABEL_KEYS = {kind: f"kind.{kind}" for kind in KNOWN_KINDS}
VERDICT_LABEL_KEYS = {
    Verdict.DOWN: N_("verdict.down"),
    Verdict.FLAKY: N_("verdict.flaky"),
    Verdict.SLOW: N_("verdict.slow"),
    Verdict.UNCERTAIN: N_("verdict.uncertain"),
    Verdict.TOO_FEW_CALLS: N_("verdict.too-few-calls"),
    Verdict.RELIABLE: N_("verdict.reliable"),
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


DENIED = N_("Denied")  # the heading and fact of denied calls, where a site shows them

NO_OUTCOME_BADGE = Markup('<span class="outcome outcome-none">–</span>')


def outcome_badge(outcome: str | None, text: str) -> Markup:
    """The one badge of an outcome, in templates and code alike: its word beside a mark,
    so that it never depends on colour; a step without an outcome shows a dash."""
    if not outcome:
        return NO_OUTCOME_BADGE
    return Markup('<span class="outcome outcome-{0}"><span class="outcome-mark" aria-hidden="true"></span>'
                  "{1}</span>").format(outcome, text)


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
    environment.globals["outcome_badge"] = outcome_badge
    return environment


def stylesheet() -> str:
    return (resource_path("templates") / "assets" / "style.css").read_text(encoding="utf-8")


def whole_run_stylesheet() -> str:
    """What the whole run and denied calls add to the stylesheet (``PageKit.whole_run_styled``)."""
    return (resource_path("templates") / "assets" / "whole-run.css").read_text(encoding="utf-8")


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
    show_approvers: bool = False


class PageKit:
    """What every page of one language needs: environment, formatter, labels."""

    def __init__(self, language: str, formatter: Formatter, settings: SiteSettings,
                 whole: WholeRuns | None = None, *, spend: Mapping[str, Any] | None = None,
                 denials_shown: bool = False) -> None:
        """``whole``: the runs' rows, calls and decisions; ``spend``: what each run's steps say it
        spent; ``denials_shown``: the site tells denied calls apart (``SiteData.denials_known``)."""
        self.language = language
        self.whole = whole if whole is not None else WholeRuns()
        self.spend = spend if spend is not None else {}
        self.denials_shown = denials_shown
        self.environment = make_environment(language)
        self.gettext = translations(language).gettext
        self.ngettext = translations(language).ngettext
        self.format = formatter
        self.settings = settings
        self.outcome_labels = {outcome.value: self.gettext(key) for outcome, key in OUTCOME_LABEL_KEYS.items()}
        self.kind_labels = {kind: self.gettext(key) for kind, key in KIND_LABEL_KEYS.items()}
        self.denial_labels = {denial.value: self.gettext(key) for denial, key in DENIAL_LABELS.items()}
        self.verdict_labels = {verdict.value: self.gettext(key) for verdict, key in VERDICT_LABEL_KEYS.items()}
        self.title = settings.title if settings.title else self.gettext("nr-llm agent runs")
        self._range_template = self.gettext("%(first)s to %(last)s")
        time_range = settings.time_range or (None, None)
        self.time_range = self.range_text(*time_range)
        self.timeline = TimelineMarkup(self)
        self._skeletons: dict[tuple[str, bool], Any] = {}
        self._servers_facts: dict[tuple[int, tuple[str, ...]], str] = {}
        self._run_cells_made: dict[str, tuple[str, str]] = {}
        self._call_cells_made: dict[tuple[int, int, int, int], str] = {}
        self._run_row_cells: dict[tuple[str | None, str | None, str | None], str] = {}  # status and configuration
        self._servers_label = escape(self.gettext("Servers"))
        failed_call = escape(self.gettext(N_("has a failed call")))
        self._failed_mark = " " + outcome_badge(Outcome.FAILED.value, failed_call)

    @property
    def whole_run_styled(self) -> bool:
        """The site's pages show the whole run or denied calls, and link their stylesheet."""
        return self.whole.merged or self.denials_shown

    def rows_left_out(self, count: int) -> str:
        """What a Markdown table says of the rows it had no room for."""
        return self.ngettext("%(count)s more row is not shown.", "%(count)s more rows are not shown.",
                             count) % {"count": self.format.number(count)}

    def range_text(self, first: int | None, last: int | None) -> str:
        """The header's time range: of the whole data, or of the one run a page shows."""
        if first is None or last is None:
            return self.gettext("no dated steps")
        return self.formatted_range_text(self.format.datetime(first), self.format.datetime(last))

    def formatted_range_text(self, first: str, last: str) -> str:
        """``range_text`` of two times already formatted (a run page has them at hand)."""
        return self._range_template % {"first": first, "last": last}

    def skeleton(self, name: str, make: Any, variant: bool = False) -> Any:
        """A per-language page skeleton, made once on first use."""
        key = (name, variant)
        if key not in self._skeletons:
            self._skeletons[key] = make()
        return self._skeletons[key]

    def run_index_rows(
        self, summaries: Sequence[RunSummary], run_prefix: str = urls.RUNS_FROM_LANGUAGE_FOLDER,
        server_runs: Mapping[str, OutcomeCounts] | None = None,
    ) -> Markup:
        """The rows of a list of runs (the run index, a day, a server's runs): a run with a
        failed call is marked, one with only cancellations not. ``run_prefix`` leads from the
        list's folder to the run pages; with ``server_runs``, each row also shows the calls
        of the run to that server. A run's cells are made once per language and build."""
        html: list[str] = []
        made = self._run_cells_made
        for summary in summaries:
            parts = made.get(summary.run)
            if parts is None:
                parts = made[summary.run] = self._make_run_cells(summary)
            extra = "" if server_runs is None else self._server_cells(server_runs[summary.run])
            html += (parts[0], run_prefix, parts[1], extra, "</tr>\n")
        return Markup("".join(html))

    def _make_run_cells(self, summary: RunSummary) -> tuple[str, str]:
        """A run's row as every list shows it, around the link's folder (before it, and after it up
        to the cells of the run's calls to a server or tool)."""
        fmt, number, counts = self.format, self.format.number, summary.counts
        failed = counts.failed > 0
        row_class = "run-failed" if failed else ("run-cancelled" if counts.cancelled else "run-ok")
        opening = f'{summary.slug}.html">{escape(summary.run)}</a>{self._failed_mark if failed else ""}</td>\n'
        cells = (
            f"  <td>{fmt.datetime(summary.start)}</td><td class=\"number\">{fmt.duration(summary.duration_ms)}</td>"
            f'<td class="number">{number(summary.steps)}</td><td class="number">{number(summary.tool_calls)}</td>\n'
            f'  <td class="number">{number(counts.ok)}</td>'
            f'<td class="number{" cell-failed" if failed else ""}">{number(counts.failed)}</td>'
            f'<td class="number">{number(counts.cancelled)}</td>\n'
        )
        if self.whole.runs_known:
            cells += self._whole_run_cells(summary.run)
        return f'<tr class="{row_class}">\n  <td class="run-id"><a href="', opening + cells

    def _whole_run_cells(self, run: str) -> str:
        """Status (with termination reason), configuration and cost of a run, from its run row."""
        row = self.whole.rows.get(run)
        if row is None:
            return '  <td></td><td></td><td class="number"></td>\n'
        header = self.whole.header(run, self.spend.get(run))
        cost = "" if header is None or header.cost is None else self.format.cost(header.cost)
        key = (row.status, row.termination_reason, row.configuration)
        cells = self._run_row_cells.get(key)
        if cells is None:  # a few statuses, reasons and configurations between all runs
            status = escape(status_text(self, row.status, row.termination_reason))
            cells = self._run_row_cells[key] = (
                f'  <td><span class="run-status status-{escape(row.status or "unknown")}">{status}</span></td>'
                f"<td>{escape(row.configuration or '')}</td>")
        return f'{cells}<td class="number">{cost}</td>\n'

    def _server_cells(self, counts: OutcomeCounts) -> str:
        """A run's calls to one server or tool, by outcome (and denied, where the site shows denials);
        made once per distinct set of counts, which few runs do not share."""
        key = (counts.ok, counts.failed, counts.cancelled, counts.denied)
        cells = self._call_cells_made.get(key)
        if cells is None:
            number = self.format.number
            denied = f'<td class="number">{number(counts.denied)}</td>' if self.denials_shown else ""
            cells = self._call_cells_made[key] = (
                f'  <td class="number">{number(counts.ok)}</td>'
                f'<td class="number{" cell-failed" if counts.failed else ""}">{number(counts.failed)}</td>'
                f'<td class="number">{number(counts.cancelled)}</td>{denied}\n')
        return cells

    def servers_fact(self, servers: tuple[str, ...], server_href: dict[str, str]) -> str:
        """The run page's list of servers it called, linked where the site has their page;
        made once per set of servers (runs share a few sets between them)."""
        key = (id(server_href), servers)
        fact = self._servers_facts.get(key)
        if fact is None:
            fact = self._servers_facts[key] = self._servers_fact(servers, server_href)
        return fact

    def _servers_fact(self, servers: tuple[str, ...], server_href: dict[str, str]) -> str:
        if not servers:
            return ""
        links = ", ".join(
            f'<a href="{escape(server_href[server])}">{escape(server)}</a>' if server in server_href
            else str(escape(server))
            for server in servers
        )
        return f"<div><dt>{self._servers_label}</dt><dd>{links}</dd></div>"

    def pagination_nav(self, pages: Any) -> Markup:
        """A page's navigation as the templates' ``pagination`` macro writes it."""
        return Markup(self.environment.get_template("macros.html").module.pagination(pages))  # type: ignore[attr-defined]

    def render(self, template: str, path: str, **context: Any) -> str:
        """A page at ``path`` (relative to the site root), with the chrome every page has."""
        depth = path.count("/")
        root = urls.root_of(path)
        switches = [
            {"language": other, "name": LANGUAGE_NAMES[other], "href": urls.in_other_language(path, other)}
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
    failed_in_0ms: str
    denied: str
    failure_rate: str
    interval: str
    # Where the site knows denials (a denied call, or the other tables), their cell and fact; else
    # nothing, so that a site of events without denials is what it was before denials were told.
    denied_cell: str = ""
    denied_fact: str = ""


def denied_fact(kit: PageKit, denied: int) -> Markup | str:
    """The Denied fact of a run's or a server's facts, where the site knows denials; else nothing."""
    if not kit.denials_shown:
        return ""
    return Markup(f"<div><dt>{escape(kit.gettext(DENIED))}</dt><dd>{kit.format.number(denied)}</dd></div>\n  ")


def counts_row(counts: OutcomeCounts, kit: PageKit) -> CountsRow:
    number = kit.format.number
    return CountsRow(
        calls=number(counts.calls),
        ok=number(counts.ok),
        failed=number(counts.failed),
        cancelled=number(counts.cancelled),
        failed_in_0ms=number(counts.failed_in_0ms),
        denied=number(counts.denied),
        failure_rate=kit.format.percent(counts.failure_rate),
        interval=interval_text(counts.wilson_interval(), kit),
        denied_cell=Markup(f'<td class="number">{number(counts.denied)}</td>') if kit.denials_shown else "",
        denied_fact=denied_fact(kit, counts.denied),
    )


COUNT_FACT_LABELS = (
    ("promptTokens", N_("Prompt tokens")),
    ("completionTokens", N_("Completion tokens")),
    ("totalTokens", N_("Total tokens")),
)
# A count and the names it counts, shown as one fact: "Requested tool calls 2: a, b".
LISTED_FACT_LABELS = (
    ("requestedToolCallCount", "requestedToolNames", N_("Requested tool calls")),
    ("messageCount", None, N_("Messages sent")),
    ("toolSpecCount", "toolSpecs", N_("Tool specs")),
    ("artifactCount", "toolArtifactTypes", N_("Artifacts")),
)
LENGTH_FACT_LABELS = (
    ("contentLength", N_("Content length")),
    ("thinkingLength", N_("Thinking length")),
    ("toolResultLength", N_("Tool result length")),
)
DROPPED_SOURCES = ("droppedSourceCount", "droppedSources", N_("Dropped sources"))
# The order a step's facts are shown in, on a page and in a Markdown timeline (``_fact_cells``).
FACT_ORDER = (
    "finishReason", *(name for name, _label in COUNT_FACT_LABELS),
    *(count for count, _names, _label in LISTED_FACT_LABELS), *(name for name, _label in LENGTH_FACT_LABELS),
    "contentRedacted", DROPPED_SOURCES[0], "estimatedCost", "approved", "decidedBy",
)
COUNT_END = "\x1f"  # ends the count in a listed fact's key (``listed_values``)


FACT_LABELS = (
    N_("Finish reason"), N_("Cost"), N_("Content redacted"), N_("Approved"), N_("Decided by"),
    *(label for _name, label in COUNT_FACT_LABELS + LENGTH_FACT_LABELS),
    *(label for _count, _names, label in LISTED_FACT_LABELS), DROPPED_SOURCES[2],
)


def fact_opening(label: str, classes: str = "fact") -> str:
    """The markup of a fact up to its value: ``<span class="fact">…label…</span> ``."""
    return f'<span class="{classes}"><span class="fact-label">{escape(label)}</span> '


@dataclass(frozen=True)
class Cell:
    """A table cell's text: ``make(value)`` for each distinct value of ``source``; ``missing`` for null."""

    source: str  # a column of the steps table, or a derived one (see TimelinePlan.SOURCES)
    make: Any
    missing: str = ""


class TimelineMarkup:
    """How one language writes a timeline row: literal markup and cells, in order.

    Every data string passes through markupsafe's ``escape``; labels come from the
    catalog, escaped once per language.
    """

    def __init__(self, kit: PageKit) -> None:
        _ = kit.gettext
        self.format = kit.format
        self.kinds = {kind: escape(label) for kind, label in kit.kind_labels.items()}
        self.badges = {value: outcome_badge(value, label) for value, label in kit.outcome_labels.items()}
        self.no_outcome = NO_OUTCOME_BADGE
        self.denials = {value: Markup('<span class="denial denial-{0}">{1}</span>').format(value, label)
                        for value, label in kit.denial_labels.items()}
        self.ngettext = kit.ngettext
        self.show_approvers = kit.settings.show_approvers
        # Each fact opens with its label; the value and "</span>" follow.
        self.labels = {label: fact_opening(_(label)) for label in FACT_LABELS}
        # A fact with a list of names may wrap between the names (each stays whole).
        self.list_labels = {label: fact_opening(_(label), "fact fact-list") for label in FACT_LABELS}
        self.yes_no = {True: escape(_("yes")), False: escape(_("no"))}
        self.merged = kit.whole.merged
        self.step_source = escape(_("source.step"))

    def layout(self, server_href: dict[str, str]) -> list[str | Cell]:
        """The row, cell by cell; the literal parts are the same in every language."""
        fmt, number = self.format, self.format.number
        return [
            '<tr class="kind-',
            Cell("kind", lambda kind: kind if kind in self.kinds else "other"),
            Cell(OUTCOME_AND_DENIAL, self._step_classes),
            '" id="s',  # the row a waterfall's bar links to: s<sequence>
            Cell("sequence", str),
            *self._source_cell(),
            Cell("sequence", str),
            "</td><td>",
            Cell("second of day", fmt.time_of_day),
            "</td><td>",
            Cell("kind", lambda kind: self.kinds.get(kind) or escape(kind)),
            '</td><td class="number">',
            Cell("round", number),
            '</td><td class="number">',
            Cell("shown duration", self._duration),
            "</td>\n  <td>",
            Cell("toolName", lambda name: f"<code>{escape(name)}</code>"),
            "</td>\n  <td>",
            Cell("server", lambda server: (
                f'<a href="{escape(server_href[server])}">{escape(server)}</a>' if server in server_href
                else escape(server))),
            "</td>\n  <td>",
            Cell(OUTCOME_AND_DENIAL, self._outcome_cell, self.no_outcome),
            '</td>\n  <td class="details">',
            *self._fact_cells(),
            "</td>\n</tr>\n",
        ]

    def _source_cell(self) -> list[str | Cell]:
        """Where the site merges the whole run, each step's row opens with its source."""
        if not self.merged:
            return ['">\n  <td class="number">']
        return ['">\n  <td>', Cell("kind", lambda _kind: self.step_source), '</td><td class="number">']

    def _fact_cells(self) -> list[Cell]:
        """The allow-listed facts in nr-llm's order; who decided an approval only when asked for."""
        labels, number = self.labels, self.format.number
        cells = [Cell("finishReason", lambda reason: f"{labels['Finish reason']}{escape(reason)}</span>")]
        cells += [Cell(name, lambda value, label=label: f"{labels[label]}{number(value)}</span>")
                  for name, label in COUNT_FACT_LABELS]
        cells += [Cell(listed_source(count, names), lambda key, label=label: self._listed(label, key))
                  for count, names, label in LISTED_FACT_LABELS]
        cells += [Cell(name, lambda value, label=label: f"{labels[label]}{self._characters(value)}</span>")
                  for name, label in LENGTH_FACT_LABELS]
        cells += [
            Cell("contentRedacted", lambda flag: f"{labels['Content redacted']}{self.yes_no[flag]}</span>"),
            Cell(listed_source(*DROPPED_SOURCES[:2]), lambda key: self._listed(DROPPED_SOURCES[2], key)),
            Cell("estimatedCost", lambda cost: f"{labels['Cost']}{self.format.cost(cost)}</span>"),
            Cell("approved", lambda approved: f"{labels['Approved']}{self.yes_no[approved]}</span>"),
        ]
        if self.show_approvers:
            cells.append(Cell("decidedBy", lambda uid: f"{labels['Decided by']}{uid}</span>"))  # an id, not a quantity
        return cells

    @staticmethod
    def _step_classes(key: str) -> str:
        """The row's classes of an outcome and its denial (``outcome_and_denial``'s key)."""
        outcome, _, denial = key.partition(COUNT_END)
        return f" step-{outcome} step-denied" if denial else f" step-{outcome}"

    def _outcome_cell(self, key: str) -> str:
        """The outcome's badge, and what denied the call where something did."""
        outcome, _, denial = key.partition(COUNT_END)
        return self.badges[outcome] + (self.denials[denial] if denial else "")

    def _listed(self, label: str, key: str) -> str:
        """A count and the names it counts (either may be missing), from ``listed_values``' key."""
        count, names = key.split(COUNT_END, 1)
        shown = [self.format.number(int(count))] if count else []
        opening = self.labels[label]
        if names.startswith("1") and len(names) > 1:
            shown.append(", ".join(f"<code>{escape(name)}</code>" for name in split_items(names[1:])))
            opening = self.list_labels[label]
        return f"{opening}{': '.join(shown)}</span>" if shown else ""

    def _characters(self, count: int) -> str:
        text = self.ngettext("%(num)s character", "%(num)s characters", count)
        return escape(text % {"num": self.format.number(count)})

    def _duration(self, shown: tuple[bool, float]) -> str:
        in_seconds, value = shown
        return self.format.number(value) + (SECONDS if in_seconds else MILLISECONDS)


class TimelinePlan:
    """Timeline rows for a whole table of steps, in every language, without a loop per row.

    Each cell's text is made in Python once per distinct value in the table and
    per language; Arrow spreads the texts over the rows and joins the cells. The
    distinct values and each row's index into them are computed once, before the
    render workers fork, and shared by them.
    """

    def __init__(
        self, steps: pa.Table, kits: dict[str, PageKit], server_href: dict[str, str],
        texts_made: dict[tuple[str, int], dict[Any, str]] | None = None,
    ) -> None:
        """``texts_made`` keeps each cell's texts from one plan to the next (a build makes
        a plan per partition): a value is formatted once per build, not once per plan."""
        texts_made = {} if texts_made is None else texts_made
        self.steps = steps
        self.times = steps.column("crdate")
        self.sequences = steps.column("sequence")
        layouts = {language: kit.timeline.layout(server_href) for language, kit in kits.items()}
        first = next(iter(layouts.values()))
        zone_format = next(iter(kits.values())).format
        sources: dict[str, tuple[pa.ChunkedArray, list[Any]]] = {}
        self.parts: list[str | tuple[pa.ChunkedArray, dict[str, pa.Array], dict[str, str]]] = []
        for position, item in enumerate(first):
            if isinstance(item, str):
                assert all(layout[position] == item for layout in layouts.values())
                self.parts.append(item)
                continue
            if item.source not in sources:
                values = self._source(steps, item.source, zone_format)
                distinct = pc.unique(values).drop_null()
                sources[item.source] = (pc.index_in(values, value_set=distinct), self._keys(distinct, item.source))
            indices, keys = sources[item.source]
            texts = {}
            cells = {language: layout[position] for language, layout in layouts.items()}
            assert all(isinstance(cell, Cell) for cell in cells.values())
            for language, cell in cells.items():
                made, make = texts_made.setdefault((language, position), {}), cast(Cell, cell).make
                texts[language] = pa.array(
                    [made[key] if key in made else made.setdefault(key, str(make(key))) for key in keys], pa.string()
                )
            self.parts.append((indices, texts,
                               {language: cast(Cell, cell).missing for language, cell in cells.items()}))

    @staticmethod
    def _source(steps: pa.Table, name: str, fmt: Formatter) -> pa.ChunkedArray:
        if name == "second of day":
            return seconds_of_day(steps.column("crdate"), fmt)
        if name == "shown duration":
            return _shown_durations(steps.column("durationMs"))
        if name == OUTCOME_AND_DENIAL:
            return outcome_and_denial(steps)
        if name.startswith(LISTED):
            count, names = name[len(LISTED):].split("+")
            return listed_values(steps.column(count), steps.column(names) if names else None)
        return steps.column(name)

    @staticmethod
    def _keys(distinct: pa.Array, name: str) -> list[Any]:
        if name == "shown duration":  # encoded as +tenths (milliseconds) or -tenths (seconds)
            return [(code < 0, abs(code) / 10) for code in distinct.to_pylist()]
        return distinct.to_pylist()

    @cached_property
    def step_columns(self) -> StepColumns:
        """The columns a run's waterfall draws, as lists: made once per plan, on first use."""
        return StepColumns.of(self.steps)

    def rows(self, language: str, start: int, stop: int) -> list[str]:
        """The ``<tr>`` of each step from ``start`` to ``stop`` of the table, as strings."""
        if stop <= start:
            return []
        columns: list[Any] = []
        for part in self.parts:
            if isinstance(part, str):
                columns.append(part)
            else:
                indices, texts, missing = part
                columns.append(pc.fill_null(pc.take(texts[language], indices.slice(start, stop - start)),
                                            missing[language]))
        return pc.binary_join_element_wise(*columns, "").to_pylist()


LISTED = "listed "
# A derived source: the outcome and, after ``COUNT_END``, what denied the call. One source for
# both, so a row joins no more cells than before denials: the outcome's cells show the denial.
OUTCOME_AND_DENIAL = "outcome and denial"


def outcome_and_denial(steps: pa.Table) -> pa.ChunkedArray:
    """Each step's outcome, with its denial after ``COUNT_END`` where a denial explains it; the
    outcome alone for steps no sweep went over (no ``denial`` column: nothing denied)."""
    outcome = steps.column("outcome")
    if DENIAL_COLUMN not in steps.column_names:
        return outcome
    denial = steps.column(DENIAL_COLUMN)
    return pc.if_else(pc.is_valid(denial), pc.binary_join_element_wise(outcome, denial, COUNT_END), outcome)


def listed_source(count: str, names: str | None) -> str:
    """The name of the derived source of a count and its list of names (``TimelinePlan._source``)."""
    return f"{LISTED}{count}+{names or ''}"


def listed_values(counts: pa.ChunkedArray, names: pa.ChunkedArray | None) -> pa.ChunkedArray:
    """A count and a list of names as one string, so that a timeline formats each distinct
    pair once: the count, ``COUNT_END``, then ``1`` and the names (``core.lists.joined_items``)
    or ``0`` for no list; null when both are null."""
    count_text = pc.fill_null(pc.cast(counts, pa.string()), "")
    if names is None:
        present = pc.is_valid(counts)
        joined = pa.scalar("0")
    else:
        present = pc.or_(pc.is_valid(counts), pc.is_valid(names))
        joined = pc.fill_null(pc.binary_join_element_wise("1", joined_items(names), ""), "0")
    key = pc.binary_join_element_wise(count_text, joined, COUNT_END)
    return pc.if_else(present, key, pa.scalar(None, pa.string()))


def seconds_of_day(crdate: pa.ChunkedArray, fmt: Formatter) -> pa.ChunkedArray:
    """The second of the local day of each step (the zone's offset taken per minute)."""
    minutes = pc.divide(crdate, 60)
    distinct = pc.unique(minutes).drop_null()
    offsets = pa.array([fmt.offset_at(minute * 60) for minute in distinct.to_pylist()], pa.int64())
    local = pc.cast(pc.add(crdate, pc.take(offsets, pc.index_in(minutes, value_set=distinct))), pa.float64())
    days = pc.floor(pc.divide(local, 86_400.0))
    return pc.cast(pc.subtract(local, pc.multiply(days, 86_400.0)), pa.int64())


def _shown_durations(milliseconds: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each duration as it is shown, as a whole-number code: tenths of a millisecond under ten
    seconds, minus tenths of a second from there on; null for none (0). Rounded first, so
    each shown value is formatted once, however many raw values round to it."""
    in_milliseconds = _tenths(milliseconds)
    in_seconds = _tenths(pc.divide(milliseconds, 1000.0))
    code = pc.round(pc.if_else(
        pc.less(milliseconds, SECONDS_FROM_MS),
        pc.multiply(in_milliseconds, 10.0),
        pc.multiply(pc.multiply(in_seconds, 10.0), -1.0),
    ))
    return pc.if_else(pc.equal(milliseconds, 0.0), pa.scalar(None, pa.float64()), code)


TENTHS_EXACT_BELOW = 1e15


def _tenths(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Values rounded half-even to one decimal as their decimal text says (``round_tenths``)."""
    exact = pc.less(values, TENTHS_EXACT_BELOW)
    decimals = pc.cast(pc.if_else(exact, values, 0.0), pa.decimal128(38, 6))
    rounded = pc.cast(pc.round(decimals, 1, round_mode="half_to_even"), pa.float64())
    return pc.if_else(exact, rounded, values)


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
    budget: str
    current_rate: str
    current_interval: str
    current_since: str
    latest_change: str
    cancelled_share: str
    failed_if_cancels_failed: str


def server_row(stats: ServerStats, health: ServerHealth, kit: PageKit, href: str) -> ServerRow:
    fmt = kit.format
    current = health.current
    return ServerRow(
        server=stats.server,
        href=href,
        counts=counts_row(stats.counts, kit),
        first_seen=fmt.datetime(stats.first_seen),
        last_seen=fmt.datetime(stats.last_seen),
        verdict=health.verdict.value,
        verdict_label=kit.verdict_labels[health.verdict.value],
        budget=fmt.percent(health.failure_budget),
        current_rate=fmt.percent(current.failures.rate),
        current_interval=interval_text(current.failures.interval, kit),
        current_since=fmt.date(current.since) if current.since else kit.gettext("all days"),
        latest_change=change_since_text(health.latest_change, kit),
        cancelled_share=fmt.percent(health.cancelled_share),
        failed_if_cancels_failed=fmt.percent(health.failure_rate_if_cancels_failed),
    )


def interval_text(interval: tuple[float, float] | None, kit: PageKit) -> str:
    return "–" if interval is None else f"{kit.format.percent(interval[0])} – {kit.format.percent(interval[1])}"


def rate_text(failures: Proportion, kit: PageKit) -> str:
    """``38.1% (20.8% – 59.1%)``: a rate with its interval, a dash without trials."""
    return ("–" if failures.rate is None
            else f"{kit.format.percent(failures.rate)} ({interval_text(failures.interval, kit)})")


def change_since_text(change: RateChange | None, kit: PageKit) -> str:
    """``worse since 14 Sep 2026`` for the latest change, a dash without one."""
    if change is None:
        return "–"
    day = kit.format.date(change.day)
    if change.direction is Direction.WORSE:
        return kit.gettext("worse since %(day)s") % {"day": day}
    return kit.gettext("better since %(day)s") % {"day": day}


@dataclass(frozen=True, slots=True)
class ChangeRow:
    day: str
    range: str
    direction: str
    direction_label: str
    before: str
    after: str
    probability: str
    recording_changed: bool


def change_rows(changes: Sequence[RateChange], kit: PageKit) -> list[ChangeRow]:
    """The changes of a rate, newest first, as the server page lists them."""
    fmt = kit.format
    labels = {"worse": kit.gettext("worse"), "better": kit.gettext("better")}
    return [
        ChangeRow(
            day=fmt.date(change.day),
            range=f"{fmt.date(change.earliest)} – {fmt.date(change.latest)}",
            direction=change.direction.value,
            direction_label=labels[change.direction.value],
            before=rate_text(change.before, kit),
            after=rate_text(change.after, kit),
            probability=fmt.percent(change.probability),
            recording_changed=change.recording_changed,
        )
        for change in reversed(changes)
    ]


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
    change_marks: tuple[ChartMark, ...] = ()
    current: ChartSpan | None = None  # the current period, shaded
    legacy: tuple[ChartSpan, ...] = ()  # days of rows written before ADR-191, hatched


@dataclass(frozen=True, slots=True)
class ChartMark:
    x: int
    direction: str
    label: str


@dataclass(frozen=True, slots=True)
class ChartSpan:
    x: int
    width: int


CHART_BAR_WIDTH = 10
CHART_GAP = 2
CHART_PLOT_HEIGHT = 120
CHART_MARGIN = 20


def day_chart(days: dict[date, OutcomeCounts], kit: PageKit, health: ServerHealth | None = None) -> Chart | None:
    """Calls per day, ok / failed / cancelled stacked, every day of the span shown; with a
    server's ``health``, its changes marked, its current period shaded, pre-ADR-191 days hatched."""
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
        labels, number = kit.outcome_labels, kit.format.number
        title = (f"{kit.format.date(day)}: {number(counts.ok)} {labels['ok']}, "
                 f"{number(counts.failed)} {labels['failed']}, {number(counts.cancelled)} {labels['cancelled']}")
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
        **(_chart_marks(health, first, last, kit) if health is not None else {}),
    )


def _day_x(first: date, day: date) -> int:
    return CHART_MARGIN + (day.toordinal() - first.toordinal()) * (CHART_BAR_WIDTH + CHART_GAP)


def _chart_marks(health: ServerHealth, first: date, last: date, kit: PageKit) -> dict[str, Any]:
    """Where the chart marks each change, shades the current period and hatches pre-ADR-191 days."""
    step = CHART_BAR_WIDTH + CHART_GAP
    marks = tuple(
        ChartMark(_day_x(first, change.day) - CHART_GAP // 2, change.direction.value,
                  kit.gettext("worse") if change.direction is Direction.WORSE else kit.gettext("better"))
        for change in health.changes
    )
    since = health.current.since
    current = ChartSpan(_day_x(first, since), _day_x(first, last) + step - _day_x(first, since)) if since else None
    legacy = tuple(ChartSpan(_day_x(first, day), CHART_BAR_WIDTH) for day in health.legacy_days)
    return {"change_marks": marks, "current": current, "legacy": legacy}


