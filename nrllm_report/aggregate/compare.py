"""Did a failure rate change between two exports? Fisher's exact test on the two samples.

The method, in plain words: each side is a sample of calls, ``failed`` out of
``ok + failed`` (cancelled calls never enter). If both sides shared one
failure rate, which of the calls failed would be a matter of chance alone;
Fisher's exact test takes all the failures of both sides together and asks how
likely it is that chance alone split them between the sides as unevenly as
observed, or more so (two-sided: either way). That likelihood is the p-value.
The rate is reported as changed when the p-value is below 5 %: ``worse`` when
the current rate is the higher, ``better`` when it is the lower, otherwise
``unchanged``.

Assumptions: calls are independent and share one rate within a side. The test
is exact (no large-sample approximation) and therefore valid with few calls;
it is conservative: with identical rates it reports a change in at most 5 % of
pairs, usually fewer. A side without calls is ``unchanged`` with a p-value of 1:
there is nothing to compare, and the caller lists such a server as appearing
or vanishing.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from .verdicts import Proportion

SIGNIFICANCE_LEVEL = 0.05
# Probabilities within this relative distance of the observed one count as equally extreme,
# as in R's fisher.test, so rounding never drops a tied table from the p-value.
_RELATIVE_TOLERANCE = 1e-7
_NEGLIGIBLE = 1e-17


class Decision(str, enum.Enum):
    """What the comparison says of the current failure rate against the baseline."""

    WORSE = "worse"
    BETTER = "better"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two sides' failed calls of their ok + failed ones, the difference of the rates, its p-value
    and the decision."""

    baseline: Proportion
    current: Proportion
    difference: float | None
    p_value: float
    decision: Decision


def compare(
    *,
    baseline_ok: int,
    baseline_failed: int,
    current_ok: int,
    current_failed: int,
    level: float = SIGNIFICANCE_LEVEL,
) -> Comparison:
    """Compare the current failure rate with the baseline's at the given significance level."""
    if min(baseline_ok, baseline_failed, current_ok, current_failed) < 0:
        raise ValueError("counts must not be negative")
    if not 0.0 < level < 1.0:
        raise ValueError(f"the significance level must lie strictly between 0 and 1, got {level!r}")
    baseline = Proportion(baseline_failed, baseline_ok + baseline_failed)
    current = Proportion(current_failed, current_ok + current_failed)
    difference = None if baseline.rate is None or current.rate is None else current.rate - baseline.rate
    p_value = fisher_exact_p(failed_a=baseline.events, trials_a=baseline.trials, failed_b=current.events,
                             trials_b=current.trials)
    return Comparison(baseline, current, difference, p_value, _decision(difference, p_value, level=level))


def _decision(difference: float | None, p_value: float, *, level: float) -> Decision:
    """Worse or better when the p-value is below the level, by the sign of the difference."""
    if difference is None or difference == 0 or p_value >= level:
        return Decision.UNCHANGED
    return Decision.WORSE if difference > 0 else Decision.BETTER


def fisher_exact_p(*, failed_a: int, trials_a: int, failed_b: int, trials_b: int) -> float:
    """The two-sided p-value of Fisher's exact test that two binomial samples share one rate."""
    if not (0 <= failed_a <= trials_a and 0 <= failed_b <= trials_b):
        raise ValueError(
            f"need 0 <= failed <= trials, got {failed_a!r} of {trials_a!r}, {failed_b!r} of {trials_b!r}"
        )
    table = _Hypergeometric(trials_a, trials_b, failed=failed_a + failed_b)
    if table.lowest == table.highest:
        return 1.0
    cutoff = table.log_pmf(failed_b) + math.log1p(_RELATIVE_TOLERANCE)
    # The pmf rises to its mode and falls after it, so beyond the observed count's side of
    # the mode, the counts at most as likely as the observed one form a tail of their own.
    if failed_b <= table.mode:
        left_edge = failed_b
        right_edge = table.first_at_most(cutoff, start=failed_b + 1, stop=table.highest)
    else:
        right_edge = failed_b
        left_edge = table.last_at_most(cutoff, start=table.lowest, stop=failed_b - 1)
    total = table.tail_sum(left_edge, -1) + table.tail_sum(right_edge, +1)
    return min(1.0, total)


class _Hypergeometric:
    """How many of ``failed`` failures fall on side b, with sides of ``trials_a`` and ``trials_b``."""

    def __init__(self, trials_a: int, trials_b: int, *, failed: int) -> None:
        self.trials_a, self.trials_b, self.failed = trials_a, trials_b, failed
        total = trials_a + trials_b
        self.lowest = max(0, failed - trials_a)
        self.highest = min(failed, trials_b)
        self.mode = min(self.highest, max(self.lowest, (failed + 1) * (trials_b + 1) // (total + 2)))
        self.log_denominator = _log_choose(total, failed)

    def log_pmf(self, failed_b: int) -> float:
        """The log probability that exactly ``failed_b`` failures fall on side b."""
        return (
            _log_choose(self.trials_b, failed_b)
            + _log_choose(self.trials_a, self.failed - failed_b)
            - self.log_denominator
        )

    def first_at_most(self, cutoff: float, *, start: int, stop: int) -> int:
        """The first x in [start, stop] with log pmf <= cutoff, all later ones too; stop + 1 if none."""
        low, high = start, stop + 1
        while low < high:
            middle = (low + high) // 2
            if self.log_pmf(middle) <= cutoff:
                high = middle
            else:
                low = middle + 1
        return low

    def last_at_most(self, cutoff: float, *, start: int, stop: int) -> int:
        """The last x in [start, stop] with log pmf <= cutoff, all earlier ones too; start - 1 if none."""
        low, high = start - 1, stop
        while low < high:
            middle = (low + high + 1) // 2
            if self.log_pmf(middle) <= cutoff:
                low = middle
            else:
                high = middle - 1
        return low

    def tail_sum(self, edge: int, step: int) -> float:
        """The probability from ``edge`` outward (step -1: down to lowest, +1: up to highest)."""
        total = 0.0
        failed_b = edge
        while self.lowest <= failed_b <= self.highest:
            term = math.exp(self.log_pmf(failed_b))
            total += term
            if term <= total * _NEGLIGIBLE:
                break
            failed_b += step
        return total


def _log_choose(n: int, k: int) -> float:
    """The log of the binomial coefficient n choose k."""
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
