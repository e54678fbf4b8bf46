"""The whole run on its page: the header nr-llm's run page opens with, and the merged timeline.

The header shows, in nr-llm's order, correlation (uuid), status with its termination
reason, configuration, created, finished, rounds (and "truncated"), tokens, cost and
the error class when set; where the row's totals are not what was spent, what the
provider calls (or the steps) add up to stands beside them, saying which. The
timeline merges the steps with the provider calls and governance decisions as
``RunTimelineFactory`` does (``merged_order``). Every word comes from the catalogs.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from markupsafe import escape

from ..aggregate.whole_run import CallRow, DecisionRow, RunHeader, Tokens, WholeRuns, served_elsewhere
from ..core.model import N_, Outcome
from ..store.runs import RunSpan
from .fast_markup import fact_opening, outcome_badge
from .i18n import SECONDS_PER_DAY, Formatter
from .kit import PageKit
from .labels import DECISION_LABEL_KEYS, SOURCE_LABEL_KEYS, label, status_text
from .timeline_plan import TimelinePlan, seconds_of_day

COST_SOURCE_LABELS = {
    "telemetry": N_("sum of the provider calls' cost"), "steps": N_("sum of the steps' estimated cost"),
    "run": N_("the run row's estimated cost"),
}
SPENT_LABELS = {"telemetry": N_("Spent, by the provider calls"), "steps": N_("Spent, by the steps")}


def header_markup(kit: PageKit, header: RunHeader | None) -> str:
    """The run header's ``<dl>``, or '' for a run without a run row."""
    if header is None:
        return ""
    made: HeaderMarkup = kit.once("header", lambda: HeaderMarkup(kit))
    return made.markup(header)


class HeaderMarkup:
    """How one language writes run headers: its labels as ``<dt>``s, and the texts runs share
    (statuses, configurations, cost sources), each translated and escaped once."""

    def __init__(self, kit: PageKit) -> None:
        self.kit = kit
        self.terms = {message: f"<div><dt>{escape(kit.gettext(message))}</dt><dd>" for message in HEADER_LABELS}
        self.tokens = str(escape(kit.gettext("%(prompt)s prompt / %(completion)s completion / %(total)s total")))
        self.truncated = f" ({escape(kit.gettext('truncated'))})"
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
        number = self.kit.format.number
        return self.tokens % {name: "–" if value is None else number(value) for name, value in
                              (("prompt", tokens.prompt), ("completion", tokens.completion), ("total", tokens.total))}

    def source(self, header: RunHeader) -> str:
        key = (header.cost_source, header.calls_priced, header.calls)
        text = self.sources.get(key)
        if text is None:
            text = self.sources[key] = f' <span class="cost-source">({escape(_cost_parts(self.kit, header)[1])})</span>'
        return text


HEADER_LABELS = (N_("Correlation"), N_("Status"), N_("Configuration"), N_("Created"), N_("Finished"), N_("Rounds"),
                 N_("Tokens"), N_("Cost"), *SPENT_LABELS.values(), N_("Error class"), N_("Started by"))


def header_facts(kit: PageKit, header: RunHeader) -> list[tuple[str, str, bool]]:
    """The header's facts as plain text, in nr-llm's order (for Markdown): name, value, and
    whether the value is the data's own text (to be escaped) rather than formatted by us."""
    _, fmt, row = kit.gettext, kit.format, header.row
    facts = [
        (_("Correlation"), row.uuid or "–", True),
        (_("Status"), status_text(kit, row.status, reason=row.termination_reason), False),
        (_("Configuration"), row.configuration or "–", True),
        (_("Created"), fmt.datetime(row.created), False),
        (_("Finished"), fmt.datetime(row.finished), False),
        (_("Rounds"), str(_rounds(kit, row.iterations, truncated=row.truncated)), False),
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


def _rounds(kit: PageKit, iterations: int | None, *, truncated: bool | None) -> str:
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


def _cost_text(kit: PageKit, header: RunHeader) -> str:
    cost, source = _cost_parts(kit, header)
    return f"{cost} ({source})"


# ---------------------------------------------------------------- the merged timeline


def sorted_places(runs: pa.Array, times: pa.Array, *, groups: pa.Array, sequences: pa.Array,
                  places: pa.Array) -> pa.Array:
    """The ``places`` in nr-llm's timeline order: by run, by second (-1: none, first), by group
    (0 steps, 1 provider calls, 2 decisions), by step sequence (0 for the others), by place.
    A place is unique, so the order is total; within a run and a source places follow the rows."""
    keys = pa.table({"run": runs, "time": times, "group": groups, "sequence": sequences, "place": places})
    order = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name in keys.column_names])
    return pc.take(keys.column("place"), order).combine_chunks()


def merged_order(step_keys: Sequence[tuple[int | None, int]], calls: Sequence[CallRow],
                 *, decisions: Sequence[DecisionRow]) -> list[tuple[str, int]]:
    """One run's rows as (source, position) in nr-llm's timeline order (``sorted_places``),
    from each step's time and sequence and its provider calls and decisions."""
    steps, entries = len(step_keys), len(calls) + len(decisions)
    times = [-1 if crdate is None else crdate for crdate, _sequence in step_keys]
    times += [-1 if row.crdate is None else row.crdate for row in calls]
    times += [-1 if row.crdate is None else row.crdate for row in decisions]
    places = sorted_places(
        pa.array(itertools.repeat(0, steps + entries), pa.int64()), pa.array(times, pa.int64()),
        groups=pa.array([0] * steps + [1] * len(calls) + [2] * len(decisions), pa.int8()),
        sequences=pa.array([sequence for _crdate, sequence in step_keys] + [0] * entries, pa.int64()),
        places=pa.array(range(steps + entries), pa.int64()))
    first_decision = steps + len(calls)
    return [("step", place) if place < steps else ("call", place - steps) if place < first_decision
            else ("governance", place - first_decision) for place in places.to_pylist()]


class EntryMarkup:
    """How one language writes the provider calls' and decisions' rows of a merged timeline,
    in the steps' columns: source, #, time, kind, round, duration, tool, server, outcome, details.

    A call's row is made of parts, each made once per distinct value of what it shows (a
    handful of providers and models, flags, durations, seconds of the day), which
    ``CallRows`` spreads over the calls and joins with Arrow."""

    def __init__(self, kit: PageKit) -> None:
        self.kit = kit
        _ = kit.gettext
        self.sources = {source: escape(_(key)) for source, key in SOURCE_LABEL_KEYS.items()}
        self.labels = {name: fact_opening(_(name)) for name in ENTRY_FACTS}
        self.badges = {value: outcome_badge(value, kit.outcome_labels[value]) for value in (Outcome.OK.value,
                                                                                          Outcome.FAILED.value)}
        self.yes_no = {True: escape(_("yes")), False: escape(_("no"))}
        self.call_flags: dict[tuple[Any, Any], str] = {}
        self.durations: dict[int, str] = {}
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
        row_id = f' id="{ROW_IDS[source]}{number}"' if number else ""
        time = self._time(crdate)
        return (f'<tr class="source-{source} step-{outcome}"{row_id}>\n  <td>{self.sources[source]}</td>'
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


ROW_IDS = {"call": "c", "governance": "d"}  # a merged row's id: ``cN``, ``dN``

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


CALL_WHO = operator.itemgetter(*(CallRow._fields.index(name) for name in CallWho._fields))
CALL_FLAGS = operator.itemgetter(CallRow._fields.index("cache_hit"), CallRow._fields.index("fallback_attempts"))


class MergedTimeline:
    """The timeline rows of a table's runs with their provider calls and decisions merged in, as
    nr-llm orders them: by second, then by step sequence; rows without one last within their
    second, provider calls before decisions; a row without a time keeps its place after the rows
    before it.

    The order is sorted once for the whole table with Arrow, in no language; the calls' rows
    are made as the steps' are (``TimelinePlan``): each part once per distinct value and
    language, spread over the calls and joined by Arrow. A run page then takes its rows as
    one slice, as without the other tables.
    """

    def __init__(self, plan: TimelinePlan, spans: Sequence[RunSpan], *, whole: WholeRuns, zone: Formatter) -> None:
        """``spans``: the runs to render, in the order of ``plan``'s table, each once."""
        self.plan = plan
        self.spans = list(spans)
        self.number = {span.run: number for number, span in enumerate(self.spans)}
        calls: list[CallRow] = []
        decisions: list[DecisionRow] = []
        self.call_starts, self.decision_starts, offsets = [0], [0], [0]
        call_runs: list[int] = []
        decision_runs: list[int] = []
        call_numbers: list[int] = []
        for number, span in enumerate(self.spans):
            run_calls, run_decisions = whole.entries(span.run)
            calls += run_calls
            decisions += run_decisions
            call_runs += [number] * len(run_calls)
            decision_runs += [number] * len(run_decisions)
            call_numbers += range(1, len(run_calls) + 1)
            self.call_starts.append(len(calls))
            self.decision_starts.append(len(decisions))
            offsets.append(offsets[-1] + span.stop - span.start + len(run_calls) + len(run_decisions))
        self.offsets = offsets
        self.calls, self.decisions = calls, decisions
        self.order = self._order(call_runs, decision_runs)
        self.call_keys = self._call_keys(call_numbers, zone)
        self._call_parts: dict[str, list[Any]] = {}
        self._decision_rows: dict[str, list[str]] = {}

    def _order(self, call_runs: list[int], decision_runs: list[int]) -> pa.Array:
        """Each merged row's place in [steps of the table | calls | decisions], run by run."""
        steps = self.plan.steps.num_rows
        positions = pa.array(itertools.chain.from_iterable(range(span.start, span.stop) for span in self.spans),
                             pa.int64())
        step_runs = pa.array(itertools.chain.from_iterable(
            itertools.repeat(number, span.stop - span.start) for number, span in enumerate(self.spans)), pa.int64())
        undated = pa.scalar(-1, pa.int64())
        times = [pc.fill_null(pc.cast(pc.take(self.plan.times, positions), pa.int64()), undated)]
        sequences = [pc.cast(pc.take(self.plan.sequences, positions), pa.int64())]
        groups = [pa.array(itertools.repeat(0, len(positions)), pa.int8())]
        places = [positions]
        for group, rows, _runs, base in ((1, self.calls, call_runs, steps),
                                        (2, self.decisions, decision_runs, steps + len(self.calls))):
            times.append(pa.array([-1 if row.crdate is None else row.crdate for row in rows], pa.int64()))
            sequences.append(pa.array(itertools.repeat(0, len(rows)), pa.int64()))
            groups.append(pa.array(itertools.repeat(group, len(rows)), pa.int8()))
            places.append(pa.array(range(base, base + len(rows)), pa.int64()))
        return sorted_places(
            pa.concat_arrays([step_runs, pa.array(call_runs, pa.int64()), pa.array(decision_runs, pa.int64())]),
            pa.concat_arrays([_array(times[0]), *times[1:]]), groups=pa.concat_arrays(groups),
            sequences=pa.concat_arrays([_array(sequences[0]), *sequences[1:]]), places=pa.concat_arrays(places))

    def _call_keys(self, call_numbers: list[int], zone: Formatter) -> dict[str, Any]:
        """Each call's key, by part, into the distinct values it shows: in no language."""
        crdates = pa.array([call.crdate for call in self.calls], pa.int64())
        return {
            "who": _codes(map(CALL_WHO, self.calls)),
            "flags": _codes(map(CALL_FLAGS, self.calls)),
            "number": _codes(call_numbers),
            "second": pc.dictionary_encode(seconds_of_day(pa.chunked_array([crdates]), zone)).combine_chunks(),
            "latency": pc.dictionary_encode(pa.array([call.latency_ms for call in self.calls], pa.int64())),
            "ttft": pc.dictionary_encode(pa.array([call.ttft_ms for call in self.calls], pa.int64())),
        }

    def rows(self, kit: PageKit, *, first: int, last: int) -> list[str]:
        """The merged rows of runs ``first`` to ``last`` (by their place in ``spans``) in
        ``kit``'s language; run ``n``'s are ``offsets[n] - offsets[first]`` to ``offsets[n + 1] - offsets[first]``.
        Only these runs' rows are made: a batch's memory is bounded as without the other tables."""
        if last <= first:
            return []
        step_start = self.spans[first].start
        steps = self.plan.rows(kit.language, start=step_start, stop=self.spans[last - 1].stop)
        call_start, call_stop = self.call_starts[first], self.call_starts[last]
        calls = self.call_rows(kit, start=call_start, stop=call_stop)
        decision_start = self.decision_starts[first]
        decisions = self.decision_rows(kit)[decision_start:self.decision_starts[last]]
        places = self.order.slice(self.offsets[first], self.offsets[last] - self.offsets[first])
        table_steps, table_calls = self.plan.steps.num_rows, len(self.calls)
        # From a place in [the table's steps | calls | decisions] to one in [these steps | calls | decisions].
        shift = pc.if_else(pc.less(places, table_steps), -step_start, pc.if_else(
            pc.less(places, table_steps + table_calls), len(steps) - table_steps - call_start,
            len(steps) + len(calls) - table_steps - table_calls - decision_start))
        made = steps + calls + decisions
        return [made[place] for place in pc.add(places, shift).to_pylist()]

    def call_rows(self, kit: PageKit, *, start: int, stop: int) -> list[str]:
        """The rows of calls ``start`` to ``stop`` in ``kit``'s language."""
        if stop <= start:
            return []
        columns = [pc.fill_null(texts.take(codes.slice(start, stop - start)), "")
                   for texts, codes in self.call_parts(kit)]
        return pc.binary_join_element_wise(*columns, "").to_pylist()

    def call_parts(self, kit: PageKit) -> list[Any]:
        """A call row's parts in ``kit``'s language: each a text per distinct value with every
        call's code into them (made once per language)."""
        made = self._call_parts.get(kit.language)
        if made is None:
            made = self._call_parts[kit.language] = self._made_call_parts(kit)
        return made

    def _made_call_parts(self, kit: PageKit) -> list[Any]:
        entries: EntryMarkup = kit.once("entry rows", lambda: EntryMarkup(kit))
        keys = self.call_keys
        who_codes, whos = keys["who"]
        parts = [entries.call_parts(CallWho(*who)) for who in whos]
        flags_codes, flags = keys["flags"]
        number_codes, numbers = keys["number"]

        def by_who(index: int) -> tuple[pa.Array, pa.Array]:
            return pa.array([part[index] for part in parts], pa.string()), who_codes

        def by_value(encoded: pa.DictionaryArray, make: Any) -> tuple[pa.Array, pa.Array]:
            return pa.array([make(value) for value in encoded.dictionary.to_pylist()], pa.string()), encoded.indices

        return [
            by_who(0),
            (pa.array([f' id="{ROW_IDS["call"]}{number}"' for number in numbers], pa.string()), number_codes),
            by_who(1),
            by_value(keys["second"], kit.format.time_of_day),
            by_who(2),
            by_value(keys["latency"], entries.duration),
            by_who(3),
            by_value(keys["latency"], lambda value: entries.fact("Latency", entries.duration(value))),
            by_value(keys["ttft"], lambda value: entries.fact("Time to first token", entries.duration(value))),
            (pa.array([entries.flags(value) for value in flags], pa.string()), flags_codes),
            by_who(4),
        ]

    def decision_rows(self, kit: PageKit) -> list[str]:
        """Every decision's row in ``kit``'s language (made on first use: a few a run at most)."""
        made = self._decision_rows.get(kit.language)
        if made is None:
            entries: EntryMarkup = kit.once("entry rows", lambda: EntryMarkup(kit))
            numbers = itertools.chain.from_iterable(
                range(1, stop - start + 1) for start, stop in zip(self.decision_starts, self.decision_starts[1:]))
            made = self._decision_rows[kit.language] = [
                entries.decision_row(decision, number) for decision, number in zip(self.decisions, numbers)]
        return made


def _codes(keys: Iterable[Any]) -> tuple[pa.Array, list[Any]]:
    """Each key's number among the distinct keys, and the distinct keys in that order."""
    numbers: dict[Any, int] = {}
    codes = [numbers.setdefault(key, len(numbers)) for key in keys]
    return pa.array(codes, pa.int32()), list(numbers)


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
