"""The whole run's timeline: the steps merged with the provider calls and governance decisions
as nr-llm's ``RunTimelineFactory`` does (``merged_order``), sorted once per table with Arrow.

The rows' markup is ``fast_markup``'s (``TimelineMarkup`` for the steps, ``EntryMarkup`` for
the others); this module orders them and spreads each part over the rows.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..aggregate.whole_run import CallRow, DecisionRow, WholeRuns
from ..store.runs import RunSpan
from .fast_markup import CallWho, EntryMarkup
from .i18n import Formatter
from .kit import PageKit
from .timeline_plan import TimelinePlan, seconds_of_day


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
        steps = self.plan.row_texts(kit.language, start=step_start, stop=self.spans[last - 1].stop)
        call_start, call_stop = self.call_starts[first], self.call_starts[last]
        calls = self.call_row_texts(kit, start=call_start, stop=call_stop)
        decision_start = self.decision_starts[first]
        decisions = self.decision_rows(kit)[decision_start:self.decision_starts[last]]
        places = self.order.slice(self.offsets[first], self.offsets[last] - self.offsets[first])
        table_steps, table_calls = self.plan.steps.num_rows, len(self.calls)
        # From a place in [the table's steps | calls | decisions] to one in [these steps | calls | decisions].
        shift = pc.if_else(pc.less(places, table_steps), -step_start, pc.if_else(
            pc.less(places, table_steps + table_calls), len(steps) - table_steps - call_start,
            len(steps) + len(calls) - table_steps - table_calls - decision_start))
        made = pa.chunked_array([*steps.chunks, calls, pa.array(decisions, pa.string())], pa.string())
        return made.take(pc.add(places, shift)).to_pylist()

    def call_row_texts(self, kit: PageKit, *, start: int, stop: int) -> pa.Array:
        """The rows of calls ``start`` to ``stop`` in ``kit``'s language, as Arrow strings."""
        if stop <= start:
            return pa.array([], pa.string())
        columns = [pc.fill_null(texts.take(codes.slice(start, stop - start)), "")
                   for texts, codes in self.call_parts(kit)]
        return pc.binary_join_element_wise(*columns, "")

    def call_parts(self, kit: PageKit) -> list[Any]:
        """A call row's parts in ``kit``'s language: each a text per distinct value with every
        call's code into them (made once per language)."""
        made = self._call_parts.get(kit.language)
        if made is None:
            made = self._call_parts[kit.language] = self._made_call_parts(kit)
        return made

    def _made_call_parts(self, kit: PageKit) -> list[Any]:
        entries = _entry_markup(kit)
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
            (pa.array([entries.call_id(number) for number in numbers], pa.string()), number_codes),
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
            entries = _entry_markup(kit)
            numbers = itertools.chain.from_iterable(
                range(1, stop - start + 1) for start, stop in zip(self.decision_starts, self.decision_starts[1:]))
            made = self._decision_rows[kit.language] = [
                entries.decision_row(decision, number) for decision, number in zip(self.decisions, numbers)]
        return made


def _entry_markup(kit: PageKit) -> EntryMarkup:
    """``kit``'s language's way of writing calls' and decisions' rows, made once per language."""
    made: EntryMarkup = kit.once("entry rows", lambda: EntryMarkup(kit))
    return made


def _codes(keys: Iterable[Any]) -> tuple[pa.Array, list[Any]]:
    """Each key's number among the distinct keys, and the distinct keys in that order."""
    numbers: dict[Any, int] = {}
    codes = [numbers.setdefault(key, len(numbers)) for key in keys]
    return pa.array(codes, pa.int32()), list(numbers)


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
