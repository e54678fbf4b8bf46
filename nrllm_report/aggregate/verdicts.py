"""Wilson intervals and a server's verdict against its failure budget. Pure.

The verdict reads the failure rate failed / (ok + failed); cancelled calls never
enter it (ADR-191). The Wilson score interval is the 95 % interval: it stays
inside [0, 1] and behaves well at rates near 0 and with few calls, where the
normal approximation does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.model import Verdict

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


def wilson_interval(successes: int, trials: int, z: float = WILSON_Z) -> tuple[float, float] | None:
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


def verdict(ok: int, failed: int, budget: float, min_calls: int) -> Verdict:
    """The verdict on ok and failed calls against a failure budget (a rate in [0, 1])."""
    if not 0.0 <= budget <= 1.0:
        raise ValueError(f"the failure budget must lie in [0, 1], got {budget!r}")
    if ok < 0 or failed < 0:
        raise ValueError(f"counts must not be negative, got ok={ok!r}, failed={failed!r}")
    # Without a single call there is nothing to judge, whatever min_calls says.
    if ok + failed < max(min_calls, 1):
        return Verdict.TOO_FEW_CALLS
    if ok == 0:
        return Verdict.DOWN
    interval = wilson_interval(failed, ok + failed)
    assert interval is not None, "judged only with calls"
    low, high = interval
    if low > budget:
        return Verdict.FLAKY
    if high <= budget:
        return Verdict.RELIABLE
    return Verdict.UNCERTAIN


def rank_key(
    verdict: Verdict | str, interval: tuple[float, float] | None, server: str
) -> tuple[int, bool, float, str]:
    """A sort key putting the worst server first: by verdict, then lower bound descending, then id."""
    low = interval[0] if interval is not None else 0.0
    return (_RANK[Verdict(verdict)], interval is None, -low, server)
