"""The CI gate: which servers fail it, from their health. Pure; one evaluation for every output.

A server fails the gate when its verdict is one of ``fail_on`` (reason ``verdict``),
or, with ``fail_on_change`` set to ``worse``, when it has a worse change of its
failure rate whose day lies within the last ``change_window`` days of the data
(reason ``change``). A server that fails for both is one failure with reason
``verdict`` and the change's day beside it. The lines printed on stderr, the
JUnit file, the Markdown summary, summary.json and the exit code all read the one
``GateResult``, so they cannot disagree.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from ..core.model import Verdict
from .changepoints import Direction
from .health import RateChange, ServerHealth, healths_worst_first
from .verdicts import Proportion, interval_json

CHANGE_WORSE = "worse"


class Reason(str, enum.Enum):
    """Why a server fails the gate."""

    VERDICT = "verdict"
    CHANGE = "change"
    SLOW = "slow"  # the latency verdict is slow (``--fail-on slow``; aggregate.latency_gate)
    SLOWER = "slower"  # a slower change of the slow share within the window (``--fail-on-change slower``)


@dataclass(frozen=True, slots=True)
class SlowFailure:
    """Why a server fails the gate for its latency: its slow share against the slow budget."""

    slow: Proportion  # of the current period; after the change for a slower change alone
    slow_budget: float
    latency_budget_ms: float
    change_day: date | None  # the slower change within the window, when one counts

    def to_json(self) -> dict[str, Any]:
        return {
            "slow_rate": self.slow.rate, "slow_interval": interval_json(self.slow.interval),
            "slow_budget": self.slow_budget, "latency_budget_ms": self.latency_budget_ms,
            "change_day": self.change_day.isoformat() if self.change_day is not None else None,
        }


@dataclass(frozen=True, slots=True)
class GateFailure:
    """One server that fails the gate, with the figures its line shows."""

    server: str
    reason: Reason
    verdict: Verdict
    failures: Proportion  # of the current period; after the change for reason ``change``
    failure_budget: float
    change_day: date | None  # the worse change within the window, when one counts
    slow: SlowFailure | None = None  # it also (or only) fails for its latency

    def to_json(self) -> dict[str, Any]:
        latency = {} if self.slow is None else {"latency": self.slow.to_json()}
        return {
            "server": self.server,
            "reason": self.reason.value,
            "verdict": self.verdict.value,
            "failure_rate": self.failures.rate,
            "interval": interval_json(self.failures.interval),
            "failure_budget": self.failure_budget,
            "change_day": self.change_day.isoformat() if self.change_day is not None else None,
            **latency,
        }


@dataclass(frozen=True)
class GateResult:
    """The servers worst first, and those that fail the gate (in the same order)."""

    servers: tuple[ServerHealth, ...]
    failures: tuple[GateFailure, ...]
    fail_on: tuple[Verdict, ...] = ()
    fail_on_change: str | None = None
    change_window: int = 7
    fail_on_slow: bool = False
    fail_on_slower: bool = False

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def failed_servers(self) -> dict[str, GateFailure]:
        return {failure.server: failure for failure in self.failures}

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "failures": [failure.to_json() for failure in self.failures]}


def recent_worse_change(health: ServerHealth, since: date | None) -> RateChange | None:
    """The latest worse change of the failure rate on or after ``since`` (None: no window)."""
    if since is None:
        return None
    worse = [change for change in health.changes if change.direction is Direction.WORSE and change.day >= since]
    return worse[-1] if worse else None


def window_start(healths: Iterable[ServerHealth], *, change_window: int, last_day: date | None) -> date | None:
    """The first day of the last ``change_window`` days of the data (its last day included)."""
    last = last_day if last_day is not None else max(
        (health.last_day for health in healths if health.last_day is not None), default=None
    )
    return None if last is None else last - timedelta(days=change_window - 1)


def _failure(health: ServerHealth, *, listed: bool, change: RateChange | None) -> GateFailure:
    if listed:
        failures = health.current.failures
    else:
        assert change is not None, "a server fails for its verdict or for a change"
        failures = change.after
    return GateFailure(health.server, Reason.VERDICT if listed else Reason.CHANGE, health.verdict, failures,
                       health.failure_budget, change.day if change is not None else None)


def evaluate_gate(
    healths: Iterable[ServerHealth], *, fail_on: Iterable[Verdict | str] = (), fail_on_change: str | None = None,
    change_window: int = 7, last_day: date | None = None,
) -> GateResult:
    """Which servers fail the gate; ``last_day`` is the data's last day (default: the servers' latest)."""
    if change_window < 1:
        raise ValueError(f"the change window must be at least one day, got {change_window!r}")
    if fail_on_change not in (None, CHANGE_WORSE):
        raise ValueError(f"--fail-on-change takes {CHANGE_WORSE!r}, got {fail_on_change!r}")
    servers = tuple(healths_worst_first(healths))
    listed = tuple(Verdict(value) for value in fail_on)
    since = window_start(servers, change_window=change_window, last_day=last_day) if fail_on_change else None
    failures = []
    for health in servers:
        change = recent_worse_change(health, since)
        if health.verdict in listed or change is not None:
            failures.append(_failure(health, listed=health.verdict in listed, change=change))
    return GateResult(servers, tuple(failures), listed, fail_on_change, change_window)
