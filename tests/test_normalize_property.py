"""Property tests of the ADR-191 reading over generated tool rows (issue 2, "Done means")."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import check_one
from nrllm_report.core.model import Outcome

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)

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


def _flag_of(row: dict[str, Any]) -> Any:
    payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
    return row.get("toolIsError", payload.get("toolIsError"))


@PROPERTY_SETTINGS
@given(tool_rows())
def test_normalizing_never_yields_an_outcome_that_disagrees_with_its_flag(row: dict[str, Any]) -> None:
    step = check_one(row).step
    if step is None or step.outcome is None:
        return
    assert isinstance(step.tool_is_error, bool)
    assert step.tool_is_error is _flag_of(row)
    assert step.outcome.is_error is step.tool_is_error


@PROPERTY_SETTINGS
@given(tool_rows())
def test_a_kept_tool_row_states_an_outcome_exactly_when_it_has_a_boolean_flag(row: dict[str, Any]) -> None:
    result = check_one(row)
    if result.step is None:
        return
    assert (result.step.outcome is not None) is isinstance(_flag_of(row), bool)


@PROPERTY_SETTINGS
@given(tool_rows(flag_values=st.booleans(), outcome_values=st.just(MISSING)))
def test_a_legacy_rows_outcome_is_exactly_what_its_boolean_said(row: dict[str, Any]) -> None:
    result = check_one(row)
    assert result.step is not None, result.problems
    assert result.problems == ()
    assert result.step.outcome is (Outcome.FAILED if _flag_of(row) else Outcome.OK)


@PROPERTY_SETTINGS
@given(tool_rows(flag_values=st.booleans(), outcome_values=st.sampled_from(list(Outcome)).map(lambda o: o.value)))
def test_a_row_with_flag_and_outcome_is_kept_exactly_when_they_agree(row: dict[str, Any]) -> None:
    payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
    outcome = Outcome(row.get("toolOutcome", payload.get("toolOutcome")))
    result = check_one(row)
    if outcome.is_error is _flag_of(row):
        assert result.step is not None and result.step.outcome is outcome
    else:
        assert [problem.rule.value for problem in result.problems] == ["flag-contradicts-outcome"]
