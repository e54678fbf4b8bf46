"""Latency figures: percentiles and their intervals against references computed here, the slow
verdict at its edges, changes of the slow share, which calls are left out, the budget's parsing."""

from __future__ import annotations

import itertools
import math
import random
from datetime import date, timedelta
from fractions import Fraction

import pyarrow as pa
import pytest

from nrllm_report.aggregate.latency import (
    FAILED_COLUMN,
    QUANTILES,
    LatencySettings,
    LeftOut,
    interval_coverage,
    latency_figures,
    latency_json,
    latency_verdict,
    nearest_rank,
    order_statistic_ranks,
    percentile_of,
    percentiles,
    share_over,
    timed_calls,
)
from nrllm_report.aggregate.verdicts import Proportion, verdict
from nrllm_report.core.model import LatencyDirection, LatencyVerdict, Verdict
from nrllm_report.core.options import (
    DEFAULT_LATENCY_BUDGET_SECONDS,
    budget_of,
    parse_latency_budgets,
)

START = date(2026, 9, 1)

# ---------------------------------------------------------------- references, computed the slow way


def reference_percentile(durations: list[float], quantile: float) -> float:
    """The smallest duration with at least ``quantile`` of the durations at or below it."""
    share = Fraction(repr(quantile))
    return min(value for value in durations if sum(other <= value for other in durations) >= share * len(durations))


def binomial_below(calls: int, quantile: Fraction) -> list[Fraction]:
    """P(B < rank) for every rank 0..calls + 1, B ~ Binomial(calls, quantile), exactly."""
    masses = [math.comb(calls, k) * quantile**k * (1 - quantile) ** (calls - k) for k in range(calls + 1)]
    return [Fraction(0), *itertools.accumulate(masses)]


def reference_ranks(calls: int, quantile: float) -> tuple[int, int] | None:
    """The equal-tailed ranks by exact arithmetic over every rank: P(B < low) <= 1/40, P(B >= high) <= 1/40."""
    below, tail = binomial_below(calls, Fraction(repr(quantile))), Fraction(1, 40)
    lows = [rank for rank in range(1, calls + 1) if below[rank] <= tail]
    highs = [rank for rank in range(1, calls + 1) if 1 - below[rank] <= tail]
    return (max(lows), min(highs)) if lows and highs else None


# ---------------------------------------------------------------- percentiles


@pytest.mark.parametrize(
    ("calls", "quantile", "rank"),
    [(1, 0.5, 1), (1, 0.99, 1), (2, 0.5, 1), (10, 0.5, 5), (10, 0.9, 9), (11, 0.9, 10), (100, 0.07, 7),
     (200, 0.9, 180), (200, 0.99, 198), (3, 0.99, 3)],
    ids=lambda value: str(value),
)
def test_the_nearest_rank_is_ceil_of_quantile_times_calls(calls: int, quantile: float, rank: int) -> None:
    assert nearest_rank(calls, quantile) == rank


@pytest.mark.parametrize("calls", [1, 2, 3, 7, 10, 19, 20, 41, 60])
def test_percentiles_match_the_definition_on_shuffled_durations_with_ties(calls: int) -> None:
    rng = random.Random(calls)
    durations = [float(rng.choice([5, 10, 10, 20, 40, 80, 80, 80, 500, 1200, 19000])) for _ in range(calls)]
    figures = percentiles(durations)
    assert figures.calls == calls
    for got, quantile in zip((figures.p50, figures.p90, figures.p99), QUANTILES):
        assert got.value_ms == reference_percentile(durations, quantile)


@pytest.mark.parametrize("quantile", QUANTILES)
def test_ranks_match_exact_binomial_sums(quantile: float) -> None:
    for calls in [*range(1, 60), 200, 367, 368, 400]:
        assert order_statistic_ranks(calls, quantile) == reference_ranks(calls, quantile), calls


@pytest.mark.parametrize(
    ("quantile", "fewest_calls"), [(0.5, 6), (0.9, 36), (0.99, 368)], ids=["p50", "p90", "p99"]
)
def test_no_interval_below_the_fewest_calls_that_hold_one_at_95_percent(quantile: float, fewest_calls: int) -> None:
    assert order_statistic_ranks(fewest_calls - 1, quantile) is None
    assert order_statistic_ranks(fewest_calls, quantile) is not None
    short = percentile_of([float(value) for value in range(1, fewest_calls)], quantile)
    assert short.value_ms is not None and short.interval_ms is None


def test_the_interval_is_the_order_statistics_of_its_ranks_on_constructed_durations() -> None:
    durations = [10.0 * value for value in range(1, 201)]
    random.Random(3).shuffle(durations)
    figures = percentiles(pa.array(durations))
    # Ranks from the exact reference: p50 86..115, p90 171..189; no p99 interval at 200 calls.
    assert reference_ranks(200, 0.5) == (86, 115) and reference_ranks(200, 0.9) == (171, 189)
    assert (figures.p50.value_ms, figures.p50.interval_ms) == (1000.0, (860.0, 1150.0))
    assert (figures.p90.value_ms, figures.p90.interval_ms) == (1800.0, (1710.0, 1890.0))
    assert (figures.p99.value_ms, figures.p99.interval_ms) == (1980.0, None)


@pytest.mark.parametrize("calls", range(6, 13))
def test_coverage_of_the_median_interval_by_enumerating_which_calls_fall_below_it(calls: int) -> None:
    low, high = order_statistic_ranks(calls, 0.5) or (0, 0)
    # Each call falls below the true median with probability 1/2: enumerate every pattern.
    covering = sum(low <= sum(pattern) < high for pattern in itertools.product((0, 1), repeat=calls))
    assert interval_coverage(calls, 0.5) == pytest.approx(covering / 2**calls, abs=1e-12)


def test_every_interval_that_exists_covers_at_least_95_percent() -> None:
    for quantile in QUANTILES:
        for calls in range(1, 500):
            coverage = interval_coverage(calls, quantile)
            assert coverage is None or coverage >= 0.95, (quantile, calls)
    assert interval_coverage(200, 0.9) == pytest.approx(0.96688, abs=1e-5)


def test_no_calls_give_no_percentiles() -> None:
    figures = percentiles([])
    assert figures.calls == 0 and figures.p90.value_ms is None and figures.p90.interval_ms is None


@pytest.mark.parametrize("quantile", [0.0, 1.0, -0.1, 1.5])
def test_a_quantile_outside_0_to_1_is_refused(quantile: float) -> None:
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        percentile_of([1.0], quantile)


# ---------------------------------------------------------------- which calls count


def test_cancelled_denied_and_0_ms_calls_are_left_out_and_counted() -> None:
    durations = [1500.0, 30000.0, 0.0, 0.0, 700.0, None, 250.0, 900.0]
    outcomes = ["ok", "cancelled", "failed", "ok", None, "failed", "failed", "cancelled"]
    timed, left_out = timed_calls(pa.array(durations, pa.float64()), pa.array(outcomes), days=pa.array([START] * 8))
    # A null duration is read as 0 ms, as the checker reads a missing one.
    assert left_out == LeftOut(cancelled=2, zero_ms=3, unstated=1)
    assert timed.column("durationMs").to_pylist() == [1500.0, 250.0]
    assert timed.column(FAILED_COLUMN).to_pylist() == [False, True]


def test_slow_is_strictly_over_the_budget_and_near_the_timeout_from_95_percent_of_it() -> None:
    durations = [9999.0, 10000.0, 10000.5, 18999.0, 19000.0, 25000.0]
    timed, _ = timed_calls(pa.array(durations), pa.array(["ok"] * 6), days=pa.array([START] * 6))
    settings = LatencySettings()
    assert share_over(timed, settings.latency_budget_ms) == Proportion(4, 6)
    assert settings.near_timeout_ms == 19000.0
    assert share_over(timed, settings.near_timeout_ms, inclusive=True) == Proportion(2, 6)


def test_percentiles_are_apart_for_ok_and_failed_calls() -> None:
    durations = [100.0, 200.0, 300.0, 19500.0, 20010.0, 0.0, 4000.0]
    outcomes = ["ok", "ok", "ok", "failed", "failed", "failed", "cancelled"]
    figures = latency_figures(pa.array(durations), pa.array(outcomes), days=pa.array([START] * 7, pa.date32()))
    assert (figures.ok.calls, figures.ok.p50.value_ms) == (3, 200.0)
    assert (figures.failed.calls, figures.failed.p50.value_ms) == (2, 19500.0)
    assert figures.timed.calls == 5 and figures.left_out == LeftOut(cancelled=1, zero_ms=1)
    assert figures.near_timeout == Proportion(2, 5) and figures.slow == Proportion(2, 5)


# ---------------------------------------------------------------- the verdict


@pytest.mark.parametrize(
    ("slow", "calls", "slow_budget", "expected"),
    [
        (0, 9, 0.05, LatencyVerdict.TOO_FEW_CALLS),  # below the minimum of 10
        (0, 0, 0.05, LatencyVerdict.TOO_FEW_CALLS),
        (0, 10, 0.05, LatencyVerdict.UNCERTAIN),  # exactly the minimum is judged: 0 of 10 reaches 28 %
        (1, 33, 0.05, LatencyVerdict.UNCERTAIN),  # interval 0.5 % .. 15 %
        (8, 52, 0.05, LatencyVerdict.SLOW),  # interval 8 % .. 28 %
        (0, 100, 0.05, LatencyVerdict.WITHIN_BUDGET),  # upper end 3.7 %
        (0, 73, 0.05, LatencyVerdict.WITHIN_BUDGET),  # upper end 4.99 %: at or below the budget
        (0, 72, 0.05, LatencyVerdict.UNCERTAIN),  # upper end 5.06 %
        (20, 20, 0.05, LatencyVerdict.SLOW),  # all slow: slow (the failure verdict says down)
        (20, 20, 1.0, LatencyVerdict.WITHIN_BUDGET),  # a budget of 1 allows everything
        (0, 1000, 0.0, LatencyVerdict.UNCERTAIN),  # a budget of 0: never within
        (1, 1000, 0.0, LatencyVerdict.SLOW),
    ],
    ids=lambda value: str(getattr(value, "value", value)),
)
def test_the_slow_verdict_at_its_edges(slow: int, calls: int, slow_budget: float, expected: LatencyVerdict) -> None:
    assert latency_verdict(Proportion(slow, calls), slow_budget=slow_budget, min_calls=10) is expected


def test_the_slow_verdict_is_the_failure_verdicts_judgement() -> None:
    same = {Verdict.FLAKY: LatencyVerdict.SLOW, Verdict.RELIABLE: LatencyVerdict.WITHIN_BUDGET,
            Verdict.UNCERTAIN: LatencyVerdict.UNCERTAIN, Verdict.TOO_FEW_CALLS: LatencyVerdict.TOO_FEW_CALLS}
    for calls in range(0, 80, 3):
        for slow in range(0, calls):  # at least one call not slow: the failure verdict's "down" aside
            for budget in (0.0, 0.02, 0.05, 0.2):
                failure = verdict(calls - slow, slow, budget=budget, min_calls=10)
                assert latency_verdict(Proportion(slow, calls), slow_budget=budget, min_calls=10) is same[failure]


@pytest.mark.parametrize("budget", [-0.1, 1.5])
def test_a_slow_budget_outside_0_to_1_is_refused(budget: float) -> None:
    with pytest.raises(ValueError, match="slow budget must lie in"):
        latency_verdict(Proportion(1, 20), slow_budget=budget, min_calls=10)


# ---------------------------------------------------------------- changes of the slow share


def planted(slow_per_day_before: list[int], slow_per_day_after: list[int], calls_a_day: int = 20
            ) -> dict[str, pa.Array]:
    """Per-call columns: each day ``calls_a_day`` ok calls, the given number of them at 15 s, the rest at 1 s."""
    durations, days = [], []
    for offset, slow in enumerate([*slow_per_day_before, *slow_per_day_after]):
        durations += [15000.0] * slow + [1000.0] * (calls_a_day - slow)
        days += [START + timedelta(days=offset)] * calls_a_day
    return {"durations_ms": pa.array(durations), "outcomes": pa.array(["ok"] * len(durations)),
            "days": pa.array(days, pa.date32())}


def test_a_planted_slowdown_is_found_on_its_day_and_starts_the_current_period() -> None:
    before = [1 if day % 5 == 0 else 0 for day in range(14)]  # 3 of 280 slow: 1 %
    after = [4, 3, 5, 4, 4, 3, 5, 4, 4, 3, 5, 4, 4, 4]  # 56 of 280: 20 %
    figures = latency_figures(**planted(before, after))
    (change,) = figures.changes
    assert change.day == START + timedelta(days=14) and change.earliest <= change.day <= change.latest
    assert change.probability >= 0.8
    assert figures.since == change.day and figures.timed.calls == 280 and figures.all_days.calls == 560
    assert figures.slow == Proportion(56, 280) and figures.verdict is LatencyVerdict.SLOW
    summary = latency_json(figures)
    assert summary["changes"] == [{"day": "2026-09-15", "direction": "slower",
                                   "range": [change.earliest.isoformat(), change.latest.isoformat()],
                                   "probability": change.probability}]


def test_a_speed_up_is_faster_and_a_steady_series_has_no_change() -> None:
    slower, steady = [4, 3, 5, 4, 4, 3, 5, 4, 4, 3, 5, 4, 4, 4], [1 if day % 5 == 0 else 0 for day in range(14)]
    faster = latency_figures(**planted(slower, steady))
    assert [latency_json(faster)["changes"][0]["direction"]] == [LatencyDirection.FASTER.value]
    unchanged = latency_figures(**planted(steady, steady))
    assert unchanged.changes == () and unchanged.since is None and unchanged.timed.calls == 560


def test_the_summary_object_has_exactly_the_contracts_keys() -> None:
    summary = latency_json(latency_figures(**planted([1] * 10, [1] * 10)))
    assert list(summary) == ["calls", "p50_ms", "p90_ms", "p99_ms", "p90_interval_ms", "latency_budget_ms",
                             "slow", "slow_rate", "slow_interval", "near_timeout", "changes", "verdict"]
    assert summary["calls"] == 400 and summary["latency_budget_ms"] == 10000.0
    assert summary["p90_interval_ms"] == [1000.0, 1000.0] and summary["slow"] == 20
    assert summary["near_timeout"] == 0.0 and len(summary["slow_interval"]) == 2


def test_too_few_calls_give_null_intervals_in_the_summary() -> None:
    durations = [float(value) for value in range(1, 21)]
    summary = latency_json(latency_figures(pa.array(durations), pa.array(["ok"] * 20), days=pa.array([START] * 20)))
    assert summary["p90_ms"] == 18.0 and summary["p90_interval_ms"] is None and summary["changes"] == []
    empty = latency_json(latency_figures(pa.array([], pa.float64()), pa.array([], pa.string()),
                                         days=pa.array([], pa.date32())))
    assert (empty["calls"], empty["p50_ms"], empty["slow_rate"], empty["slow_interval"]) == (0, None, None, None)


# ---------------------------------------------------------------- the budget's parsing


def test_the_latency_budget_defaults_to_10_seconds_and_takes_per_server_overrides() -> None:
    assert parse_latency_budgets([]) == (DEFAULT_LATENCY_BUDGET_SECONDS, ())
    default, per_server = parse_latency_budgets(["5", "jira_cloud=2.5", "github=30", "github=12", "7.5"])
    assert (default, per_server) == (7.5, (("github", 12.0), ("jira_cloud", 2.5)))
    assert (
        budget_of("github", default=default, per_server=per_server) == 12.0
        and budget_of("weather", default=default, per_server=per_server) == 7.5
    )
    # The server is what stands before the last "=": identifiers have no "=", so this is one server.
    assert parse_latency_budgets(["a=b=3"]) == (DEFAULT_LATENCY_BUDGET_SECONDS, (("a=b", 3.0),))


@pytest.mark.parametrize("value", ["0", "-1", "ten", "", "=5", "github=", "github=0", "nan", "inf", "github=-2"])
def test_a_latency_budget_that_is_not_seconds_above_0_is_refused_naming_the_value(value: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_latency_budgets(["5", value])
    assert str(raised.value) == f"{value!r} is not a number of seconds above 0 (SECONDS or SERVER=SECONDS, e.g. 10)"
