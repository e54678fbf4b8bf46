"""Change points in a daily rate: on which days it changed, within which days, and how sure.

The method, in plain words (docs/statistics.md says more):

- Each day brings ``events`` out of ``trials``: failed out of ok + failed, or
  cancelled out of all calls with an outcome. Between two changes the rate is
  taken as constant.
- Whether a stretch of days holds a change is a contest of two explanations:
  one rate for the whole stretch, or one rate before some day and another from
  that day on. Each rate has a Beta(0.5, 2) prior: any rate is possible, low
  ones likelier (its median is 12 %, as failure and cancel rates mostly are).
  So each explanation's likelihood has a closed form (the Beta-Binomial
  marginal likelihood); the day of the change has a uniform prior over the
  days the stretch allows.
- Real days scatter more than coin flips (an outage fails many calls at once).
  The evidence is therefore divided by how many times more neighbouring days
  differ than binomial counts of one rate would (at least 1), as quasi-binomial
  regression does. Comparing neighbours, a step between levels barely counts
  as scatter, so a second change in the stretch does not hide the first.
- Both explanations start at even odds. A change is reported when its
  posterior probability reaches 80 %: the data favour it at least 4 to 1.
  The bar is set by bench/changepoints.py: the lowest that keeps false alarms
  on steady series far below the 5 % allowed (under 1 %) while detecting every
  step within reach of any method (a higher bar missed a tripling seen over
  7 days of 20 calls a side); the price is more alarms on scattered series.
- The search is recursive (binary segmentation): a stretch that holds a change
  is cut at its most likely day and both halves are searched again. Each change
  is then tested again between its neighbours, until none moves; this fixes its
  day, range and probability, and drops one that no longer reaches the bar.
- ``day`` is the most likely first day of the new level; ``earliest`` and
  ``latest`` bound the fewest candidate days holding 95 % of the posterior
  probability of the day. A change seen after days without trials may have
  begun on any of them: ``earliest`` then reaches back to the day after the
  last day with trials.
- Each side of a change spans at least ``min_segment_days`` days with trials
  (3 by default). A bad day amid steady ones adds to the scatter and is no
  change; a burst within the first or last three days can show as one until
  more days come.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Generic, TypeVar

from .verdicts import Proportion

Day = TypeVar("Day", date, int)

PRIOR_EVENTS = 0.5
PRIOR_NON_EVENTS = 2.0
PRIOR_CHANGE = 0.5
THRESHOLD = 0.80
CREDIBLE_MASS = 0.95
MIN_SEGMENT_DAYS = 3
MAX_SETTLING_PASSES = 20

_LOG_BETA_PRIOR = (
    math.lgamma(PRIOR_EVENTS) + math.lgamma(PRIOR_NON_EVENTS) - math.lgamma(PRIOR_EVENTS + PRIOR_NON_EVENTS)
)


_LOG_PRIOR_ODDS = math.log(PRIOR_CHANGE / (1 - PRIOR_CHANGE))


class Direction(str, enum.Enum):
    """Whether the rate went up (worse) or down (better) at a change."""

    WORSE = "worse"
    BETTER = "better"


@dataclass(frozen=True, slots=True)
class Change(Generic[Day]):
    """One change of the rate: when, within which days, from what to what, and how sure."""

    day: Day
    earliest: Day
    latest: Day
    direction: Direction
    before: Proportion  # the events of the days between the previous change (or the start) and this one
    after: Proportion  # the events from this change to the next one (or the end)
    probability: float
    # Set by a caller that knows how the counts were recorded (aggregate/health.py): the range
    # holds the day the rows began to state outcomes, so the change may be in the recording.
    recording_changed: bool = False


@dataclass(frozen=True, slots=True)
class _Split:
    """The evidence of one stretch [start, stop) of days with trials: how likely a change, and where."""

    probability: float
    most_likely: int
    first_in_range: int
    last_in_range: int


class _Series(Generic[Day]):
    """Days with trials, with cumulative sums so any stretch's likelihood costs O(1)."""

    def __init__(self, days: Sequence[tuple[Day, int, int]]) -> None:
        self.days: list[Day] = [day for day, _, _ in days]
        self.events = [events for _, events, _ in days]
        self.trials = [trials for _, _, trials in days]
        self.cumulative_events = [0]
        self.cumulative_trials = [0]
        for events, trials in zip(self.events, self.trials):
            self.cumulative_events.append(self.cumulative_events[-1] + events)
            self.cumulative_trials.append(self.cumulative_trials[-1] + trials)

    def __len__(self) -> int:
        return len(self.days)

    def counts(self, start: int, stop: int) -> tuple[int, int]:
        """Events and trials of the days [start, stop)."""
        events = self.cumulative_events[stop] - self.cumulative_events[start]
        return events, self.cumulative_trials[stop] - self.cumulative_trials[start]

    def log_marginal(self, start: int, stop: int) -> float:
        """The log Beta-Binomial marginal likelihood of the days [start, stop) under one rate."""
        events, trials = self.counts(start, stop)
        return (
            math.lgamma(PRIOR_EVENTS + events)
            + math.lgamma(PRIOR_NON_EVENTS + trials - events)
            - math.lgamma(PRIOR_EVENTS + PRIOR_NON_EVENTS + trials)
            - _LOG_BETA_PRIOR
        )

    def dispersion(self, start: int, stop: int) -> float:
        """How many times more neighbouring days differ than binomial counts of one rate would; at least 1."""
        observed = expected = 0.0
        for day in range(start, stop - 1):
            events, trials = self.counts(day, day + 2)
            rate = events / trials
            for one in (day, day + 1):
                observed += (self.events[one] - self.trials[one] * rate) ** 2
                expected += self.trials[one] * rate * (1 - rate) * (1 - self.trials[one] / trials)
        if expected == 0:
            return 1.0
        # One standard error of the ratio is forgiven: binomial chance alone reaches it.
        return max(1.0, observed / expected - math.sqrt(2 / max(1, stop - start - 2)))


class _Search(Generic[Day]):
    """The change-point search over one series, with its settings."""

    def __init__(self, series: _Series[Day], *, min_days: int, threshold: float) -> None:
        self.series: _Series[Day] = series
        self.min_days = min_days
        self.threshold = threshold

    def segment(self, start: int, stop: int) -> list[int]:
        """The cuts found in [start, stop) by recursive binary segmentation."""
        split = self.split(start, stop)
        if split is None or split.probability < self.threshold:
            return []
        cut: int = split.most_likely
        return [*self.segment(start, cut), cut, *self.segment(cut, stop)]

    def settle(self, cuts: list[int]) -> list[_Split]:
        """Each cut tested again between its neighbours until none moves; the weakest dropped while below."""
        for _ in range(MAX_SETTLING_PASSES):
            tested = self.split_between_neighbours(cuts)
            placed = [split.most_likely for split in tested]
            if placed != cuts:
                cuts = placed
                continue
            weakest = min(tested, key=lambda split: split.probability, default=None)
            if weakest is None or weakest.probability >= self.threshold:
                return tested
            cuts = [cut for cut in cuts if cut != weakest.most_likely]
        return self.split_between_neighbours(cuts)

    def split_between_neighbours(self, cuts: list[int]) -> list[_Split]:
        """Each cut's stretch from the previous (already re-placed) cut to the next one, weighed in turn."""
        bounds = [0, *cuts, len(self.series)]
        tested = []
        for position in range(1, len(bounds) - 1):
            split = self.split(bounds[position - 1], bounds[position + 1])
            assert split is not None, "neighbouring cuts are at least min_days apart"
            bounds[position] = split.most_likely
            tested.append(split)
        return tested

    def split(self, start: int, stop: int) -> _Split | None:
        """How likely [start, stop) holds one change, and where; None when it is too short to split."""
        first_cut = start + self.min_days
        cuts = range(first_cut, stop - self.min_days + 1)
        if not cuts:
            return None
        whole = self.series.log_marginal(start, stop)
        log_factors = [
            self.series.log_marginal(start, cut) + self.series.log_marginal(cut, stop) - whole for cut in cuts
        ]
        best = max(range(len(log_factors)), key=log_factors.__getitem__)
        dispersion = self.series.dispersion(start, stop)
        weights = [math.exp((log_factor - log_factors[best]) / dispersion) for log_factor in log_factors]
        total = sum(weights)
        log_mean_factor = log_factors[best] / dispersion + math.log(total / len(weights))
        probability = _logistic(log_mean_factor + _LOG_PRIOR_ODDS)
        first, last = _credible_range([weight / total for weight in weights])
        return _Split(probability, first_cut + best, first_cut + first, first_cut + last)


def find_changes(
    daily: Iterable[tuple[Day, int, int]],
    *,
    min_segment_days: int = MIN_SEGMENT_DAYS,
    threshold: float = THRESHOLD,
) -> list[Change[Day]]:
    """The changes of the rate events / trials in daily counts ``(day, events, trials)``, oldest first."""
    if min_segment_days < 1:
        raise ValueError(f"min_segment_days must be at least 1, got {min_segment_days!r}")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"the threshold must lie strictly between 0 and 1, got {threshold!r}")
    series = _Series(_days_with_trials(daily))
    search = _Search(series, min_days=min_segment_days, threshold=threshold)
    settled: list[_Split] = search.settle(search.segment(0, len(series)))
    bounds = [0, *(split.most_likely for split in settled), len(series)]
    return [_change(series, start=bounds[index], stop=bounds[index + 2], split=split)
            for index, split in enumerate(settled)]


def _days_with_trials(daily: Iterable[tuple[Day, int, int]]) -> list[tuple[Day, int, int]]:
    """The days in order, counts of a repeated day added, days without trials left out."""
    merged: dict[Day, list[int]] = {}
    for day, events, trials in daily:
        if events < 0 or trials < 0 or events > trials:
            raise ValueError(f"need 0 <= events <= trials, got {events!r} of {trials!r} on {day!r}")
        totals = merged.setdefault(day, [0, 0])
        totals[0] += events
        totals[1] += trials
    return [(day, events, trials) for day, (events, trials) in sorted(merged.items()) if trials > 0]


def _logistic(log_odds: float) -> float:
    """The probability of the given log odds, without overflow at either end."""
    if log_odds >= 0:
        return 1 / (1 + math.exp(-log_odds))
    odds = math.exp(log_odds)
    return odds / (1 + odds)


def _credible_range(posterior: list[float]) -> tuple[int, int]:
    """The first and last index of the fewest entries holding CREDIBLE_MASS of the posterior."""
    held, chosen = 0.0, []
    for index in sorted(range(len(posterior)), key=lambda index: -posterior[index]):
        chosen.append(index)
        held += posterior[index]
        if held >= CREDIBLE_MASS:
            break
    return min(chosen), max(chosen)


def _change(series: _Series[Day], *, start: int, stop: int, split: _Split) -> Change[Day]:
    """The change ``split`` found between its neighbouring cuts ``start`` and ``stop``, in days."""
    cut = split.most_likely
    before, after = Proportion(*series.counts(start, cut)), Proportion(*series.counts(cut, stop))
    worse = after.events * before.trials > before.events * after.trials  # both sides have trials
    return Change(
        day=series.days[cut],
        earliest=_day_after(series.days[split.first_in_range - 1]),
        latest=series.days[split.last_in_range],
        direction=Direction.WORSE if worse else Direction.BETTER,
        before=before,
        after=after,
        probability=split.probability,
    )


def _day_after(day: Day) -> Day:
    """The calendar day after ``day`` (a date, or a day number)."""
    if isinstance(day, date):
        return day + timedelta(days=1)
    return day + 1
