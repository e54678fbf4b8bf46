"""A table's merged timeline (the build's run pages) orders each run's rows as nr-llm does,
whatever its neighbours: by second, then step sequence; rows without one last within their
second, provider calls before decisions; undated rows first, in their own order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timezone
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nrllm_report.aggregate.whole_run import CallRow, DecisionRow
from nrllm_report.site.i18n import Formatter
from nrllm_report.site.whole_run import MergedTimeline
from nrllm_report.store.runs import RunSpan

T0 = 1_790_000_000
UTC = Formatter("en", timezone.utc)
times = st.one_of(st.none(), st.integers(T0, T0 + 3))


@dataclass
class StepTable:
    """What a merged timeline reads of a ``TimelinePlan``: its table's times and sequences, and
    its rows (here, names that say which step each is)."""

    steps: pa.Table

    @property
    def times(self) -> pa.ChunkedArray:
        return self.steps.column("crdate")

    @property
    def sequences(self) -> pa.ChunkedArray:
        return self.steps.column("sequence")

    def row_texts(self, language: str, start: int, stop: int) -> pa.ChunkedArray:
        runs, sequences = self.steps.column("run").to_pylist(), self.sequences.to_pylist()
        return pa.chunked_array([[f"{runs[row]} step {sequences[row]}" for row in range(start, stop)]], pa.string())


class NamedRows(MergedTimeline):
    """Calls' and decisions' rows named by their run and place in it, not rendered."""

    def call_row_texts(self, kit: Any, *, start: int, stop: int) -> pa.Array:
        names = [f"{run} call {number}" for run, number in self.named(self.call_starts)]
        return pa.array(names[start:stop], pa.string())

    def decision_rows(self, kit: Any) -> list[str]:
        return [f"{run} decision {number}" for run, number in self.named(self.decision_starts)]

    def named(self, starts: list[int]) -> list[tuple[str, int]]:
        return [(span.run, number) for span, start, stop in zip(self.spans, starts, starts[1:])
                for number in range(stop - start)]


@dataclass
class Entries:
    calls: dict[str, list[CallRow]]
    decisions: dict[str, list[DecisionRow]]
    merged = True

    def entries(self, run: str) -> tuple[list[CallRow], list[DecisionRow]]:
        return self.calls.get(run, []), self.decisions.get(run, [])


@dataclass
class Kit:
    language: str = "en"


def call(crdate: int | None) -> CallRow:
    return CallRow(
        crdate, "chat", "openai", "gpt", None, None, True, None, 100, None, None, None, None, None, None, None
    )


def decision(crdate: int | None) -> DecisionRow:
    return DecisionRow(crdate, "tool_denied", None, "mcp_github_x", None, None, None)


def expected(run: str, step_times: list[int | None], call_times: list[int | None],
             decision_times: list[int | None]) -> list[str]:
    """The run's rows in nr-llm's order, sorted here one run at a time."""
    keyed = [((-1 if when is None else when), 0, sequence, sequence, f"{run} step {sequence}")
             for sequence, when in enumerate(step_times)]
    keyed += [
        ((-1 if when is None else when), 1, 0, place, f"{run} call {place}") for place, when in enumerate(call_times)
    ]
    keyed += [((-1 if when is None else when), 2, 0, place, f"{run} decision {place}")
              for place, when in enumerate(decision_times)]
    return [name for *_key, name in sorted(keyed)]


run_shapes = st.lists(st.tuples(st.lists(times, min_size=1, max_size=6), st.lists(times, max_size=4),
                                st.lists(times, max_size=3)), min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(run_shapes, st.data())
def test_each_runs_rows_in_a_batch_of_runs_are_in_nr_llms_order(shapes: list[Any], data: st.DataObject) -> None:
    names = [f"r{number}" for number in range(len(shapes))]
    rows: dict[str, list[Any]] = {"run": [], "sequence": [], "crdate": []}
    spans, calls, decisions = [], {}, {}
    for run, (step_times, call_times, decision_times) in zip(names, shapes):
        spans.append(RunSpan(run, len(rows["run"]), len(rows["run"]) + len(step_times)))
        rows["run"] += [run] * len(step_times)
        rows["sequence"] += list(range(len(step_times)))
        rows["crdate"] += step_times
        calls[run] = [call(when) for when in call_times]
        decisions[run] = [decision(when) for when in decision_times]
    table = pa.table({"run": rows["run"], "sequence": pa.array(rows["sequence"], pa.int64()),
                      "crdate": pa.array(rows["crdate"], pa.int64())})
    merged = NamedRows(StepTable(table), spans, whole=Entries(calls, decisions), zone=UTC)  # type: ignore[arg-type]
    first = data.draw(st.integers(0, len(names) - 1))
    last = data.draw(st.integers(first + 1, len(names)))
    batch = merged.rows(Kit(), first=first, last=last)
    base = merged.offsets[first]
    assert len(batch) == merged.offsets[last] - base
    for number in range(first, last):
        run = names[number]
        shown = batch[merged.offsets[number] - base:merged.offsets[number + 1] - base]
        assert shown == expected(run, *shapes[number])
