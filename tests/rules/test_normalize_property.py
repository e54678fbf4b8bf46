"""Property tests of the ADR-191 reading over generated tool rows.

Each property holds for the row checker and for the commands' reading (issue 15):
the row is read in JSON Lines among valid rows of its shape, as the commands read an
export, and must give what the row checker gives. Every test asserts the share of
its kept rows the fast path vouched for, so that the properties test that path too.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import check_one, jsonl_bytes
from hypothesis import given, settings
from hypothesis import strategies as st

from nrllm_report.check.checked import check_inputs
from nrllm_report.check.rows import RowResult
from nrllm_report.core.model import Outcome
from nrllm_report.readers import resolve_inputs

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)
FILLERS = 20
FAST_SHARE = 0.9  # of the kept rows, at least this many must have been vouched for by the fast path

MISSING = object()

# What a flag or outcome slot may hold: absent, null, the right type, and the wrong ones.
flags = st.one_of(st.just(MISSING), st.none(), st.booleans(), st.sampled_from(["true", "false", 0, 1, "", 1.0]))
outcomes = st.one_of(
    st.just(MISSING),
    st.none(),
    st.sampled_from([outcome.value for outcome in Outcome]),
    st.sampled_from(["OK", "error", "canceled", "", 0]),
    st.text(max_size=12),
)
names = st.text(max_size=40)
run_ids = st.one_of(st.integers(min_value=0, max_value=2**63 - 1), st.text(min_size=1, max_size=40))


def _place(row: dict[str, Any], payload: dict[str, Any], key: str, value: Any, where: str) -> None:
    if value is MISSING:
        return
    if where in ("column", "both"):
        row[key] = value
    if where in ("payload", "both"):
        payload[key] = value


@st.composite
def tool_rows(draw: st.DrawFn, flag_values: st.SearchStrategy[Any] = flags,
              outcome_values: st.SearchStrategy[Any] = outcomes) -> dict[str, Any]:
    """A tool row with the flag and the outcome anywhere a real export may put them."""
    places = st.sampled_from(["payload", "column", "both"])
    payload: dict[str, Any] = {"toolName": draw(names)}
    row: dict[str, Any] = {"run": draw(run_ids), "sequence": draw(st.integers(0, 1000)), "kind": "tool"}
    _place(row, payload, "toolIsError", draw(flag_values), draw(places))
    _place(row, payload, "toolOutcome", draw(outcome_values), draw(places))
    row["payload"] = json.dumps(payload) if draw(st.booleans()) else payload
    return row


@dataclass
class Share:
    """How many of the kept rows the fast path vouched for, over a property test's examples."""

    kept: int = 0
    vouched: int = 0

    def assert_enough(self) -> None:
        assert self.kept >= 20, f"too few kept rows to measure the fast path's share ({self.kept})"
        assert self.vouched >= FAST_SHARE * self.kept, f"the fast path took {self.vouched} of {self.kept} kept rows"


def filler_rows(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Valid rows in the shape of ``row`` (run as number or text, payload as object or text), other runs."""
    runs: list[Any] = [-1 - index for index in range(FILLERS)] if isinstance(row["run"], int) else [
        f"filler-{index}" for index in range(FILLERS)]
    payload = {"toolName": "mcp_github_create_issue", "toolIsError": False}
    return [{"run": run, "sequence": 0, "kind": "tool",
             "payload": json.dumps(payload) if isinstance(row["payload"], str) else payload} for run in runs]


def checked(row: dict[str, Any], share: Share) -> RowResult:
    """The row checker's result for ``row``, after asserting the commands read it the same way."""
    result = check_one(row)
    data = jsonl_bytes([*filler_rows(row), row])
    read = check_inputs(resolve_inputs(["-"], standard_input=io.BytesIO(data)), [])
    position = FILLERS + 1
    records = [record for record in read.steps.to_pylist() if record["row"] == position]
    expected = result.step.to_record() if result.step is not None else None
    assert [{key: record[key] for key in expected} for record in records] == ([expected] if expected else [])
    assert [(p.rule, p.text()) for p in read.tally.problems if p.row == position] == [
        (p.rule, p.text()) for p in result.problems]
    if result.step is not None:
        share.kept += 1
        share.vouched += read.tally.rows_fast == FILLERS + 1
    return result


def with_share(prop: Callable[[Share], Callable[[], None]]) -> Callable[[], None]:
    """A test that runs the property ``prop`` builds around a share, then asserts the share."""

    def test() -> None:
        share = Share()
        prop(share)()
        share.assert_enough()

    test.__name__ = prop.__name__
    test.__doc__ = prop.__doc__
    return test


def _flag_of(row: dict[str, Any]) -> Any:
    payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
    return row.get("toolIsError", payload.get("toolIsError"))


@pytest.mark.slow
@with_share
def test_normalizing_never_yields_an_outcome_that_disagrees_with_its_flag(share: Share) -> Callable[[], None]:
    @PROPERTY_SETTINGS
    @given(tool_rows())
    def holds(row: dict[str, Any]) -> None:
        step = checked(row, share).step
        if step is None or step.outcome is None:
            return
        assert isinstance(step.tool_is_error, bool)
        assert step.tool_is_error is _flag_of(row)
        assert step.outcome.is_error is step.tool_is_error

    return holds


@pytest.mark.slow
@with_share
def test_a_kept_tool_row_states_an_outcome_exactly_when_it_has_a_boolean_flag(share: Share) -> Callable[[], None]:
    @PROPERTY_SETTINGS
    @given(tool_rows())
    def holds(row: dict[str, Any]) -> None:
        result = checked(row, share)
        if result.step is None:
            return
        assert (result.step.outcome is not None) is isinstance(_flag_of(row), bool)

    return holds


@pytest.mark.slow
@with_share
def test_a_legacy_rows_outcome_is_exactly_what_its_boolean_said(share: Share) -> Callable[[], None]:
    @PROPERTY_SETTINGS
    @given(tool_rows(flag_values=st.booleans(), outcome_values=st.just(MISSING)))
    def holds(row: dict[str, Any]) -> None:
        result = checked(row, share)
        assert result.step is not None, result.problems
        assert result.problems == ()
        assert result.step.outcome is (Outcome.FAILED if _flag_of(row) else Outcome.OK)

    return holds


@pytest.mark.slow
@with_share
def test_a_row_with_flag_and_outcome_is_kept_exactly_when_they_agree(share: Share) -> Callable[[], None]:
    @PROPERTY_SETTINGS
    @given(tool_rows(flag_values=st.booleans(),
                     outcome_values=st.sampled_from(list(Outcome)).map(lambda o: o.value)))
    def holds(row: dict[str, Any]) -> None:
        payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
        outcome = Outcome(row.get("toolOutcome", payload.get("toolOutcome")))
        result = checked(row, share)
        if outcome.is_error is _flag_of(row):
            assert result.step is not None and result.step.outcome is outcome
        else:
            assert [problem.rule.value for problem in result.problems] == ["flag-contradicts-outcome"]

    return holds
