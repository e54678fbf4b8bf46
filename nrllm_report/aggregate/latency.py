"""How long tool calls take: percentiles with distribution-free intervals, the slow share, its
verdict and its changes. Pure: Arrow arrays in, figures out (docs/statistics.md says more).

- Which calls: ok and failed calls with a duration above 0 ms ("timed" calls). Cancelled calls are
  left out (an operator cut them off: their duration is not the call's), and so are calls that took
  0 ms (mostly refusals nr-llm made itself: a denied approval, a tool no longer permitted) and tool
  steps stating no outcome; each is counted in ``LeftOut``.
- The sample percentile is the nearest-rank one: the q-th percentile of n durations is the
  ``ceil(q * n)``-th smallest (Hyndman and Fan's definition 1, the inverse of the empirical
  distribution function): always a duration that was measured.
- Its 95 % interval is distribution-free, from order statistics: with B ~ Binomial(n, q) the number
  of calls at or below the true percentile, the interval runs from the ``low``-th to the
  ``high``-th smallest duration, ``low`` the largest rank with P(B < low) <= 2.5 % and ``high``
  the smallest with P(B >= high) <= 2.5 %. It holds the true percentile with probability
  P(low <= B < high) >= 95 % whatever the distribution of durations (ties only raise it). Where no
  such rank exists (fewer than 36 calls for the p90, 368 for the p99, 6 for the median) there is no
  interval at 95 %, and the figures say None rather than invent one.
- A call over its latency budget is slow; the slow share slow / timed calls is a ``Proportion``
  (Wilson interval), judged against the slow budget as the failure rate is against the failure
  budget (``verdicts.standing``), and searched for changes day by day with the change-point search
  of the failure rate. The current period is the days since the latest change of the slow share.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from fractions import Fraction
from functools import lru_cache
from itertools import accumulate
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..core.model import LatencyDirection, LatencyVerdict, Outcome
from ..core.options import (
    DEFAULT_CALL_TIMEOUT_SECONDS,
    DEFAULT_LATENCY_BUDGET_SECONDS,
    DEFAULT_MIN_CALLS,
    DEFAULT_SLOW_BUDGET,
)
from .changepoints import Change, Direction, find_changes
from .verdicts import Proportion, Standing, interval_json, standing

CONFIDENCE = 0.95
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)
NEAR_TIMEOUT_MARGIN = 0.05  # a call within 5 % of the call timeout is near it
# The binomial's mass beyond this many standard deviations (plus a margin for small n) is below 1e-30.
_WINDOW_SDS = 12
_WINDOW_MARGIN = 20

_DIRECTION = {Direction.WORSE: LatencyDirection.SLOWER, Direction.BETTER: LatencyDirection.FASTER}
_VERDICT = {
    Standing.TOO_FEW_TRIALS: LatencyVerdict.TOO_FEW_CALLS,
    Standing.ABOVE: LatencyVerdict.SLOW,
    Standing.WITHIN: LatencyVerdict.WITHIN_BUDGET,
    Standing.UNSURE: LatencyVerdict.UNCERTAIN,
}

# ---------------------------------------------------------------- percentiles and their intervals


def nearest_rank(calls: int, quantile: float) -> int:
    """The 1-based rank of the nearest-rank ``quantile`` of ``calls`` durations: ``ceil(quantile * calls)``."""
    _check_quantile(quantile)
    if calls < 1:
        raise ValueError(f"a percentile needs at least one call, got {calls!r}")
    exact = Fraction(repr(quantile)) * calls  # 0.07 * 100 is 7.000000000000001 in floats
    return max(1, math.ceil(exact))


@lru_cache(maxsize=4096)
def _binomial_cdf(trials: int, rate: float) -> tuple[int, tuple[float, ...]]:
    """``(first, cumulative)``: P(B <= first + i) for B ~ Binomial(trials, rate), over the window of
    values holding all but a negligible share of its mass (P(B < first) counts as 0)."""
    mean, spread = trials * rate, math.sqrt(trials * rate * (1 - rate))
    first = max(0, math.floor(mean - _WINDOW_SDS * spread) - _WINDOW_MARGIN)
    last = min(trials, math.ceil(mean + _WINDOW_SDS * spread) + _WINDOW_MARGIN)
    log_rate, log_rest, log_all = math.log(rate), math.log1p(-rate), math.lgamma(trials + 1)
    masses = (
        math.exp(log_all - math.lgamma(k + 1) - math.lgamma(trials - k + 1) + k * log_rate + (trials - k) * log_rest)
        for k in range(first, last + 1)
    )
    return first, tuple(accumulate(masses))


def binomial_cdf(value: int, trials: int, *, rate: float) -> float:
    """P(B <= value) for B ~ Binomial(trials, rate), 0 < rate < 1."""
    first, cumulative = _binomial_cdf(trials, rate)
    if value < first:
        return 0.0
    return 1.0 if value - first >= len(cumulative) else cumulative[value - first]


@lru_cache(maxsize=4096)
def order_statistic_ranks(calls: int, quantile: float, *, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """The 1-based ranks ``(low, high)`` of the durations bounding the ``quantile``'s distribution-free
    interval, or None when no such interval exists at ``confidence`` with ``calls`` calls.

    With B ~ Binomial(calls, quantile): ``low`` is the largest rank with P(B < low) <= (1 - confidence) / 2,
    ``high`` the smallest with P(B >= high) <= (1 - confidence) / 2 (equal tails, each at most 2.5 %).
    """
    _check_quantile(quantile)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"the confidence must lie strictly between 0 and 1, got {confidence!r}")
    if calls < 1:
        return None
    tail = (1 - confidence) / 2
    first, cumulative = _binomial_cdf(calls, quantile)
    # low - 1 is the largest value v with P(B <= v) <= tail; high - 1 the smallest with P(B <= v) >= 1 - tail.
    low = first + bisect.bisect_right(cumulative, tail)
    high = first + bisect.bisect_left(cumulative, 1 - tail) + 1
    if low < 1 or high > calls:
        return None
    return low, high


def interval_coverage(calls: int, quantile: float, *, confidence: float = CONFIDENCE) -> float | None:
    """How often the interval of ``order_statistic_ranks`` holds the true ``quantile`` of a continuous
    distribution: P(low <= B < high), exactly, whatever the distribution; None without an interval."""
    ranks = order_statistic_ranks(calls, quantile, confidence=confidence)
    if ranks is None:
        return None
    low, high = ranks
    return binomial_cdf(high - 1, calls, rate=quantile) - binomial_cdf(low - 1, calls, rate=quantile)


@dataclass(frozen=True, slots=True)
class Percentile:
    """One percentile of durations: its nearest-rank value and its 95 % interval (None where none exists)."""

    quantile: float
    value_ms: float | None  # None without calls
    interval_ms: tuple[float, float] | None


def percentile_of(
    sorted_ms: Sequence[float] | pa.Array, quantile: float, *, confidence: float = CONFIDENCE
) -> Percentile:
    """The ``quantile`` of durations sorted from shortest to longest, with its distribution-free interval."""
    calls = len(sorted_ms)
    if not calls:
        _check_quantile(quantile)
        return Percentile(quantile, None, None)
    value = _ranked(sorted_ms, nearest_rank(calls, quantile))
    ranks = order_statistic_ranks(calls, quantile, confidence=confidence)
    interval = None if ranks is None else (_ranked(sorted_ms, ranks[0]), _ranked(sorted_ms, ranks[1]))
    return Percentile(quantile, value, interval)


def _ranked(sorted_ms: Sequence[float] | pa.Array, rank: int) -> float:
    """The ``rank``-th smallest duration (1-based)."""
    value = sorted_ms[rank - 1]
    return float(value.as_py() if isinstance(value, pa.Scalar) else value)


@dataclass(frozen=True, slots=True)
class Percentiles:
    """The p50, p90 and p99 of some calls' durations."""

    calls: int
    p50: Percentile
    p90: Percentile
    p99: Percentile


def percentiles(durations_ms: Iterable[float] | pa.Array | pa.ChunkedArray, *, ordered: bool = False) -> Percentiles:
    """The p50, p90 and p99 of durations (in any order; shortest first when ``ordered``), each with
    its 95 % interval."""
    if isinstance(durations_ms, pa.ChunkedArray):
        durations_ms = durations_ms.combine_chunks()
    if not isinstance(durations_ms, pa.Array):
        durations_ms = pa.array([float(value) for value in durations_ms], pa.float64())
    # Arrow sorts; only the few order statistics a percentile and its interval need become Python floats.
    if not ordered:
        durations_ms = durations_ms.take(pc.array_sort_indices(durations_ms))
    return Percentiles(len(durations_ms), *(percentile_of(durations_ms, quantile) for quantile in QUANTILES))


def _check_quantile(quantile: float) -> None:
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"a quantile must lie strictly between 0 and 1, got {quantile!r}")


# ---------------------------------------------------------------- which calls, slow, near the timeout


@dataclass(frozen=True, slots=True)
class LatencySettings:
    """One server's (or tool's) budgets: a call over ``latency_budget_ms`` is slow, and the slow share
    may reach ``slow_budget``; a call within 5 % of ``call_timeout_ms`` is near the timeout."""

    latency_budget_ms: float = DEFAULT_LATENCY_BUDGET_SECONDS * 1000
    slow_budget: float = DEFAULT_SLOW_BUDGET
    call_timeout_ms: float = DEFAULT_CALL_TIMEOUT_SECONDS * 1000
    min_calls: int = DEFAULT_MIN_CALLS

    @property
    def near_timeout_ms(self) -> float:
        """The shortest duration that counts as near the timeout."""
        return (1 - NEAR_TIMEOUT_MARGIN) * self.call_timeout_ms


@dataclass(frozen=True, slots=True)
class LeftOut:
    """Calls the latency figures leave out, by why."""

    cancelled: int = 0  # cut off by an operator: the duration is not the call's
    zero_ms: int = 0  # ok or failed in 0 ms: mostly refusals nr-llm made itself (a denied approval)
    unstated: int = 0  # tool steps that state no outcome
    denied: int = 0  # refused by the operator or a policy (``aggregate.denials``): never the server's time


# Python values enter Arrow typed: an untyped one costs a failed import of numpy on every call.
_DECISIVE = pa.array([Outcome.OK.value, Outcome.FAILED.value], pa.string())
_CANCELLED = pa.scalar(Outcome.CANCELLED.value, pa.string())
_FAILED = pa.scalar(Outcome.FAILED.value, pa.string())
_NO_TIME = pa.scalar(0.0, pa.float64())


def _ms(value: float) -> pa.Scalar:
    return pa.scalar(float(value), pa.float64())


# The outcome is spelled once, by its enum (tests/rules/test_normalize.py holds the data core to it).
FAILED_COLUMN = f"is_{Outcome.FAILED.value}"
TIMED_SCHEMA = pa.schema([("durationMs", pa.float64()), (FAILED_COLUMN, pa.bool_()), ("day", pa.date32())])


def timed_calls(
    durations_ms: pa.Array | pa.ChunkedArray, outcomes: pa.Array | pa.ChunkedArray, *, days: pa.Array | pa.ChunkedArray,
    denied: pa.Array | pa.ChunkedArray | None = None,
) -> tuple[pa.Table, LeftOut]:
    """The ok and failed calls with a duration above 0 ms (TIMED_SCHEMA), and the counts of the rest.

    ``outcomes`` are the outcome strings (null: none stated), ``days`` each call's calendar day,
    ``denied`` (optional) true for a call a denial explains: left out and counted.
    """
    calls = pa.table({"durationMs": durations_ms, "outcome": outcomes, "day": days})
    calls = calls.set_column(0, "durationMs", pc.fill_null(pc.cast(calls.column("durationMs"), pa.float64()), _NO_TIME))
    outcome = calls.column("outcome")
    cancelled = pc.equal(outcome, _CANCELLED)
    decisive = pc.is_in(outcome, value_set=_DECISIVE)
    refused = 0
    if denied is not None:
        denied = pc.fill_null(denied, pa.scalar(False))
        refused = _true_count(pc.and_(decisive, denied))
        decisive = pc.and_(decisive, pc.invert(denied))
    timed = pc.and_(decisive, pc.greater(calls.column("durationMs"), _NO_TIME))
    left_out = LeftOut(
        cancelled=_true_count(cancelled),
        zero_ms=_true_count(decisive) - _true_count(timed),
        unstated=_true_count(pc.is_null(outcome)),
        denied=refused,
    )
    kept = calls.filter(timed)
    failed = pc.equal(kept.column("outcome"), _FAILED)
    table = pa.table([kept.column("durationMs"), failed, pc.cast(kept.column("day"), pa.date32())], schema=TIMED_SCHEMA)
    return table, left_out


def _true_count(mask: pa.Array | pa.ChunkedArray) -> int:
    """How many entries of a boolean mask are true (null is not)."""
    return int(pc.sum(mask).as_py() or 0)


def share_over(timed: pa.Table, threshold_ms: float, *, inclusive: bool = False) -> Proportion:
    """The timed calls longer than ``threshold_ms`` (at least it, when ``inclusive``) of all timed calls."""
    compare = pc.greater_equal if inclusive else pc.greater
    return Proportion(_true_count(compare(timed.column("durationMs"), _ms(threshold_ms))), timed.num_rows)


def daily_slow_counts(timed: pa.Table, *, latency_budget_ms: float) -> list[tuple[date, int, int]]:
    """Per day with timed calls: ``(day, slow calls, timed calls)``, oldest first."""
    dated = timed.filter(pc.is_valid(timed.column("day")))
    slow = pc.cast(pc.greater(dated.column("durationMs"), _ms(latency_budget_ms)), pa.int64())
    counted = dated.append_column("slow", slow).group_by("day", use_threads=False).aggregate(
        [("slow", "sum"), ("slow", "count")]
    )
    rows = zip(*(counted.column(name).to_pylist() for name in ("day", "slow_sum", "slow_count")))
    return sorted((day, int(slow_calls), int(calls)) for day, slow_calls, calls in rows)


def latency_verdict(slow: Proportion, *, slow_budget: float, min_calls: int) -> LatencyVerdict:
    """``slow`` when the slow share's interval lies above the slow budget, ``within-budget`` when at or
    below it, ``uncertain`` when it holds it, ``too-few-calls`` below ``min_calls`` timed calls."""
    judged = standing(slow.events, slow.trials, budget=slow_budget, min_trials=min_calls, budget_name="slow budget")
    return _VERDICT[judged]


def latency_direction(change: Change[date]) -> LatencyDirection:
    """``slower`` when the slow share went up at ``change``, ``faster`` when it went down."""
    return _DIRECTION[change.direction]


# ---------------------------------------------------------------- one server's (or tool's) figures


@dataclass(frozen=True, slots=True)
class Latency:
    """A server's (or tool's) latency: figures of its current period, changes over all days."""

    settings: LatencySettings
    since: date | None  # the current period's first day: the latest change's; None: all days
    timed: Percentiles  # ok and failed calls of the current period
    ok: Percentiles
    failed: Percentiles
    slow: Proportion  # slow of timed calls, current period
    near_timeout: Proportion  # near the timeout (or over it) of timed calls, current period
    verdict: LatencyVerdict
    changes: tuple[Change[date], ...]  # of the daily slow share, oldest first
    left_out: LeftOut  # of the current period
    all_days: Percentiles  # ok and failed calls of every day
    all_days_ok: Percentiles | None = None  # the ok calls of every day
    all_days_failed: Percentiles | None = None  # the failed calls of every day


def latency_figures(
    durations_ms: pa.Array | pa.ChunkedArray,
    outcomes: pa.Array | pa.ChunkedArray,
    *,
    days: pa.Array | pa.ChunkedArray,
    settings: LatencySettings = LatencySettings(),
    denied: pa.Array | pa.ChunkedArray | None = None,
    ordered: bool = False,
) -> Latency:
    """The latency figures of one server's (or tool's) calls: per call its duration, outcome and day
    (and, optionally, whether a denial explains it); ``ordered`` when they come shortest first."""
    if not ordered:
        durations_ms, outcomes, days, denied = shortest_first(durations_ms, outcomes, days, denied)
    # Filters keep the order, so every percentile below reads its calls already sorted: one sort in all.
    timed, _ = timed_calls(durations_ms, outcomes, days=days, denied=denied)
    changes = tuple(find_changes(daily_slow_counts(timed, latency_budget_ms=settings.latency_budget_ms)))
    since = changes[-1].day if changes else None
    if since is not None:
        in_period = pc.fill_null(pc.greater_equal(days, pa.scalar(since, pa.date32())), pa.scalar(False))
        durations_ms, outcomes = pc.filter(durations_ms, in_period), pc.filter(outcomes, in_period)
        days = pc.filter(days, in_period)
        denied = None if denied is None else pc.filter(denied, in_period)
    current, left_out = timed_calls(durations_ms, outcomes, days=days, denied=denied)
    slow = share_over(current, settings.latency_budget_ms)
    failed = current.column(FAILED_COLUMN)
    return Latency(
        settings=settings,
        since=since,
        timed=percentiles(current.column("durationMs"), ordered=True),
        ok=percentiles(current.filter(pc.invert(failed)).column("durationMs"), ordered=True),
        failed=percentiles(current.filter(failed).column("durationMs"), ordered=True),
        slow=slow,
        near_timeout=share_over(current, settings.near_timeout_ms, inclusive=True),
        verdict=latency_verdict(slow, slow_budget=settings.slow_budget, min_calls=settings.min_calls),
        changes=changes,
        left_out=left_out,
        all_days=percentiles(timed.column("durationMs"), ordered=True),
        all_days_ok=percentiles(timed.filter(pc.invert(timed.column(FAILED_COLUMN))).column("durationMs"),
                                ordered=True),
        all_days_failed=percentiles(timed.filter(timed.column(FAILED_COLUMN)).column("durationMs"), ordered=True),
    )


def shortest_first(
    durations_ms: pa.Array | pa.ChunkedArray, *columns: pa.Array | pa.ChunkedArray | None,
) -> tuple[Any, ...]:
    """The durations shortest first (no duration last), and each of ``columns`` (None stays None) in their order."""
    order = pc.sort_indices(pa.table({"durationMs": durations_ms}), sort_keys=[("durationMs", "ascending")])
    return tuple(None if column is None else pc.take(column, order) for column in (durations_ms, *columns))


def latency_json(figures: Latency) -> dict[str, Any]:
    """The ``latency`` object of summary.json (issue 23's contract), of the current period."""
    return {
        "calls": figures.timed.calls,
        "p50_ms": figures.timed.p50.value_ms,
        "p90_ms": figures.timed.p90.value_ms,
        "p99_ms": figures.timed.p99.value_ms,
        "p90_interval_ms": interval_json(figures.timed.p90.interval_ms),
        "latency_budget_ms": figures.settings.latency_budget_ms,
        "slow": figures.slow.events,
        "slow_rate": figures.slow.rate,
        "slow_interval": interval_json(figures.slow.interval),
        "near_timeout": figures.near_timeout.rate,
        "changes": [
            {
                "day": change.day.isoformat(),
                "direction": latency_direction(change).value,
                "range": [change.earliest.isoformat(), change.latest.isoformat()],
                "probability": change.probability,
            }
            for change in figures.changes
        ],
        "verdict": figures.verdict.value,  # the latency verdict: slow, uncertain, too-few-calls, within-budget
    }
