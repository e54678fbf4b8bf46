"""Wilson intervals and a server's verdict against its failure budget. Pure.

The verdict reads the failure rate failed / (ok + failed); cancelled calls never
enter it (ADR-191). The Wilson score interval is the 95 % interval: it stays
inside [0, 1] and behaves well at rates near 0 and with few calls, where the
normal approximation does not.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ..core.model import LatencyVerdict, Verdict

WILSON_Z = 1.959963984540054  # two-sided 95 %


# Worst first: the order of the servers index.
VERDICTS_WORST_FIRST: tuple[Verdict, ...] = tuple(Verdict)
_RANK = {verdict: position for position, verdict in enumerate(VERDICTS_WORST_FIRST)}


@dataclass(frozen=True, slots=True)
class Proportion:
    """``events`` of ``trials`` (failed of ok + failed calls, or cancelled of all calls) with its
    rate and Wilson 95 % interval, both None without trials: the one way a rate is estimated."""

    events: int
    trials: int

    @property
    def rate(self) -> float | None:
        return self.events / self.trials if self.trials else None

    @property
    def interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.events, self.trials)


def interval_json(interval: tuple[float, float] | None) -> list[float] | None:
    """An interval as the JSON outputs write it: a two-element list, or null."""
    return None if interval is None else [interval[0], interval[1]]


def wilson_interval(successes: int, trials: int, *, z: float = WILSON_Z) -> tuple[float, float] | None:
    """The Wilson score interval of successes / trials, or None without trials."""
    if successes < 0 or trials < 0 or successes > trials:
        raise ValueError(f"need 0 <= successes <= trials, got {successes!r} of {trials!r}")
    if trials == 0:
        return None
    proportion = successes / trials
    z_squared = z * z
    denominator = 1 + z_squared / trials
    centre = (proportion + z_squared / (2 * trials)) / denominator
    half_width = (z / denominator) * math.sqrt(
        proportion * (1 - proportion) / trials + z_squared / (4 * trials * trials)
    )
    low = 0.0 if successes == 0 else max(0.0, centre - half_width)
    high = 1.0 if successes == trials else min(1.0, centre + half_width)
    return low, high


class Standing(enum.Enum):
    """Where a proportion stands against a budget, by its Wilson interval: the one judgement every
    verdict (failures, slow calls) is made of."""

    TOO_FEW_TRIALS = "too-few-trials"
    ABOVE = "above"  # the interval's lower end is above the budget
    WITHIN = "within"  # the interval's upper end is at or below it
    UNSURE = "unsure"  # the interval holds the budget


def standing(events: int, trials: int, *, budget: float, min_trials: int, budget_name: str = "budget") -> Standing:
    """Where ``events`` of ``trials`` stand against ``budget`` (a rate in [0, 1]); ``min_trials`` to be judged."""
    if not 0.0 <= budget <= 1.0:
        raise ValueError(f"the {budget_name} must lie in [0, 1], got {budget!r}")
    if events < 0 or trials < events:
        raise ValueError(f"need 0 <= events <= trials, got {events!r} of {trials!r}")
    # Without a single trial there is nothing to judge, whatever min_trials says.
    if trials < max(min_trials, 1):
        return Standing.TOO_FEW_TRIALS
    interval = wilson_interval(events, trials)
    assert interval is not None, "judged only with trials"
    low, high = interval
    if low > budget:
        return Standing.ABOVE
    if high <= budget:
        return Standing.WITHIN
    return Standing.UNSURE


_FAILURE_VERDICT = {
    Standing.TOO_FEW_TRIALS: Verdict.TOO_FEW_CALLS,
    Standing.ABOVE: Verdict.FLAKY,
    Standing.WITHIN: Verdict.RELIABLE,
    Standing.UNSURE: Verdict.UNCERTAIN,
}


def verdict(ok: int, failed: int, *, budget: float, min_calls: int) -> Verdict:
    """The verdict on ok and failed calls against a failure budget (a rate in [0, 1])."""
    if ok < 0 or failed < 0:
        raise ValueError(f"counts must not be negative, got ok={ok!r}, failed={failed!r}")
    judged = standing(failed, ok + failed, budget=budget, min_trials=min_calls, budget_name="failure budget")
    if judged is not Standing.TOO_FEW_TRIALS and ok == 0:
        return Verdict.DOWN
    return _FAILURE_VERDICT[judged]


def shown_verdict(failure: Verdict, latency: LatencyVerdict | None) -> Verdict:
    """The verdict a server (or tool) is shown with: ``slow`` when the failure budget finds it reliable
    and its latency verdict is slow, else its failure verdict (a failure verdict comes first)."""
    if failure is Verdict.RELIABLE and latency is LatencyVerdict.SLOW:
        return Verdict.SLOW
    return failure


def rank_key(
    verdict: Verdict | str, interval: tuple[float, float] | None, *, server: str
) -> tuple[int, bool, float, str]:
    """A sort key putting the worst server first: by verdict, then lower bound descending, then id."""
    low = interval[0] if interval is not None else 0.0
    return (_RANK[Verdict(verdict)], interval is None, -low, server)
