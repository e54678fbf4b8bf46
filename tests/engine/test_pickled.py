"""What the sweep's workers send back crosses as its fields' tuples (``core.pickled``): each
object arrives equal to what was sent, nested ones included, whatever the field's value."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nrllm_report.aggregate.figures import OutcomeCounts, RunSummary, ServerStats, ToolStats
from nrllm_report.aggregate.whole_run import Spend, Tokens
from nrllm_report.core.pickled import pickled_as_fields
from nrllm_report.store.runs import RunSpan

counts = st.builds(OutcomeCounts, *[st.integers(0, 10**12)] * 6)
texts = st.text(max_size=12)


def round_trip(value: object) -> object:
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


@given(counts=counts, run=texts, start=st.none() | st.integers(), tools=st.lists(texts, max_size=3).map(tuple),
       spend=st.builds(Spend, st.builds(Tokens, st.none() | st.integers(), st.none() | st.integers()),
                       st.none() | st.floats(allow_nan=False)))
def test_what_a_worker_sends_arrives_equal(counts: OutcomeCounts, run: str, start: int | None,
                                           tools: tuple[str, ...], spend: Spend) -> None:
    summary = RunSummary(run, run.lower(), start, None, 1.5, 3, counts.calls, counts, ("a", run), tools)
    tool = ToolStats(run, counts, start, None, {run: counts, "other": OutcomeCounts(ok=1)})
    server = ServerStats(run, "slug", counts, None, start, {run: tool}, {date(2026, 12, 7): counts},
                         {run: counts}, {date(2026, 1, 1)})
    sent = [summary, tool, server, RunSpan(run, 0, 7), spend, counts]
    arrived = round_trip(sent)
    assert arrived == sent
    assert [type(value) for value in arrived] == [type(value) for value in sent]
    assert arrived[2].tools[run].runs[run] == counts  # nested objects too


def test_each_class_of_the_sweep_pickles_as_its_fields() -> None:
    for cls in (OutcomeCounts, RunSummary, ToolStats, ServerStats, RunSpan, Spend, Tokens):
        names = [field.name for field in dataclasses.fields(cls)]
        instance = round_trip(cls(*[None] * len(names)))
        assert [getattr(instance, name) for name in names] == [None] * len(names)
        assert cls.__reduce__(instance)[0] is cls  # type: ignore[operator]


def test_a_dataclass_with_a_field_outside_init_is_refused() -> None:
    @dataclasses.dataclass
    class Partly:
        given: int
        made: int = dataclasses.field(init=False, default=0)

    with pytest.raises(TypeError, match="Partly"):
        pickled_as_fields(Partly)
