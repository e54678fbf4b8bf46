"""Flakiness statistics: the Wilson 95 % interval, the five verdicts at their edges, cancelled calls
left out, and the worst-first order."""

from __future__ import annotations

import math

import pytest

from nrllm_report.aggregate.figures import OutcomeCounts
from nrllm_report.aggregate.verdicts import VERDICTS_WORST_FIRST, rank_key, verdict, wilson_interval
from nrllm_report.core.model import Outcome, Verdict
from nrllm_report.core.options import DEFAULT_MIN_CALLS

Z = 1.959963984540054  # the 97.5th percentile of the standard normal distribution


def textbook_wilson(failures: int, trials: int) -> tuple[float, float]:
    """(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), written out independently."""
    p = failures / trials
    middle = p + Z**2 / (2 * trials)
    spread = Z * math.sqrt(p * (1 - p) / trials + Z**2 / (4 * trials**2))
    return (middle - spread) / (1 + Z**2 / trials), (middle + spread) / (1 + Z**2 / trials)


@pytest.mark.parametrize(
    ("failures", "trials", "low", "high"),
    [
        # 0/10: the lower bound is 0 and the upper z²/(n+z²) = 3.8415/13.8415.
        pytest.param(0, 10, 0.0, 0.2775, id="0-of-10"),
        # 5/10: symmetric around one half.
        pytest.param(5, 10, 0.2366, 0.7634, id="5-of-10"),
        pytest.param(20, 100, 0.1334, 0.2888, id="20-of-100"),
        pytest.param(10, 10, 0.7225, 1.0, id="10-of-10"),
        pytest.param(1, 3, 0.0615, 0.7923, id="1-of-3"),
        pytest.param(1, 1, 0.2065, 1.0, id="1-of-1"),
    ],
)
def test_wilson_interval_known_values(failures: int, trials: int, low: float, high: float) -> None:
    interval = wilson_interval(failures, trials)
    assert interval is not None
    assert (round(interval[0], 4), round(interval[1], 4)) == (low, high)
    assert interval == pytest.approx(textbook_wilson(failures, trials), abs=1e-12)


def test_wilson_interval_of_no_calls_is_none() -> None:
    assert wilson_interval(0, 0) is None
    assert OutcomeCounts(cancelled=7).wilson_interval() is None


@pytest.mark.parametrize(
    ("failures", "trials"),
    [
        pytest.param(failures, trials, id=f"{failures}-of-{trials}")
        for trials in (1, 2, 7, 50, 1000)
        for failures in sorted({0, 1, trials // 2, trials})
    ],
)
def test_wilson_interval_holds_the_rate_and_stays_in_zero_to_one(failures: int, trials: int) -> None:
    interval = wilson_interval(failures, trials)
    assert interval is not None
    low, high = interval
    rate = failures / trials
    assert 0.0 <= low <= high <= 1.0
    assert low - 1e-12 <= rate <= high + 1e-12  # float noise of ~1e-19 at 0 is no error


def test_more_calls_at_the_same_rate_narrow_the_interval() -> None:
    few, many = wilson_interval(1, 3), wilson_interval(100, 300)
    assert few is not None and many is not None
    assert many[0] > few[0] and many[1] < few[1]


BUDGET = 0.05


def verdict_of(counts: OutcomeCounts, min_calls: int) -> Verdict:
    return verdict(counts.ok, counts.failed, budget=BUDGET, min_calls=min_calls)


@pytest.mark.parametrize(
    ("counts", "min_calls", "expected"),
    [
        pytest.param(OutcomeCounts(ok=80), 10, Verdict.RELIABLE, id="reliable"),
        pytest.param(OutcomeCounts(ok=10), 10, Verdict.UNCERTAIN, id="ten-ok-cannot-show-5-percent"),
        pytest.param(OutcomeCounts(failed=3), 3, Verdict.DOWN, id="down-lower-minimum"),
        pytest.param(OutcomeCounts(ok=2, failed=1), 10, Verdict.TOO_FEW_CALLS, id="three-calls"),
        pytest.param(
            OutcomeCounts(ok=5, cancelled=50), 10, Verdict.TOO_FEW_CALLS, id="cancelled-are-not-calls-for-the-minimum"
        ),
        pytest.param(OutcomeCounts(ok=80, cancelled=50), 10, Verdict.RELIABLE, id="cancelled-do-not-make-flaky"),
        pytest.param(OutcomeCounts(failed=10, cancelled=5), 10, Verdict.DOWN, id="cancelled-are-not-ok"),
        pytest.param(OutcomeCounts(cancelled=20), 1, Verdict.TOO_FEW_CALLS, id="only-cancelled"),
    ],
)
def test_verdict_of_the_counts_leaves_cancelled_calls_out(
    counts: OutcomeCounts, min_calls: int, expected: Verdict
) -> None:
    assert verdict_of(counts, min_calls) is expected


def test_default_minimum_is_ten_calls() -> None:
    assert DEFAULT_MIN_CALLS == 10
    assert verdict_of(OutcomeCounts(ok=9), DEFAULT_MIN_CALLS) is Verdict.TOO_FEW_CALLS
    assert verdict_of(OutcomeCounts(ok=10), DEFAULT_MIN_CALLS) is not Verdict.TOO_FEW_CALLS


@pytest.mark.parametrize(
    ("counts", "rate"),
    [
        pytest.param(OutcomeCounts(ok=7, failed=1), 0.125, id="one-in-eight"),
        pytest.param(OutcomeCounts(ok=7, failed=1, cancelled=92), 0.125, id="cancelled-left-out"),
        pytest.param(OutcomeCounts(ok=10, cancelled=50), 0.0, id="only-cancellations-beside-ok"),
        pytest.param(OutcomeCounts(failed=4, cancelled=4), 1.0, id="cancelled-are-not-ok-either"),
        pytest.param(OutcomeCounts(cancelled=3), None, id="no-rate-without-ok-or-failed"),
        pytest.param(OutcomeCounts(ok=3, unstated=5), 0.0, id="calls-without-outcome-left-out"),
    ],
)
def test_failure_rate_is_failed_over_ok_plus_failed(counts: OutcomeCounts, rate: float | None) -> None:
    assert counts.failure_rate == rate


def test_cancelled_calls_change_neither_interval_nor_verdict() -> None:
    without = OutcomeCounts(ok=40, failed=2)
    with_cancels = OutcomeCounts(ok=40, failed=2, cancelled=200)
    assert with_cancels.wilson_interval() == without.wilson_interval() == wilson_interval(2, 42)
    assert verdict_of(with_cancels, 10) is verdict_of(without, 10) is Verdict.UNCERTAIN


def test_counts_add_each_outcome_to_its_own_bucket() -> None:
    counts = OutcomeCounts()
    for outcome in [Outcome.OK, Outcome.OK, Outcome.FAILED, Outcome.CANCELLED, None]:
        counts.add(outcome)
    assert [counts.of(outcome) for outcome in Outcome] == [2, 1, 1]
    assert counts.calls == 5


def bounds(successes: int, trials: int) -> tuple[float, float]:
    interval = wilson_interval(successes, trials)
    assert interval is not None
    return interval


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
