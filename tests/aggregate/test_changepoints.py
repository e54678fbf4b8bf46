"""The change-point search on constructed daily series: steps, no step, gaps, and the edge cases."""

from __future__ import annotations

import dataclasses
import random
from datetime import date, timedelta

import pytest

from nrllm_report.aggregate.changepoints import THRESHOLD, Change, Direction, _credible_range, find_changes
from nrllm_report.aggregate.verdicts import wilson_interval

START = date(2026, 9, 1)


def dated(counts: list[tuple[int, int]], start: date = START) -> list[tuple[date, int, int]]:
    """(events, trials) per consecutive day from ``start`` as (date, events, trials)."""
    return [
        (start + timedelta(days=offset), events, trials) for offset, (events, trials) in enumerate(counts)
    ]


def day(offset: int) -> date:
    return START + timedelta(days=offset)


def steady(days: int, events: int, trials: int) -> list[tuple[int, int]]:
    return [(events, trials)] * days


def noisy(days: int, rate: float, trials: int, seed: int) -> list[tuple[int, int]]:
    """Binomial counts from a fixed seed: a realistic wobble that is the same on every run."""
    rng = random.Random(seed)
    return [(sum(rng.random() < rate for _ in range(trials)), trials) for _ in range(days)]


def wobbly(days: int, rate: float, trials: int, seed: int) -> list[tuple[int, int]]:
    """Counts whose daily rate itself wobbles (sd half the rate): more scatter than binomial."""
    rng = random.Random(seed)
    counts = []
    for _ in range(days):
        day_rate = min(0.99, max(0.0, rng.gauss(rate, rate * 0.5)))
        counts.append((sum(rng.random() < day_rate for _ in range(trials)), trials))
    return counts


def levels(seed: int) -> list[tuple[int, int]]:
    """Three to six levels of 3 to 15 days, 10, 30 or 100 calls a day: busy series with close changes."""
    rng = random.Random(seed)
    count = rng.randint(3, 6)
    rates = [rng.uniform(0.02, 0.3) for _ in range(count)]
    lengths = [rng.randint(3, 15) for _ in range(count)]
    counts: list[tuple[int, int]] = []
    for length, rate in zip(lengths, rates):
        trials = rng.choice([10, 30, 100])
        counts += [(sum(rng.random() < rate for _ in range(trials)), trials) for _ in range(length)]
    return counts


def test_a_clear_step_is_found_on_its_day_with_a_tight_range() -> None:
    changes = find_changes(dated(noisy(30, 0.02, 100, seed=1) + noisy(30, 0.20, 100, seed=2)))
    assert len(changes) == 1
    change = changes[0]
    assert change.day == day(30)
    assert change.earliest <= day(30) <= change.latest
    assert (change.latest - change.earliest).days <= 2
    assert change.direction is Direction.WORSE
    assert change.probability > 0.99


def test_a_change_reports_its_sides_counts_rates_and_intervals() -> None:
    change = find_changes(dated(steady(20, 2, 100) + steady(20, 20, 100)))[0]
    assert (change.before.events, change.before.trials) == (40, 2000)
    assert (change.after.events, change.after.trials) == (400, 2000)
    assert change.before.rate == pytest.approx(0.02)
    assert change.after.rate == pytest.approx(0.20)
    assert change.before.interval == wilson_interval(40, 2000)
    assert change.after.interval == wilson_interval(400, 2000)


def test_a_drop_is_better() -> None:
    changes = find_changes(dated(noisy(25, 0.25, 60, seed=3) + noisy(25, 0.03, 60, seed=4)))
    assert [(change.day, change.direction) for change in changes] == [(day(25), Direction.BETTER)]


@pytest.mark.parametrize(
    "counts",
    [
        steady(60, 5, 100),
        noisy(90, 0.05, 100, seed=5),
        noisy(90, 0.30, 200, seed=6),
        noisy(30, 0.10, 5, seed=7),
    ],
    ids=["constant", "noisy-5-percent", "noisy-30-percent", "few-calls"],
)
def test_a_stationary_series_has_no_change(counts: list[tuple[int, int]]) -> None:
    assert find_changes(dated(counts)) == []


def test_days_scattering_more_than_binomial_are_no_change() -> None:
    # Without scaling the evidence down by the scatter, this series shows four changes.
    assert find_changes(dated(wobbly(60, 0.10, 200, seed=0))) == []


def test_a_step_in_cancels_only_is_found_by_the_same_function() -> None:
    failed = [events for events, _ in noisy(60, 0.05, 100, seed=8)]
    cancelled = [events for events, _ in noisy(30, 0.02, 100, seed=9) + noisy(30, 0.25, 100, seed=10)]
    ok = [100 - count for count in failed]
    failure_days = [(day(offset), failed[offset], ok[offset] + failed[offset]) for offset in range(60)]
    cancel_days = [
        (day(offset), cancelled[offset], ok[offset] + failed[offset] + cancelled[offset])
        for offset in range(60)
    ]
    assert find_changes(failure_days) == []
    changes = find_changes(cancel_days)
    assert [(change.day, change.direction) for change in changes] == [(day(30), Direction.WORSE)]


def test_two_steps_are_both_found_and_share_the_middle_segment() -> None:
    counts = noisy(25, 0.05, 80, seed=11) + noisy(25, 0.25, 80, seed=12) + noisy(25, 0.05, 80, seed=13)
    changes = find_changes(dated(counts))
    assert [(change.day, change.direction) for change in changes] == [
        (day(25), Direction.WORSE),
        (day(50), Direction.BETTER),
    ]
    assert changes[0].after == changes[1].before
    assert changes[0].after.trials == 25 * 80


def test_a_dip_between_two_equal_levels_is_two_changes() -> None:
    # One cut alone explains a dip poorly; the second change must not count as scatter against the first.
    counts = noisy(20, 0.20, 50, seed=115) + noisy(20, 0.05, 50, seed=215) + noisy(20, 0.20, 50, seed=315)
    changes = find_changes(dated(counts))
    assert [(change.day, change.direction) for change in changes] == [
        (day(20), Direction.BETTER),
        (day(40), Direction.WORSE),
    ]


def test_days_without_trials_missing_or_zero_give_the_same_changes() -> None:
    counts = steady(20, 2, 50) + steady(20, 15, 50)
    complete = dated(counts)
    with_zero_days = [
        (when, 0, 0) if offset % 7 == 3 else (when, events, trials)
        for offset, (when, events, trials) in enumerate(complete)
    ]
    without_them = [row for row in with_zero_days if row[2] > 0]
    assert find_changes(with_zero_days) == find_changes(without_them)
    assert [change.day for change in find_changes(without_them)] == [day(20)]


def test_a_change_after_a_quiet_weekend_may_have_begun_on_it() -> None:
    # 2026-09-05 and -06 are a Saturday and Sunday without calls; the new level shows on Monday.
    counts = steady(25, 2, 50) + steady(25, 15, 50)
    rows = [row for row in dated(counts, start=date(2026, 8, 12)) if row[0].weekday() < 5]
    change = find_changes(rows)[0]
    assert change.day == date(2026, 9, 7)
    assert change.earliest == date(2026, 9, 5)
    assert change.latest == date(2026, 9, 7)


def test_days_come_back_in_the_type_they_came_in() -> None:
    rows = [
        (offset, events, trials)
        for offset, (events, trials) in enumerate(steady(20, 1, 50) + steady(20, 20, 50))
    ]
    change = find_changes(rows)[0]
    assert (change.earliest, change.day, change.latest) == (20, 20, 20)


def test_unsorted_input_and_repeated_days_are_ordered_and_added() -> None:
    rows = dated(steady(20, 2, 100) + steady(20, 20, 100))
    halves = [(when, events // 2, trials // 2) for when, events, trials in rows]
    shuffled = list(reversed(halves + halves))
    assert find_changes(shuffled) == find_changes(rows)


@pytest.mark.parametrize(
    "counts",
    [steady(60, 0, 100), steady(60, 0, 0), steady(60, 100, 100), [], steady(1, 5, 10), steady(5, 5, 10)],
    ids=["no-events", "no-trials", "every-trial-an-event", "empty", "one-day", "too-short-to-split"],
)
def test_degenerate_series_have_no_change(counts: list[tuple[int, int]]) -> None:
    assert find_changes(dated(counts)) == []


def test_a_short_series_with_a_step_is_split_only_with_enough_days_each_side() -> None:
    counts = steady(3, 0, 100) + steady(3, 80, 100)
    assert [change.day for change in find_changes(dated(counts))] == [day(3)]
    assert find_changes(dated(counts), min_segment_days=4) == []


@pytest.mark.parametrize("position", [3, 10, 20, 30, 37])
def test_one_outage_day_amid_steady_days_is_no_new_level(position: int) -> None:
    counts = noisy(41, 0.05, 100, seed=14)
    counts[position] = (80, 100)
    assert find_changes(dated(counts)) == []


def test_one_bad_last_day_is_a_new_level_only_when_one_day_may_be_one() -> None:
    counts = noisy(40, 0.05, 100, seed=14) + [(95, 100)]
    assert [change.day for change in find_changes(dated(counts), min_segment_days=1)] == [day(40)]


def test_the_threshold_decides_how_sure_a_change_must_be() -> None:
    counts = noisy(20, 0.05, 40, seed=16) + noisy(20, 0.10, 40, seed=116)
    lenient = find_changes(dated(counts), threshold=0.6)
    assert len(lenient) == 1
    sureness = lenient[0].probability
    assert find_changes(dated(counts), threshold=sureness - 0.01) == lenient
    assert find_changes(dated(counts), threshold=sureness + 0.01) == []
    assert (find_changes(dated(counts)) == lenient) is (sureness >= THRESHOLD)


def test_an_ambiguous_day_widens_the_range_to_both_candidates() -> None:
    # 8 of 100 is about as likely at 2 % as at 20 %: the day may belong to either side.
    counts = steady(20, 2, 100) + [(8, 100)] + steady(20, 20, 100)
    change = find_changes(dated(counts))[0]
    assert change.day in (day(20), day(21))
    assert (change.earliest, change.latest) == (day(20), day(21))


@pytest.mark.parametrize(
    "posterior, expected",
    [
        ([0.1, 0.5, 0.3, 0.1], (0, 3)),
        ([0.02, 0.9, 0.06, 0.02], (1, 2)),
        ([0.96, 0.04], (0, 0)),
        ([1.0], (0, 0)),
    ],
    ids=["needs-all", "mode-and-neighbour", "mode-alone", "single"],
)
def test_the_range_spans_the_fewest_days_holding_95_percent(
    posterior: list[float], expected: tuple[int, int]
) -> None:
    assert _credible_range(posterior) == expected


@pytest.mark.parametrize("seed", range(400, 700))
def test_every_reported_change_is_sure_enough_and_consistent_with_its_neighbours(seed: int) -> None:
    rows = [(offset, events, trials) for offset, (events, trials) in enumerate(levels(seed))]
    changes = find_changes(rows)
    for change in changes:
        assert change.probability >= THRESHOLD
        assert change.earliest <= change.day <= change.latest
        assert (change.direction is Direction.WORSE) == (change.after.rate > change.before.rate)
    for earlier, later in zip(changes, changes[1:]):
        assert later.day - earlier.day >= 3
        assert earlier.after == later.before
    if changes:
        segment_trials = [changes[0].before.trials, *(change.after.trials for change in changes)]
        assert sum(segment_trials) == sum(trials for _, _, trials in rows)


@pytest.mark.parametrize(
    "rows, keywords",
    [
        ([(START, 6, 5)], {}),
        ([(START, -1, 5)], {}),
        ([(START, 1, 5)], {"min_segment_days": 0}),
        ([(START, 1, 5)], {"threshold": 1.0}),
    ],
    ids=["more-events-than-trials", "negative-events", "no-segment-length", "threshold-of-one"],
)
def test_impossible_input_is_refused(rows: list[tuple[date, int, int]], keywords: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        find_changes(rows, **keywords)  # type: ignore[arg-type]


def test_a_change_is_frozen_and_its_direction_is_the_string_that_travels() -> None:
    change: Change[date] = find_changes(dated(steady(20, 2, 100) + steady(20, 20, 100)))[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.day = START  # type: ignore[misc]
    assert change.direction == "worse"
