"""The markup built in Python rather than in the templates, and why.

A 50,000-run site is 100,000 run pages whose timelines hold two million rows, and lists
of runs with a row per run: Jinja's per-row cost (a macro call, a context, an escape
per value) would be most of the build. So the parts of pages made per row or per run
are made here instead, each cell once per distinct value and language, and joined by
Arrow (``TimelinePlan``, ``whole_run.MergedTimeline``) or as strings: the rows of a
timeline (``TimelineMarkup``) and of its provider calls and decisions (``EntryMarkup``),
the rows of a list of runs (``RunRows``), the run header (``RunHeaderMarkup``), the
waterfall (``waterfall_markup``, from ``site/waterfall.py``'s geometry), the run page's
frame (``RunPageFrame``) and the frame of a list's pages (``PagedListFrame``). Everything
here escapes data with MarkupSafe's ``escape``; labels come from the catalogs, escaped once
per language. What it writes is held, byte
for byte, to the equivalent macros of ``templates/macros.html`` (and the frame to
``run.html``) by ``tests/site_pages/test_fast_markup.py``. No other module of the site
builds markup: every other page is rendered by Jinja with autoescape.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from markupsafe import Markup, escape

from ..aggregate.figures import OutcomeCounts, RunSummary
from ..aggregate.whole_run import CallRow, DecisionRow, RunHeader, Tokens, served_elsewhere
from ..core.lists import split_items
from ..core.model import N_, Outcome
from . import urls
from .i18n import MILLISECONDS, SECONDS, SECONDS_PER_DAY
from .labels import DECISION_LABEL_KEYS, SOURCE_LABEL_KEYS, label, status_text
from .run_header import HEADER_LABELS, SPENT_LABELS, TOKENS, TRUNCATED, cost_parts, tokens_shown
from .timeline_facts import (
    COUNT_END,
    COUNT_FACT_LABELS,
    DROPPED_SOURCES,
    FACT_LABELS,
    LENGTH_FACT_LABELS,
    LISTED_FACT_LABELS,
    OUTCOME_AND_DENIAL,
    listed_source,
)
from .waterfall import (
    GROUP_ABOVE,
    OUTCOME_FLAGS,
    ROW_IDS,
    RunGeometry,
    RunSteps,
    StepColumns,
    axis_ticks,
    entry_bars,
    round_lanes,
    waterfall_duration,
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


def denied_fact(kit: Any, denied: int) -> Markup | str:
    """The Denied fact of a run's or a server's facts, where the site knows denials; else nothing."""
    if not kit.denials_shown:
        return ""
    return Markup(f"<div><dt>{escape(kit.gettext(DENIED))}</dt><dd>{kit.format.number(denied)}</dd></div>\n  ")



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

    def __init__(self, kit: Any) -> None:
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


class RunRows:
    """How one language writes the rows of a list of runs (the run index, a day, a server's runs)
    and a run page's servers: each run's cells made once per language and build, the cells of
    a run's calls once per distinct set of counts."""

    def __init__(self, kit: Any) -> None:
        """``kit``: the language's ``PageKit`` (which makes this, so is not imported)."""
        self.kit = kit
        self.format = kit.format
        self.whole = kit.whole
        self.spend = kit.spend
        self.denials_shown = kit.denials_shown
        self._servers_facts: dict[tuple[int, tuple[str, ...]], str] = {}
        self._run_cells_made: dict[str, tuple[str, str]] = {}
        self._call_cells_made: dict[tuple[int, int, int, int], str] = {}
        self._run_row_cells: dict[tuple[str | None, str | None, str | None], str] = {}  # status and configuration
        self._servers_label = escape(kit.gettext("Servers"))
        failed_call = escape(kit.gettext(N_("has a failed call")))
        self._failed_mark = " " + outcome_badge(Outcome.FAILED.value, failed_call)

    def rows(
        self, summaries: Sequence[RunSummary], *, run_prefix: str = urls.RUNS_FROM_LANGUAGE_FOLDER,
        server_runs: Mapping[str, OutcomeCounts] | None = None,
    ) -> Markup:
        """The rows of a list of runs (the run index, a day, a server's runs): a run with a
        failed call is marked, one with only cancellations not. ``run_prefix`` leads from the
        list's folder to the run pages; with ``server_runs``, each row also shows the calls
        of the run to that server. A run's cells are made once per language and build."""
        return Markup("".join(self.row_parts(summaries, run_prefix=run_prefix, server_runs=server_runs)))

    def row_parts(
        self, summaries: Sequence[RunSummary], *, run_prefix: str = urls.RUNS_FROM_LANGUAGE_FOLDER,
        server_runs: Mapping[str, OutcomeCounts] | None = None,
    ) -> list[str]:
        """``rows`` as the strings it joins, for a ``PagedListFrame`` to join once into its page."""
        html: list[str] = []
        made = self._run_cells_made
        for summary in summaries:
            parts = made.get(summary.run)
            if parts is None:
                parts = made[summary.run] = self._make_run_cells(summary)
            extra = "" if server_runs is None else self._server_cells(server_runs[summary.run])
            html += (parts[0], run_prefix, parts[1], extra, "</tr>\n")
        return html

    def _make_run_cells(self, summary: RunSummary) -> tuple[str, str]:
        """A run's row as every list shows it, around the link's folder (before it, and after it up
        to the cells of the run's calls to a server or tool)."""
        fmt, number, counts = self.format, self.format.number, summary.counts
        failed = counts.failed > 0
        row_class = "run-failed" if failed else ("run-cancelled" if counts.cancelled else "run-ok")
        mark = self._failed_mark if failed else ""
        opening = f'{urls.page_file(summary.slug)}">{escape(summary.run)}</a>{mark}</td>\n'
        cells = (
            f"  <td>{escape(fmt.datetime(summary.start))}</td>"
            f'<td class="number">{escape(fmt.duration(summary.duration_ms))}</td>'
            f'<td class="number">{escape(number(summary.steps))}</td>'
            f'<td class="number">{escape(number(summary.tool_calls))}</td>\n'
            f'  <td class="number">{escape(number(counts.ok))}</td>'
            f'<td class="number{" cell-failed" if failed else ""}">{escape(number(counts.failed))}</td>'
            f'<td class="number">{escape(number(counts.cancelled))}</td>\n'
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
        cost = "" if header is None or header.cost is None else escape(self.format.cost(header.cost))
        key = (row.status, row.termination_reason, row.configuration)
        cells = self._run_row_cells.get(key)
        if cells is None:  # a few statuses, reasons and configurations between all runs
            status = escape(status_text(self.kit, row.status, reason=row.termination_reason))
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
            denied = f'<td class="number">{escape(number(counts.denied))}</td>' if self.denials_shown else ""
            cells = self._call_cells_made[key] = (
                f'  <td class="number">{escape(number(counts.ok))}</td>'
                f'<td class="number{" cell-failed" if counts.failed else ""}">{escape(number(counts.failed))}</td>'
                f'<td class="number">{escape(number(counts.cancelled))}</td>{denied}\n')
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


def prebuilt_run_parts(servers: str, *, rows: Sequence[str], header: str, waterfall: str) -> dict[str, Markup]:
    """The parts of a run page made in Python, as markup: its timeline ``rows`` (``TimelinePlan.rows``,
    ``MergedTimeline.rows``), its servers (``RunRows.servers_fact``), its run row's header
    (``header_markup``) and its waterfall (``waterfall_markup``): every value in
    them was escaped with MarkupSafe where it was made."""
    return {"rows": Markup("".join(rows)), "servers": Markup(servers) if servers else NO_MARKUP,
            "header": Markup(header) if header else NO_MARKUP,
            "waterfall": Markup(waterfall) if waterfall else NO_MARKUP}


NO_MARKUP = Markup("")


MARKUP_CHARACTERS = re.compile("[&<>\"']").search  # the characters MarkupSafe's escape replaces


def framed(render: Callable[[Mapping[str, Any]], str], fields: Sequence[str]) -> tuple[list[str], list[str]]:
    """A page rendered with a marker for each of ``fields``, cut at them: its fixed pieces and, between
    each two, the field that stands there (``RunPageFrame``, ``PagedListFrame``)."""
    markers = {name: Markup(f"\x00{name}\x00") for name in fields}
    pieces = render(markers).split("\x00")
    return pieces[0::2], pieces[1::2]


class RunPageFrame:
    """A run page as Jinja renders ``run.html``, rendered once per language with a marker for each
    per-run value, then filled per run: every value escaped as Jinja's autoescape escapes it
    (``escape``, which leaves ``Markup`` as it is), so a page is what Jinja would make of it.

    Why: a site has a run page per run and language, 100,000 at 50,000 runs. Jinja spends
    some 100 µs on a page's chrome alone (its template's fifty-odd outputs, each escaped, and the
    words with values translated per page), as much as the rest of the page costs, the rows
    and waterfall included; the fill costs a few. ``tests/site_pages/test_fast_markup.py`` holds the fill
    to ``pages.run_page_by_jinja``, hostile ids included.
    """

    def __init__(self, render: Callable[[Mapping[str, Any]], str], fields: Sequence[str]) -> None:
        """``render``: the page of some values, by Jinja; ``fields``: the names of the values."""
        self.fixed, self.fields = framed(render, fields)
        if set(self.fields) - set(fields):
            raise AssertionError(f"run.html holds markers of no field: {set(self.fields) - set(fields)}")

    def fill(self, values: Mapping[str, Any]) -> str:
        shown = list(map(values.__getitem__, self.fields))
        texts = [value for value in shown if type(value) is not Markup]
        try:  # escape leaves a text without markup characters as it is, at a microsecond a call: look once
            plain = not MARKUP_CHARACTERS("".join(texts))
        except TypeError:  # a value that is not text
            plain = False
        if not plain:
            shown = [value if type(value) is Markup else escape(value) for value in shown]
        parts: list[str] = [""] * (2 * len(shown) + 1)
        parts[0::2] = self.fixed
        parts[1::2] = shown
        return "".join(parts)


class PagedListFrame:
    """The pages of one paginated list (a list of runs) as Jinja renders its template: rendered
    once per list with a marker for each value that changes from page to page (the page's
    number, its links to the other pages, its rows, its links in the other languages), then
    filled per page, the rows joined straight into the page.

    Why: a 50,000-run site has some 1,300 pages of lists of runs per language, 320,000 rows;
    Jinja spends about 300 µs on a page's chrome and the rows were copied three times on their
    way into it (joined, made ``Markup``, joined into Jinja's output). The frame is checked
    against Jinja's own first page of the list (``matches``); where the two differ (a title
    holding the marker character, say) every page of that list is Jinja's.
    """

    def __init__(self, render: Callable[[Mapping[str, Any]], str], fields: Sequence[str], *, spliced: str) -> None:
        """``render``: the page of some values, by Jinja; ``fields``: the names of the values that change;
        ``spliced``: the one given as the strings to join (the rows)."""
        self.fixed, self.fields = framed(render, fields)
        self.spliced = spliced
        self.usable = set(self.fields) <= set(fields)

    @staticmethod
    def joined(spliced: Sequence[str] | Markup) -> Markup:
        """The spliced value (markup, or the strings of markup to join) as Jinja takes it."""
        return spliced if isinstance(spliced, Markup) else Markup("".join(spliced))

    def fill(self, values: Mapping[str, Any]) -> str:
        """The page of ``values``, each escaped as Jinja's autoescape escapes it, but ``values[spliced]``
        (strings of markup)."""
        parts: list[str] = []
        for fixed, field in zip(self.fixed, self.fields):
            parts.append(fixed)
            value = values[field]
            if field == self.spliced:
                parts += value
            else:
                parts.append(value if type(value) is Markup else escape(value))
        parts.append(self.fixed[-1])
        return "".join(parts)

    def matches(self, values: Mapping[str, Any], page: str) -> bool:
        """Whether the frame filled with a page's ``values`` is Jinja's ``page`` of them."""
        self.usable = self.usable and self.fill(values) == page
        return self.usable


# ---------------------------------------------------------------- the run header


def header_markup(kit: Any, header: RunHeader | None) -> str:
    """The run header's ``<dl>``, or '' for a run without a run row."""
    if header is None:
        return ""
    made: RunHeaderMarkup = kit.once("header", lambda: RunHeaderMarkup(kit))
    return made.markup(header)


class RunHeaderMarkup:
    """How one language writes run headers (``run_header`` in macros.html): its labels as
    ``<dt>``s, and the texts runs share (statuses, configurations, cost sources), each
    translated and escaped once."""

    def __init__(self, kit: Any) -> None:
        self.kit = kit
        self.terms = {message: f"<div><dt>{escape(kit.gettext(message))}</dt><dd>" for message in HEADER_LABELS}
        self.tokens = str(escape(kit.gettext(TOKENS)))
        self.truncated = f" ({escape(kit.gettext(TRUNCATED))})"
        self.statuses: dict[tuple[str | None, str | None], str] = {}
        self.configurations: dict[str | None, str] = {}
        self.sources: dict[tuple[str, int, int], str] = {}

    def markup(self, header: RunHeader) -> str:
        fmt, row, terms, end = self.kit.format, header.row, self.terms, "</dd></div>\n"
        status = self.statuses.get((row.status, row.termination_reason))
        if status is None:
            status = self.statuses[(row.status, row.termination_reason)] = (
                f'<span class="run-status status-{escape(row.status or "unknown")}">'
                f"{escape(status_text(self.kit, row.status, reason=row.termination_reason))}</span>")
        configuration = self.configurations.get(row.configuration)
        if configuration is None:
            configuration = self.configurations[row.configuration] = (
                str(escape(row.configuration)) if row.configuration else "–")
        parts = [
            '<dl class="facts run-header">\n',
            terms["Correlation"], f"<code>{escape(row.uuid)}</code>" if row.uuid else "–", end,
            terms["Status"], status, end,
            terms["Configuration"], configuration, end,
            terms["Created"], fmt.datetime(row.created), end,
            terms["Finished"], fmt.datetime(row.finished), end,
            terms["Rounds"], "–" if row.iterations is None else fmt.number(row.iterations),
            self.truncated if row.truncated else "", end,
            terms["Tokens"], self.tokens_text(row.tokens), end,
            terms["Cost"], "–" if header.cost is None else fmt.cost(header.cost), self.source(header), end,
        ]
        if header.totals_differ and header.spent_source is not None:
            parts += [terms[SPENT_LABELS[header.spent_source]], self.tokens_text(header.spent.tokens), end]
        if row.error_class:
            parts += [terms["Error class"], f"<code>{escape(row.error_class)}</code>", end]
        if self.kit.settings.show_approvers and row.be_user:
            parts += [terms["Started by"], str(row.be_user), end]
        parts.append("</dl>\n")
        return "".join(parts)

    def tokens_text(self, tokens: Tokens) -> str:
        """Prompt / completion / total (the template is escaped; numbers hold no markup)."""
        return self.tokens % tokens_shown(self.kit.format, tokens)

    def source(self, header: RunHeader) -> str:
        key = (header.cost_source, header.calls_priced, header.calls)
        text = self.sources.get(key)
        if text is None:
            text = self.sources[key] = f' <span class="cost-source">({escape(cost_parts(self.kit, header)[1])})</span>'
        return text


# ---------------------------------------------------------------- a merged timeline's calls and decisions

def row_id(source: str, number: int) -> str:
    """The id attribute of a merged row, the run's ``number``-th (from 1) of its ``source``."""
    return f' id="{ROW_IDS[source]}{number}"'

ENTRY_FACTS = (
    N_("Provider"), N_("Model"), N_("Served by"), N_("Served model"), N_("Latency"), N_("Time to first token"),
    N_("Cache hit"), N_("Fallback attempts"), N_("Error class"), N_("Reason"), N_("Guardrail"), N_("Detail"),
)


class CallWho(NamedTuple):
    """What a provider call's row shows of who served it and how it ended (few distinct values)."""

    provider: str | None
    model: str | None
    served_provider: str | None
    served_model: str | None
    error_class: str | None
    operation: str | None
    success: bool | None

    @property
    def swapped(self) -> bool:
        """A fallback served the call with another provider or model."""
        return served_elsewhere(provider=self.provider, model=self.model, served_provider=self.served_provider,
                                served_model=self.served_model)


class EntryMarkup:
    """How one language writes the provider calls' and decisions' rows of a merged timeline
    (``call_row`` and ``decision_row`` in macros.html), in the steps' columns: source, #, time,
    kind, round, duration, tool, server, outcome, details.

    A call's row is made of parts, each made once per distinct value of what it shows (a
    handful of providers and models, flags, durations, seconds of the day), which
    ``whole_run.MergedTimeline`` spreads over the calls and joins with Arrow."""

    def __init__(self, kit: Any) -> None:
        self.kit = kit
        _ = kit.gettext
        self.sources = {source: escape(_(key)) for source, key in SOURCE_LABEL_KEYS.items()}
        self.labels = {name: fact_opening(_(name)) for name in ENTRY_FACTS}
        self.badges = {value: outcome_badge(value, kit.outcome_labels[value]) for value in (Outcome.OK.value,
                                                                                          Outcome.FAILED.value)}
        self.yes_no = {True: escape(_("yes")), False: escape(_("no"))}
        self.after_duration = {outcome: f"</td>\n  <td></td>\n  <td></td>\n  <td>{badge}</td>\n  <td class=\"details\">"
                               for outcome, badge in self.badges.items()}

    def call_parts(self, who: CallWho) -> tuple[str, str, str, str, str]:
        """What a call's row shows of its provider, model, operation and outcome, around the
        parts that change from call to call: the row's opening before its id, the opening's
        rest before its time, the cells from the kind to before the duration, the cells from
        the duration's end to the first fact, and the facts after the flags with the row's end."""
        outcome = Outcome.OK.value if who.success else Outcome.FAILED.value
        head = self._fact("Provider", who.provider) + self._fact("Model", who.model)
        if who.swapped:
            head += self._fact("Served by", who.served_provider) + self._fact("Served model", who.served_model)
        tail = self._fact("Error class", who.error_class, code=True)
        return (f'<tr class="source-call step-{outcome}"',
                f'>\n  <td>{self.sources["call"]}</td><td class="number"></td><td>',
                f'</td><td>{escape(who.operation or "")}</td><td class="number"></td><td class="number">',
                self.after_duration[outcome] + head, tail + "</td>\n</tr>\n")

    @staticmethod
    def call_id(number: int) -> str:
        """The id attribute of the run's ``number``-th call's row (from 1), which its bar links to."""
        return row_id("call", number)

    def flags(self, flags: tuple[Any, Any]) -> str:
        """A call's cache hit and fallback attempts, as facts."""
        cache_hit, fallbacks = flags
        return (self._fact("Cache hit", None if cache_hit is None else self.yes_no[bool(cache_hit)], escaped=True)
                + self._fact("Fallback attempts", self.kit.format.number(fallbacks) if fallbacks else None,
                             escaped=True))

    def duration(self, milliseconds: int) -> str:
        return self.kit.format.duration(milliseconds)

    def fact(self, name: str, text: str) -> str:
        """A fact whose value is already escaped text."""
        return f"{self.labels[name]}{text}</span>"

    def _time(self, crdate: int | None) -> str:
        fmt = self.kit.format
        return "" if crdate is None else fmt.time_of_day((crdate + fmt.offset_at(crdate)) % SECONDS_PER_DAY)

    def decision_row(self, decision: DecisionRow, number: int = 0) -> str:
        kind = escape(label(self.kit, DECISION_LABEL_KEYS, value=decision.decision))
        tool = f"<code>{escape(decision.tool)}</code>" if decision.tool else ""
        facts = [self._fact("Reason", decision.reason), self._fact("Guardrail", decision.guardrail, code=True),
                 self._fact("Detail", decision.detail)]
        return self._row("governance", Outcome.FAILED.value, crdate=decision.crdate, kind=kind, duration="", tool=tool,
                         facts=facts, number=number)

    def _row(self, source: str, outcome: str, *, crdate: int | None, kind: Any, duration: str, tool: str,
             facts: list[str], number: int = 0) -> str:
        """A row; ``number`` (from 1: the call's or decision's place in the run) gives it the id a
        waterfall's bar links to (``cN``, ``dN``)."""
        time, identified = self._time(crdate), row_id(source, number) if number else ""
        return (f'<tr class="source-{source} step-{outcome}"{identified}>\n  <td>{self.sources[source]}</td>'
                f'<td class="number"></td><td>{time}</td><td>{kind}</td><td class="number"></td>'
                f'<td class="number">{duration}</td>\n  <td>{tool}</td>\n  <td></td>\n'
                f'  <td>{self.badges[outcome]}</td>\n  <td class="details">{"".join(facts)}</td>\n</tr>\n')

    def _fact(self, name: str, value: Any, *, escaped: bool = False, code: bool = False) -> str:
        if value is None or value == "":
            return ""
        shown = value if escaped else escape(value)
        if code:
            shown = f"<code>{shown}</code>"
        return f"{self.labels[name]}{shown}</span>"


# ---------------------------------------------------------------- the waterfall

CAPTION = N_("A bar starts at its row’s second less its duration, never before the step before it.")
LONGEST = N_("Longest: %(steps)s.")
NO_DURATIONS = N_("No step has a duration.")
ROUND_LANE = N_("Round %(round)s")
ROUNDS_LANE = N_("Rounds %(first)s–%(last)s")


class WaterfallMarkup:
    """How one language writes a waterfall (``waterfall`` in macros.html): its words, escaped
    once, and the durations it formatted."""

    def __init__(self, kit: Any) -> None:
        _ = kit.gettext
        self.kit = kit
        self.language = kit.language
        self.opening = f'<figure class="waterfall">\n<figcaption>{escape(_(CAPTION))} '
        self.longest = str(escape(_(LONGEST)))
        self.no_durations = str(escape(_(NO_DURATIONS)))
        self.round_lane, self.rounds_lane = _(ROUND_LANE), _(ROUNDS_LANE)
        self.axis = f'<div class="lane axis"><span>{escape(_("Time"))}</span>'
        self.sources = {source: str(escape(_(key))) for source, key in SOURCE_LABEL_KEYS.items()}
        words = {**kit.outcome_labels, "denied": _("Denied")}
        self.legend = [(flag, f'<span class="{name}">{escape(words[name])}</span>') for name, flag in OUTCOME_FLAGS]
        self._durations: dict[int, str] = {}
        self._axes: dict[float, str] = {}
        self.titles: dict[str, str] = {}  # the entries' labels, escaped: a few operations and models

    def duration(self, milliseconds: float) -> str:
        """Milliseconds under a second; from there on seconds to a tenth, as a glance needs them.
        Made once per value as shown (keyed by it in tenths; negative: of a second)."""
        key = round(milliseconds * 10) if milliseconds < 1000 else -round(milliseconds / 100)
        text = self._durations.get(key)
        if text is None:
            text = self._durations[key] = waterfall_duration(self.kit.format, milliseconds)
        return text

    def axis_line(self, total: float) -> str:
        """The shared time axis: round times from the run's first start, placed by their classes."""
        line = self._axes.get(total)
        if line is None:
            ticks = []
            for x, tick in axis_ticks(total):
                ticks.append(f'<i class="x{x}">' if x else "<i>")
                ticks.append(f"{self.duration(tick)}</i>")
            line = f'{self.axis}{"".join(ticks)}</div>\n'
            if len(self._axes) < 100_000:
                self._axes[total] = line
        return line

    def openings(self, columns: StepColumns) -> list[str]:
        """Each step's link up to its position classes: ``<a href="#s3" class="llm `` with classes of
        its kind and outcome, ``<a href="#s3" class="`` without; made once per table of steps, for
        every language (``_unplaced`` closes one for a bar without position classes)."""
        return _once_per_table(columns, "openings", make=lambda: [
            f'<a href="#s{sequence}" class="{names} ' if names else f'<a href="#s{sequence}" class="'
            for sequence, names in zip(columns.sequence, columns.classes)])

    def labels(self, columns: StepColumns) -> list[str]:
        """Each step's label, escaped (``StepColumns.labels``); made once per table and language."""
        return _once_per_table(columns, f"labels {self.language}", make=lambda: _each_made_once(
            columns.labels(self.kit.kind_labels), lambda text: str(escape(text))))

    def link_ends(self, columns: StepColumns) -> list[str]:
        """Each step's label and the link's end, ``…</a>``; made once per table and language."""
        return _once_per_table(columns, f"link ends {self.language}", make=lambda: _each_made_once(
            self.labels(columns), lambda label: f"{label}</a>"))


def _once_per_table(columns: StepColumns, key: str, *, make: Callable[[], list[str]]) -> list[str]:
    """What ``make`` gives for a table of steps, kept with it (``StepColumns.made``) under ``key``."""
    made = columns.made.get(key)
    if made is None:
        made = columns.made[key] = make()
    return made


def _each_made_once(texts: Sequence[str], make: Callable[[str], str]) -> list[str]:
    """``make`` of each text, made once per distinct text (a table's steps share a few labels)."""
    made: dict[str, str] = {}
    return [made[text] if text in made else made.setdefault(text, make(text)) for text in texts]


def waterfall_markup(kit: Any, steps: RunSteps, *, calls: Sequence[CallRow] = (),
                     decisions: Sequence[DecisionRow] = ()) -> str:
    """The run's waterfall as a ``<figure>``, or '' for a run without steps."""
    if steps.stop <= steps.start:
        return ""
    words: WaterfallMarkup = kit.once("waterfall", lambda: WaterfallMarkup(kit))
    columns, start, stop = steps.columns, steps.start, steps.stop
    entries = entry_bars(kit, calls, decisions=decisions) if calls or decisions else []
    geometry = columns.geometry(start, stop, entries=entries)
    labels, openings = words.labels(columns), words.openings(columns)
    lines = [words.opening, _longest(words, columns, labels=labels, geometry=geometry), _legend(words, geometry.flags),
             "</figcaption>\n", words.axis_line(geometry.total)]
    if stop - start > GROUP_ABOVE:
        lines += _round_lanes(words, openings, labels=labels, steps=steps, geometry=geometry)
    else:  # the most common page: one bar a step, each a link with its label
        lines += [f'{opening}{place}">{end}' if place else _unplaced(opening) + end
                  for opening, place, end in zip(openings[start:stop], geometry.places,
                                                 words.link_ends(columns)[start:stop])]
        lines.append("\n")
    titles = words.titles
    for source in ("call", "governance"):
        links = [f'<a href="{bar.href}" class="{bar.classes} {position}" '
                 f'title="{titles.get(bar.label) or titles.setdefault(bar.label, str(escape(bar.label)))}"></a>'
                 for bar, position in zip(entries, geometry.entry_positions) if bar.lane == source]
        if links:
            lines.append(f'<div class="lane"><span>{words.sources[source]}</span>{"".join(links)}</div>\n')
    lines.append("</figure>\n")
    return "".join(lines)


def _bare(opening: str) -> str:
    """A link's opening (``WaterfallMarkup.openings``) closed without position classes:
    ``<a href="#s3" class="llm"``, or ``<a href="#s3"`` without any class."""
    return opening[:-1] + '"' if not opening.endswith(' class="') else opening[:-len(' class="')]


def _unplaced(opening: str) -> str:
    """The opening tag of a bar at x0 w0, which has no position class."""
    return _bare(opening) + ">"


def _titled_link(opening: str, place: str, *, title: str) -> str:
    """A bar labelled by its title (a lane of rounds): its link, classes, position and title; a
    bar without a label is an empty link."""
    head = f'{opening}{place}"' if place else _bare(opening)
    return f'{head} title="{title}"></a>' if title else f"{head}></a>"


def _round_lanes(words: WaterfallMarkup, openings: list[str], *, labels: list[str], steps: RunSteps,
                 geometry: RunGeometry) -> list[str]:
    """A long run's steps on a lane per round, consecutive rounds sharing one past ``MAX_LANES``."""
    number = words.kit.format.number
    lanes = []
    for lane in round_lanes(steps):
        shown = [number(key) if isinstance(key, int) else "–" for key in (lane.first, lane.last)]
        name = (words.round_lane % {"round": shown[0]} if lane.rounds == 1
                else words.rounds_lane % {"first": shown[0], "last": shown[1]})
        links = "".join(_titled_link(openings[steps.start + offset], geometry.places[offset],
                                     title=labels[steps.start + offset]) for offset in lane.offsets)
        lanes.append(f'<div class="lane"><span>{escape(name)}</span>{links}</div>\n')
    return lanes


def _longest(words: WaterfallMarkup, columns: StepColumns, *, labels: list[str], geometry: RunGeometry) -> str:
    """The text alternative: the longest steps, with their durations."""
    if not geometry.longest:
        return words.no_durations
    steps = ", ".join(f"{labels[row]} ({words.duration(columns.duration[row])})" for row in geometry.longest)
    return words.longest % {"steps": steps}


def _legend(words: WaterfallMarkup, flags: int) -> str:
    """What the patterns mean, for the outcomes the run's bars show (none for a run of ok steps)."""
    if not flags:
        return ""
    return f' <span class="legend">{"".join(text for flag, text in words.legend if flags & flag)}</span>'
