"""The Wilson interval and the five verdicts at their edges, and the worst-first order."""

from __future__ import annotations

import pytest

from nrllm_report.aggregate.verdicts import VERDICTS_WORST_FIRST, Verdict, rank_key, verdict, wilson_interval


def bounds(successes: int, trials: int) -> tuple[float, float]:
    interval = wilson_interval(successes, trials)
    assert interval is not None
    return interval


def test_wilson_interval_is_none_without_trials() -> None:
    assert wilson_interval(0, 0) is None


def test_wilson_interval_matches_the_textbook_value() -> None:
    low, high = bounds(1, 10)
    assert low == pytest.approx(0.0178762, abs=1e-7)
    assert high == pytest.approx(0.4041500, abs=1e-7)


@pytest.mark.parametrize("trials", [1, 7, 1000], ids=["one", "seven", "thousand"])
def test_wilson_interval_touches_zero_and_one_exactly_at_the_extremes(trials: int) -> None:
    none_low, none_high = bounds(0, trials)
    all_low, all_high = bounds(trials, trials)
    assert none_low == 0.0 and 0.0 < none_high < 1.0
    assert all_high == 1.0 and 0.0 < all_low < 1.0


@pytest.mark.parametrize(
    "successes, trials", [(-1, 5), (6, 5), (0, -1)], ids=["negative", "more-than-trials", "negative-trials"]
)
def test_wilson_interval_refuses_impossible_counts(successes: int, trials: int) -> None:
    with pytest.raises(ValueError):
        wilson_interval(successes, trials)


@pytest.mark.parametrize(
    "ok, failed, budget, min_calls, expected",
    [
        (9, 0, 0.05, 10, Verdict.TOO_FEW_CALLS),
        (10, 0, 0.5, 10, Verdict.RELIABLE),
        (0, 0, 0.05, 0, Verdict.TOO_FEW_CALLS),
        (0, 9, 0.05, 10, Verdict.TOO_FEW_CALLS),
        (0, 10, 0.05, 10, Verdict.DOWN),
        (0, 1, 0.05, 0, Verdict.DOWN),
        (0, 10, 1.0, 10, Verdict.DOWN),
        (5, 5, 1.0, 10, Verdict.RELIABLE),
        (100, 0, 0.0, 10, Verdict.UNCERTAIN),
        (99, 1, 0.0, 10, Verdict.FLAKY),
        (32, 1, 0.05, 10, Verdict.UNCERTAIN),
        (44, 8, 0.05, 10, Verdict.FLAKY),
        (100, 0, 0.05, 10, Verdict.RELIABLE),
        (1, 99, 0.05, 10, Verdict.FLAKY),
    ],
    ids=[
        "one-below-min-calls",
        "exactly-min-calls-is-judged",
        "no-calls-even-with-min-calls-0",
        "all-failed-but-too-few",
        "all-failed-at-min-calls-is-down",
        "one-failed-call-with-min-calls-0-is-down",
        "down-before-reliable-at-budget-1",
        "anything-but-down-is-reliable-at-budget-1",
        "no-failure-at-budget-0-is-uncertain",
        "one-failure-at-budget-0-is-flaky",
        "1-in-33-is-uncertain",
        "8-in-52-is-flaky",
        "0-in-100-is-reliable",
        "one-ok-call-is-not-down",
    ],
)
def test_verdict(ok: int, failed: int, budget: float, min_calls: int, expected: Verdict) -> None:
    assert verdict(ok, failed, budget=budget, min_calls=min_calls) is expected


def test_lower_bound_equal_to_the_budget_is_uncertain_not_flaky() -> None:
    low, _ = bounds(8, 52)
    assert verdict(44, 8, budget=low, min_calls=10) is Verdict.UNCERTAIN
    assert verdict(44, 8, budget=low * (1 - 1e-12), min_calls=10) is Verdict.FLAKY


def test_upper_bound_equal_to_the_budget_is_reliable() -> None:
    _, high = bounds(1, 200)
    assert verdict(199, 1, budget=high, min_calls=10) is Verdict.RELIABLE
    assert verdict(199, 1, budget=high * (1 - 1e-12), min_calls=10) is Verdict.UNCERTAIN


@pytest.mark.parametrize("budget", [-0.01, 1.01, float("nan")], ids=["negative", "above-one", "nan"])
def test_verdict_refuses_a_budget_outside_zero_to_one(budget: float) -> None:
    with pytest.raises(ValueError):
        verdict(10, 1, budget=budget, min_calls=10)


def test_verdict_refuses_negative_counts() -> None:
    with pytest.raises(ValueError):
        verdict(-1, 5, budget=0.05, min_calls=1)


def test_verdict_values_are_the_strings_that_travel() -> None:
    assert [member.value for member in VERDICTS_WORST_FIRST] == [
        "down",
        "flaky",
        "slow",
        "uncertain",
        "too-few-calls",
        "reliable",
    ]
    assert verdict(0, 10, budget=0.05, min_calls=10) == "down"


def test_rank_key_puts_the_worst_first() -> None:
    servers = [
        ("reliable", Verdict.RELIABLE, (0.0, 0.01)),
        ("few-without-calls", Verdict.TOO_FEW_CALLS, None),
        ("few", Verdict.TOO_FEW_CALLS, (0.2, 0.9)),
        ("uncertain", Verdict.UNCERTAIN, (0.01, 0.2)),
        ("flaky-mild", Verdict.FLAKY, (0.06, 0.2)),
        ("flaky-b", Verdict.FLAKY, (0.3, 0.5)),
        ("flaky-a", Verdict.FLAKY, (0.3, 0.6)),
        ("down", Verdict.DOWN, (0.7, 1.0)),
    ]
    ordered = sorted(servers, key=lambda server: rank_key(server[1], server[2], server=server[0]))
    assert [name for name, _, _ in ordered] == [
        "down",
        "flaky-a",
        "flaky-b",
        "flaky-mild",
        "uncertain",
        "few",
        "few-without-calls",
        "reliable",
    ]


def test_rank_key_takes_the_verdict_as_its_string() -> None:
    assert rank_key("down", None, server="x") == rank_key(Verdict.DOWN, None, server="x")
