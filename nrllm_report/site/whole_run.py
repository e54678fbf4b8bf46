"""The whole run on its page: the header nr-llm's run page opens with, and the merged timeline.

The header shows, in nr-llm's order, correlation (uuid), status with its termination
reason, configuration, created, finished, rounds (and "truncated"), tokens, cost and
the error class when set; where the row's totals are not what was spent, what the
provider calls (or the steps) add up to stands beside them, saying which. The
timeline merges the steps with the provider calls and governance decisions as
``RunTimelineFactory`` does (``merged_order``). Every word comes from the catalogs.
"""

from __future__ import annotations

from typing import Any, Sequence

from markupsafe import escape

from ..aggregate.whole_run import CallRow, DecisionRow, RunHeader, Tokens
from ..core.model import N_, Outcome
from .i18n import SECONDS_PER_DAY
from .labels import DECISION_LABEL_KEYS, SOURCE_LABEL_KEYS, label, status_text
from .render import PageKit, fact_opening, outcome_badge

COST_SOURCE_LABELS = {
    "telemetry": N_("sum of the provider calls' cost"), "steps": N_("sum of the steps' estimated cost"),
    "run": N_("the run row's estimated cost"),
}
SPENT_LABELS = {"telemetry": N_("Spent, by the provider calls"), "steps": N_("Spent, by the steps")}


def header_markup(kit: PageKit, header: RunHeader | None) -> str:
    """The run header's ``<dl>``, or '' for a run without a run row."""
    if header is None:
        return ""
    fmt, row = kit.format, header.row
    _ = kit.skeleton("header labels", lambda: HeaderLabels(kit)).label
    facts: list[tuple[str, str]] = [
        (_("Correlation"), f"<code>{escape(row.uuid)}</code>" if row.uuid else "–"),
        (_("Status"), f'<span class="run-status status-{escape(row.status or "unknown")}">'
                      f"{escape(status_text(kit, row.status, row.termination_reason))}</span>"),
        (_("Configuration"), escape(row.configuration) if row.configuration else "–"),
        (_("Created"), fmt.datetime(row.created)),
        (_("Finished"), fmt.datetime(row.finished)),
        (_("Rounds"), _rounds(kit, row.iterations, row.truncated)),
        (_("Tokens"), _tokens(kit, row.tokens)),
        (_("Cost"), _cost(kit, header)),
    ]
    if header.totals_differ and header.spent_source is not None:
        facts.append((_(SPENT_LABELS[header.spent_source]), _tokens(kit, header.spent.tokens)))
    if row.error_class:
        facts.append((_("Error class"), f"<code>{escape(row.error_class)}</code>"))
    if kit.settings.show_approvers and row.be_user:
        facts.append((_("Started by"), str(row.be_user)))
    items = "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>\n" for name, value in facts)
    return f'<dl class="facts run-header">\n{items}</dl>\n'


class HeaderLabels:
    """A language's header labels, translated and escaped once (a page a run asks for them)."""

    def __init__(self, kit: PageKit) -> None:
        self.gettext = kit.gettext
        self.made: dict[str, str] = {}

    def label(self, message: str) -> str:
        text = self.made.get(message)
        if text is None:
            text = self.made[message] = str(escape(self.gettext(message)))
        return text


def header_facts(kit: PageKit, header: RunHeader) -> list[tuple[str, str, bool]]:
    """The header's facts as plain text, in nr-llm's order (for Markdown): name, value, and
    whether the value is the data's own text (to be escaped) rather than formatted by us."""
    _, fmt, row = kit.gettext, kit.format, header.row
    facts = [
        (_("Correlation"), row.uuid or "–", True),
        (_("Status"), status_text(kit, row.status, row.termination_reason), False),
        (_("Configuration"), row.configuration or "–", True),
        (_("Created"), fmt.datetime(row.created), False),
        (_("Finished"), fmt.datetime(row.finished), False),
        (_("Rounds"), str(_rounds(kit, row.iterations, row.truncated)), False),
        (_("Tokens"), str(_tokens(kit, row.tokens)), False),
        (_("Cost"), _cost_text(kit, header), False),
    ]
    if header.totals_differ and header.spent_source is not None:
        facts.append((_(SPENT_LABELS[header.spent_source]), str(_tokens(kit, header.spent.tokens)), False))
    if row.error_class:
        facts.append((_("Error class"), row.error_class, True))
    if kit.settings.show_approvers and row.be_user:
        facts.append((_("Started by"), str(row.be_user), False))
    return facts


def _rounds(kit: PageKit, iterations: int | None, truncated: bool | None) -> str:
    text = "–" if iterations is None else kit.format.number(iterations)
    return f"{text} ({escape(kit.gettext('truncated'))})" if truncated else text


def _tokens(kit: PageKit, tokens: Tokens) -> str:
    """Prompt / completion / total."""
    number = kit.format.number
    parts = [number(value) if value is not None else "–" for value in (tokens.prompt, tokens.completion, tokens.total)]
    return escape(kit.gettext("%(prompt)s prompt / %(completion)s completion / %(total)s total")
                  % dict(zip(("prompt", "completion", "total"), parts)))


def _cost_parts(kit: PageKit, header: RunHeader) -> tuple[str, str]:
    """The cost and where it comes from; of provider calls, how many were priced."""
    cost = "–" if header.cost is None else kit.format.cost(header.cost)
    source = kit.gettext(COST_SOURCE_LABELS[header.cost_source])
    if header.cost_source == "telemetry":
        source += ", " + kit.gettext("%(priced)s of %(calls)s calls priced") % {
            "priced": kit.format.number(header.calls_priced), "calls": kit.format.number(header.calls)}
    return cost, source


def _cost(kit: PageKit, header: RunHeader) -> str:
    cost, source = _cost_parts(kit, header)
    return f'{cost} <span class="cost-source">({escape(source)})</span>'


def _cost_text(kit: PageKit, header: RunHeader) -> str:
    cost, source = _cost_parts(kit, header)
    return f"{cost} ({source})"


# ---------------------------------------------------------------- the merged timeline


def merged_order(step_keys: Sequence[tuple[int | None, int]], calls: Sequence[CallRow],
                 decisions: Sequence[DecisionRow]) -> list[tuple[str, int]]:
    """Every row of the run as (source, position), ordered as nr-llm's timeline: by second, then
    by step sequence; rows without one last within their second, provider calls before decisions.
    A row without a time keeps its place after the rows before it."""
    keyed = [(-1 if crdate is None else crdate, 0, sequence, position, "step")
             for position, (crdate, sequence) in enumerate(step_keys)]
    keyed += [(-1 if call.crdate is None else call.crdate, 1, 0, position, "call")
              for position, call in enumerate(calls)]
    keyed += [(-1 if decision.crdate is None else decision.crdate, 2, 0, position, "governance")
              for position, decision in enumerate(decisions)]
    keyed.sort()  # (second, group, sequence, position) is unique: the source never decides
    return [(source, position) for _when, _group, _sequence, position, source in keyed]


class EntryMarkup:
    """How one language writes the provider calls' and decisions' rows of a merged timeline,
    in the steps' columns: source, #, time, kind, round, duration, tool, server, outcome, details."""

    def __init__(self, kit: PageKit) -> None:
        self.kit = kit
        _ = kit.gettext
        self.sources = {source: escape(_(key)) for source, key in SOURCE_LABEL_KEYS.items()}
        self.labels = {name: fact_opening(_(name)) for name in ENTRY_FACTS}
        self.badges = {value: outcome_badge(value, kit.outcome_labels[value]) for value in (Outcome.OK.value,
                                                                                          Outcome.FAILED.value)}
        self.yes_no = {True: escape(_("yes")), False: escape(_("no"))}
        self.call_parts: dict[tuple[Any, ...], tuple[str, str, tuple[str, str]]] = {}
        self.kind_cells: dict[tuple[Any, ...], str] = {}
        self.call_flags: dict[tuple[Any, Any], str] = {}
        self.durations: dict[int, str] = {}
        self.after_duration = {outcome: f"</td>\n  <td></td>\n  <td></td>\n  <td>{badge}</td>\n  <td class=\"details\">"
                               for outcome, badge in self.badges.items()}

    def call_row(self, call: CallRow, number: int = 0) -> str:
        """A provider call's row. Its facts repeat from call to call (a handful of providers and
        models): the parts are made once per distinct value and language. ``number`` (from 1: the
        call's place in the run) gives the row the id a waterfall's bar links to (``cN``)."""
        outcome = Outcome.OK.value if call.success else Outcome.FAILED.value
        who = (call.provider, call.model, call.served_provider, call.served_model, call.error_class,
               call.operation, outcome)
        head, tail, opening = self.call_parts.get(who) or self._call_parts(who, call)
        flags = (call.cache_hit, call.fallback_attempts)
        middle = self.call_flags.get(flags) or self._call_flags(flags)
        latency = "" if call.latency_ms is None else self._duration(call.latency_ms)
        ttft = self._duration(call.ttft_ms) if call.ttft_ms is not None else ""
        facts = (head + (f"{self.labels['Latency']}{latency}</span>" if latency else "")
                 + (f"{self.labels['Time to first token']}{ttft}</span>" if ttft else "") + middle + tail)
        row_id = f' id="{ROW_IDS["call"]}{number}"' if number else ""
        return (f"{opening[0]}{row_id}{opening[1]}{self._time(call.crdate)}{self.kind_cells[who]}{latency}"
                f"{self.after_duration[outcome]}{facts}</td>\n</tr>\n")

    def _call_parts(self, who: tuple[Any, ...], call: CallRow) -> tuple[str, str, tuple[str, str]]:
        head = self._fact("Provider", call.provider) + self._fact("Model", call.model)
        if call.swapped:
            head += self._fact("Served by", call.served_provider) + self._fact("Served model", call.served_model)
        tail = self._fact("Error class", call.error_class, code=True)
        outcome = who[-1]
        opening = (f'<tr class="source-call step-{outcome}"',
                   f'>\n  <td>{self.sources["call"]}</td><td class="number"></td><td>')
        self.kind_cells[who] = f'</td><td>{escape(call.operation or "")}</td><td class="number"></td><td class="number">'
        self.call_parts[who] = (head, tail, opening)
        return self.call_parts[who]

    def _call_flags(self, flags: tuple[Any, Any]) -> str:
        cache_hit, fallbacks = flags
        made = (self._fact("Cache hit", None if cache_hit is None else self.yes_no[bool(cache_hit)], escaped=True)
                + self._fact("Fallback attempts", self.kit.format.number(fallbacks) if fallbacks else None,
                             escaped=True))
        self.call_flags[flags] = made
        return made

    def _duration(self, milliseconds: int) -> str:
        text = self.durations.get(milliseconds)
        if text is None:
            text = self.durations[milliseconds] = self.kit.format.duration(milliseconds)
        return text

    def _time(self, crdate: int | None) -> str:
        fmt = self.kit.format
        return "" if crdate is None else fmt.time_of_day((crdate + fmt.offset_at(crdate)) % SECONDS_PER_DAY)

    def decision_row(self, decision: DecisionRow, number: int = 0) -> str:
        kind = escape(label(self.kit, DECISION_LABEL_KEYS, decision.decision))
        tool = f"<code>{escape(decision.tool)}</code>" if decision.tool else ""
        facts = [self._fact("Reason", decision.reason), self._fact("Guardrail", decision.guardrail, code=True),
                 self._fact("Detail", decision.detail)]
        return self._row("governance", Outcome.FAILED.value, decision.crdate, kind, "", tool, facts, number)

    def _row(self, source: str, outcome: str, crdate: int | None, kind: Any, duration: str, tool: str,
             facts: list[str], number: int = 0) -> str:
        """A row; ``number`` (from 1: the call's or decision's place in the run) gives it the id a
        waterfall's bar links to (``cN``, ``dN``)."""
        row_id = f' id="{ROW_IDS[source]}{number}"' if number else ""
        time = self._time(crdate)
        return (f'<tr class="source-{source} step-{outcome}"{row_id}>\n  <td>{self.sources[source]}</td>'
                f'<td class="number"></td><td>{time}</td><td>{kind}</td><td class="number"></td>'
                f'<td class="number">{duration}</td>\n  <td>{tool}</td>\n  <td></td>\n'
                f'  <td>{self.badges[outcome]}</td>\n  <td class="details">{"".join(facts)}</td>\n</tr>\n')

    def _fact(self, name: str, value: Any, escaped: bool = False, code: bool = False) -> str:
        if value is None or value == "":
            return ""
        shown = value if escaped else escape(value)
        if code:
            shown = f"<code>{shown}</code>"
        return f"{self.labels[name]}{shown}</span>"


ROW_IDS = {"call": "c", "governance": "d"}  # a merged row's id: ``cN``, ``dN``

ENTRY_FACTS = (
    N_("Provider"), N_("Model"), N_("Served by"), N_("Served model"), N_("Latency"), N_("Time to first token"),
    N_("Cache hit"), N_("Fallback attempts"), N_("Error class"), N_("Reason"), N_("Guardrail"), N_("Detail"),
)


def merged_rows(kit: PageKit, step_rows: Sequence[str], step_keys: Sequence[tuple[int | None, int]],
                calls: Sequence[CallRow], decisions: Sequence[DecisionRow]) -> list[str]:
    """The run's timeline rows: its steps' (already made) with its provider calls' and decisions', merged."""
    if not calls and not decisions:
        return list(step_rows)
    entries = kit.skeleton("entry rows", lambda: EntryMarkup(kit))
    rows = []
    for source, position in merged_order(step_keys, calls, decisions):
        if source == "step":
            rows.append(step_rows[position])
        elif source == "call":
            rows.append(entries.call_row(calls[position], position + 1))
        else:
            rows.append(entries.decision_row(decisions[position], position + 1))
    return rows
