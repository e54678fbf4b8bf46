"""The markup built in Python rather than in the templates, and why.

A 50,000-run site is 100,000 run pages whose timelines hold two million rows, and lists
of runs with a row per run: Jinja's per-row cost (a macro call, a context, an escape
per value) would be most of the build. So these rows are made here instead, each cell
once per distinct value and language, and joined by Arrow (``TimelinePlan``) or as
strings (``RunRows``). Everything here escapes data with MarkupSafe's ``escape``;
labels come from the catalogs, escaped once per language. What it writes is held,
byte for byte, to the equivalent macros of ``templates/macros.html`` by
``tests/test_fast_markup.py``. No other module of the site builds markup.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from ..aggregate.figures import OutcomeCounts, RunSummary
from ..core.lists import split_items
from ..core.model import N_, Outcome
from . import urls
from .i18n import MILLISECONDS, SECONDS
from .labels import status_text
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
    (``whole_run.header_markup``) and its waterfall (``waterfall.waterfall``): every value in
    them was escaped with MarkupSafe where it was made."""
    return {"rows": Markup("".join(rows)), "servers": Markup(servers) if servers else NO_MARKUP,
            "header": Markup(header) if header else NO_MARKUP,
            "waterfall": Markup(waterfall) if waterfall else NO_MARKUP}


NO_MARKUP = Markup("")


MARKUP_CHARACTERS = re.compile("[&<>\"']").search  # the characters MarkupSafe's escape replaces


class RunPageFrame:
    """A run page as Jinja renders ``run.html``, rendered once per language with a marker for each
    per-run value, then filled per run: every value escaped as Jinja's autoescape escapes it
    (``escape``, which leaves ``Markup`` as it is), so a page is what Jinja would make of it.

    Why: a site has a run page per run and language, 100,000 at 50,000 runs. Jinja spends
    some 100 µs on a page's chrome alone (its template's fifty-odd outputs, each escaped, and the
    words with values translated per page), as much as the rest of the page costs, the rows
    and waterfall included; the fill costs a few. ``tests/test_fast_markup.py`` holds the fill
    to ``pages.run_page_by_jinja``, hostile ids included.
    """

    def __init__(self, render: Callable[[Mapping[str, Any]], str], fields: Sequence[str]) -> None:
        """``render``: the page of some values, by Jinja; ``fields``: the names of the values."""
        markers = {name: Markup(f"\x00{name}\x00") for name in fields}
        pieces = render(markers).split("\x00")
        self.fixed = pieces[0::2]
        self.fields = pieces[1::2]
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
