"""The comparison of two failure rates: Fisher's exact p-value and the decision on constructed cases."""

from __future__ import annotations

import dataclasses
import random
from fractions import Fraction
from math import comb

import pytest

from nrllm_report.aggregate.compare import Decision, compare, fisher_exact_p
from nrllm_report.aggregate.verdicts import wilson_interval


def exact_fisher_p(failed_a: int, trials_a: int, failed_b: int, trials_b: int) -> Fraction:
    """Fisher's two-sided p-value in exact fractions, summed over the whole table: the reference."""
    failed, total = failed_a + failed_b, trials_a + trials_b

    def probability(on_b: int) -> Fraction:
        return Fraction(comb(trials_b, on_b) * comb(trials_a, failed - on_b), comb(total, failed))

    observed = probability(failed_b) * (1 + Fraction(1, 10**7))
    support = range(max(0, failed - trials_a), min(failed, trials_b) + 1)
    return sum((probability(on_b) for on_b in support if probability(on_b) <= observed), Fraction(0))


def test_fisher_matches_the_tea_tasting_example() -> None:
    assert fisher_exact_p(1, 4, 3, 4) == pytest.approx(34 / 70, rel=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_fisher_matches_exact_fractions_on_small_tables(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        trials_a, trials_b = rng.randint(0, 40), rng.randint(0, 40)
        failed_a, failed_b = rng.randint(0, trials_a), rng.randint(0, trials_b)
        expected = float(exact_fisher_p(failed_a, trials_a, failed_b, trials_b))
        assert fisher_exact_p(failed_a, trials_a, failed_b, trials_b) == pytest.approx(expected, rel=1e-9)


def test_fisher_is_symmetric_in_the_sides() -> None:
    assert fisher_exact_p(10, 200, 30, 200) == pytest.approx(fisher_exact_p(30, 200, 10, 200), rel=1e-12)


def test_fisher_gives_a_tiny_p_value_for_large_samples_without_underflowing_to_zero() -> None:
    p_value = fisher_exact_p(50_000, 1_000_000, 60_000, 1_000_000)
    assert 0.0 < p_value < 1e-100


@pytest.mark.parametrize(
    "counts",
    [(0, 0, 3, 10), (3, 10, 0, 0), (0, 10, 0, 10), (10, 10, 10, 10), (5, 10, 5, 10)],
    ids=["no-baseline", "no-current", "no-failures", "only-failures", "same-counts"],
)
def test_fisher_is_one_when_the_sides_cannot_differ(counts: tuple[int, int, int, int]) -> None:
    assert fisher_exact_p(*counts) == pytest.approx(1.0)


def test_a_tripled_rate_at_200_calls_is_worse() -> None:
    comparison = compare(190, 10, 170, 30)
    assert comparison.decision is Decision.WORSE
    assert comparison.baseline.rate == pytest.approx(0.05)
    assert comparison.current.rate == pytest.approx(0.15)
    assert comparison.difference == pytest.approx(0.10)
    assert comparison.p_value < 0.01
    assert comparison.baseline.interval == wilson_interval(10, 200)
    assert comparison.current.interval == wilson_interval(30, 200)
    assert (comparison.baseline.trials, comparison.current.trials) == (200, 200)


def test_a_third_of_the_rate_is_better() -> None:
    assert compare(170, 30, 190, 10).decision is Decision.BETTER


@pytest.mark.parametrize(
    "counts",
    [(190, 10, 188, 12), (9, 1, 7, 3), (0, 0, 10, 0), (10, 0, 0, 0), (100, 0, 100, 0)],
    ids=["small-difference", "few-calls", "no-baseline-calls", "no-current-calls", "no-failures"],
)
def test_no_clear_difference_is_unchanged(counts: tuple[int, int, int, int]) -> None:
    assert compare(*counts).decision is Decision.UNCHANGED


def test_a_side_without_calls_has_no_rate_interval_or_difference() -> None:
    comparison = compare(0, 0, 90, 10)
    assert comparison.baseline.rate is None and comparison.baseline.interval is None
    assert comparison.difference is None
    assert comparison.p_value == 1.0


def test_the_decision_follows_the_level() -> None:
    comparison = compare(180, 20, 165, 35)
    assert 0.01 < comparison.p_value < 0.05
    assert comparison.decision is Decision.WORSE
    assert compare(180, 20, 165, 35, level=0.01).decision is Decision.UNCHANGED


def test_a_p_value_just_at_the_level_is_not_significant() -> None:
    p_value = compare(180, 20, 165, 35).p_value
    assert compare(180, 20, 165, 35, level=p_value).decision is Decision.UNCHANGED
    assert compare(180, 20, 165, 35, level=p_value * (1 + 1e-9)).decision is Decision.WORSE


@pytest.mark.parametrize(
    "counts, level",
    [((-1, 0, 1, 1), 0.05), ((1, 1, 1, 1), 0.0), ((1, 1, 1, 1), 1.0)],
    ids=["negative-count", "level-zero", "level-one"],
)
def test_impossible_input_is_refused(counts: tuple[int, int, int, int], level: float) -> None:
    with pytest.raises(ValueError):
        compare(*counts, level=level)


def test_fisher_refuses_more_failures_than_trials() -> None:
    with pytest.raises(ValueError):
        fisher_exact_p(5, 4, 0, 4)


def test_a_comparison_is_frozen_and_its_decision_is_the_string_that_travels() -> None:
    comparison = compare(190, 10, 170, 30)
    with pytest.raises(dataclasses.FrozenInstanceError):
        comparison.p_value = 1.0  # type: ignore[misc]
    assert comparison.decision == "worse"
