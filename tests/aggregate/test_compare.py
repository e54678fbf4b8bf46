"""The comparison of two failure rates: Fisher's exact p-value and the decision on constructed cases."""

from __future__ import annotations

import dataclasses
import random
from fractions import Fraction
from math import comb

import pytest

from nrllm_report.aggregate.compare import Decision, compare, fisher_exact_p
from nrllm_report.aggregate.verdicts import wilson_interval

# The four counts of a parametrised case, named as compare and fisher_exact_p take them.
COMPARE_NAMES = ("baseline_ok", "baseline_failed", "current_ok", "current_failed")
FISHER_NAMES = ("failed_a", "trials_a", "failed_b", "trials_b")


def exact_fisher_p(failed_a: int, trials_a: int, failed_b: int, trials_b: int) -> Fraction:
    """Fisher's two-sided p-value in exact fractions, summed over the whole table: the reference."""
    failed, total = failed_a + failed_b, trials_a + trials_b

    def probability(on_b: int) -> Fraction:
        return Fraction(comb(trials_b, on_b) * comb(trials_a, failed - on_b), comb(total, failed))

    observed = probability(failed_b) * (1 + Fraction(1, 10**7))
    support = range(max(0, failed - trials_a), min(failed, trials_b) + 1)
    return sum((probability(on_b) for on_b in support if probability(on_b) <= observed), Fraction(0))


def test_fisher_matches_the_tea_tasting_example() -> None:
    assert fisher_exact_p(failed_a=1, trials_a=4, failed_b=3, trials_b=4) == pytest.approx(34 / 70, rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_fisher_matches_exact_fractions_on_small_tables(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        trials_a, trials_b = rng.randint(0, 40), rng.randint(0, 40)
        failed_a, failed_b = rng.randint(0, trials_a), rng.randint(0, trials_b)
        expected = float(exact_fisher_p(failed_a, trials_a, failed_b, trials_b))
        p_value = fisher_exact_p(failed_a=failed_a, trials_a=trials_a, failed_b=failed_b, trials_b=trials_b)
        assert p_value == pytest.approx(expected, rel=1e-9)


def test_fisher_is_symmetric_in_the_sides() -> None:
    forward = fisher_exact_p(failed_a=10, trials_a=200, failed_b=30, trials_b=200)
    assert forward == pytest.approx(fisher_exact_p(failed_a=30, trials_a=200, failed_b=10, trials_b=200), rel=1e-12)


def test_fisher_gives_a_tiny_p_value_for_large_samples_without_underflowing_to_zero() -> None:
    p_value = fisher_exact_p(failed_a=50_000, trials_a=1_000_000, failed_b=60_000, trials_b=1_000_000)
    assert 0.0 < p_value < 1e-100


@pytest.mark.parametrize(
    "counts",
    [(0, 0, 3, 10), (3, 10, 0, 0), (0, 10, 0, 10), (10, 10, 10, 10), (5, 10, 5, 10)],
    ids=["no-baseline", "no-current", "no-failures", "only-failures", "same-counts"],
)
def test_fisher_is_one_when_the_sides_cannot_differ(counts: tuple[int, int, int, int]) -> None:
    assert fisher_exact_p(**dict(zip(FISHER_NAMES, counts))) == pytest.approx(1.0)


def test_a_tripled_rate_at_200_calls_is_worse() -> None:
    comparison = compare(baseline_ok=190, baseline_failed=10, current_ok=170, current_failed=30)
    assert comparison.decision is Decision.WORSE
    assert comparison.baseline.rate == pytest.approx(0.05)
    assert comparison.current.rate == pytest.approx(0.15)
    assert comparison.difference == pytest.approx(0.10)
    assert comparison.p_value < 0.01
    assert comparison.baseline.interval == wilson_interval(10, 200)
    assert comparison.current.interval == wilson_interval(30, 200)
    assert (comparison.baseline.trials, comparison.current.trials) == (200, 200)


def test_a_third_of_the_rate_is_better() -> None:
    assert compare(baseline_ok=170, baseline_failed=30, current_ok=190, current_failed=10).decision is Decision.BETTER


@pytest.mark.parametrize(
    "counts",
    [(190, 10, 188, 12), (9, 1, 7, 3), (0, 0, 10, 0), (10, 0, 0, 0), (100, 0, 100, 0)],
    ids=["small-difference", "few-calls", "no-baseline-calls", "no-current-calls", "no-failures"],
)
def test_no_clear_difference_is_unchanged(counts: tuple[int, int, int, int]) -> None:
    assert compare(**dict(zip(COMPARE_NAMES, counts))).decision is Decision.UNCHANGED


def test_a_side_without_calls_has_no_rate_interval_or_difference() -> None:
    comparison = compare(baseline_ok=0, baseline_failed=0, current_ok=90, current_failed=10)
    assert comparison.baseline.rate is None and comparison.baseline.interval is None
    assert comparison.difference is None
    assert comparison.p_value == 1.0


def test_the_decision_follows_the_level() -> None:
    comparison = compare(baseline_ok=180, baseline_failed=20, current_ok=165, current_failed=35)
    assert 0.01 < comparison.p_value < 0.05
    assert comparison.decision is Decision.WORSE
    assert compare(baseline_ok=180, baseline_failed=20, current_ok=165, current_failed=35,
                   level=0.01).decision is Decision.UNCHANGED


def test_a_p_value_just_at_the_level_is_not_significant() -> None:
    p_value = compare(baseline_ok=180, baseline_failed=20, current_ok=165, current_failed=35).p_value
    assert compare(baseline_ok=180, baseline_failed=20, current_ok=165, current_failed=35,
                   level=p_value).decision is Decision.UNCHANGED
    assert compare(baseline_ok=180, baseline_failed=20, current_ok=165, current_failed=35,
                   level=p_value * (1 + 1e-9)).decision is Decision.WORSE


@pytest.mark.parametrize(
    "counts, level",
    [((-1, 0, 1, 1), 0.05), ((1, 1, 1, 1), 0.0), ((1, 1, 1, 1), 1.0)],
    ids=["negative-count", "level-zero", "level-one"],
)
def test_impossible_input_is_refused(counts: tuple[int, int, int, int], level: float) -> None:
    with pytest.raises(ValueError):
        compare(**dict(zip(COMPARE_NAMES, counts)), level=level)


def test_fisher_refuses_more_failures_than_trials() -> None:
    with pytest.raises(ValueError):
        fisher_exact_p(failed_a=5, trials_a=4, failed_b=0, trials_b=4)


def test_a_comparison_is_frozen_and_its_decision_is_the_string_that_travels() -> None:
    comparison = compare(baseline_ok=190, baseline_failed=10, current_ok=170, current_failed=30)
    with pytest.raises(dataclasses.FrozenInstanceError):
        comparison.p_value = 1.0  # type: ignore[misc]
    assert comparison.decision == "worse"
