"""Runs, servers and flakiness figures from validated steps. Pure: data in, data out.

A cancelled call is never a server's fault (ADR-191): the failure rate is
failed / (ok + failed), and cancelled calls are counted beside it, never in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date
from typing import Callable, Iterable, Sequence

from .model import TOOL_KIND, Outcome, Step, Verdict
from .slugs import slug

WILSON_Z = 1.959963984540054  # two-sided 95 %
DEFAULT_MIN_CALLS = 10


@dataclass(slots=True)
class OutcomeCounts:
    """Tool calls by outcome; ``unstated`` are tool steps without a flag."""

    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    unstated: int = 0

    def add(self, outcome: Outcome | None) -> None:
        if outcome is Outcome.OK:
            self.ok += 1
        elif outcome is Outcome.FAILED:
            self.failed += 1
        elif outcome is Outcome.CANCELLED:
            self.cancelled += 1
        else:
            self.unstated += 1

    def merge(self, other: "OutcomeCounts") -> None:
        self.ok += other.ok
        self.failed += other.failed
        self.cancelled += other.cancelled
        self.unstated += other.unstated

    def of(self, outcome: Outcome) -> int:
        return int(getattr(self, outcome.name.lower()))

    @property
    def calls(self) -> int:
        return self.ok + self.failed + self.cancelled + self.unstated

    @property
    def decisive(self) -> int:
        """Calls that say something about the server: ok and failed, never cancelled."""
        return self.ok + self.failed

    @property
    def failure_rate(self) -> float | None:
        return self.failed / self.decisive if self.decisive else None

    def wilson_interval(self) -> tuple[float, float] | None:
        return wilson_interval(self.failed, self.decisive)

    def verdict(self, min_calls: int) -> Verdict:
        if self.decisive < max(min_calls, 1):
            return Verdict.TOO_FEW_CALLS
        if self.failed == 0:
            return Verdict.HEALTHY
        if self.ok == 0:
            return Verdict.FAILING
        return Verdict.FLAKY


def wilson_interval(successes: int, trials: int, z: float = WILSON_Z) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion, or None without trials."""
    if trials <= 0:
        return None
    proportion = successes / trials
    z_squared = z * z
    denominator = 1 + z_squared / trials
    centre = (proportion + z_squared / (2 * trials)) / denominator
    half_width = (z / denominator) * math.sqrt(
        proportion * (1 - proportion) / trials + z_squared / (4 * trials * trials)
    )
    return max(0.0, centre - half_width), min(1.0, centre + half_width)


@dataclass(slots=True)
class RunSummary:
    """One row of the run index."""

    run: str
    slug: str
    start: int | None
    end: int | None
    duration_ms: float
    steps: int
    tool_calls: int
    counts: OutcomeCounts
    servers: tuple[str, ...]

    @property
    def has_failure(self) -> bool:
        return self.counts.failed > 0


def summarize_run(run: str, steps: Sequence[Step]) -> RunSummary:
    """The index row of one run; ``steps`` are in sequence order."""
    counts = OutcomeCounts()
    servers: set[str] = set()
    times = [step.crdate for step in steps if step.crdate is not None]
    for step in steps:
        if step.kind == TOOL_KIND:
            counts.add(step.outcome)
            if step.server is not None:
                servers.add(step.server)
    return RunSummary(
        run=run,
        slug=slug(run),
        start=min(times) if times else None,
        end=max(times) if times else None,
        duration_ms=sum(step.duration_ms for step in steps),
        steps=len(steps),
        tool_calls=counts.calls,
        counts=counts,
        servers=tuple(sorted(servers)),
    )


def newest_first(runs: Iterable[RunSummary]) -> list[RunSummary]:
    """Runs by start, newest first; runs without a time last; ties by run id."""
    return sorted(runs, key=lambda run: (run.start is None, -(run.start or 0), run.run))


@dataclass(slots=True)
class ToolStats:
    name: str
    counts: OutcomeCounts = field(default_factory=OutcomeCounts)
    first_seen: int | None = None
    last_seen: int | None = None


@dataclass(slots=True)
class ServerStats:
    """Everything the servers pages show about one MCP server."""

    server: str
    slug: str
    counts: OutcomeCounts = field(default_factory=OutcomeCounts)
    first_seen: int | None = None
    last_seen: int | None = None
    tools: dict[str, ToolStats] = field(default_factory=dict)
    days: dict[date, OutcomeCounts] = field(default_factory=dict)
    failed_runs: dict[str, int] = field(default_factory=dict)
    cancelled_runs: dict[str, int] = field(default_factory=dict)

    def add(self, step: Step, day: date | None) -> None:
        self.counts.add(step.outcome)
        self.first_seen, self.last_seen = _widen(self.first_seen, self.last_seen, step.crdate)
        tool_name = step.tool_name or ""
        tool = self.tools.get(tool_name)
        if tool is None:
            tool = self.tools[tool_name] = ToolStats(tool_name)
        tool.counts.add(step.outcome)
        tool.first_seen, tool.last_seen = _widen(tool.first_seen, tool.last_seen, step.crdate)
        if day is not None:
            self.days.setdefault(day, OutcomeCounts()).add(step.outcome)
        if step.outcome is Outcome.FAILED:
            self.failed_runs[step.run] = self.failed_runs.get(step.run, 0) + 1
        elif step.outcome is Outcome.CANCELLED:
            self.cancelled_runs[step.run] = self.cancelled_runs.get(step.run, 0) + 1


def _widen(first: int | None, last: int | None, moment: int | None) -> tuple[int | None, int | None]:
    if moment is None:
        return first, last
    return (moment if first is None else min(first, moment), moment if last is None else max(last, moment))


class ServerTally:
    """Accumulates server statistics step by step, so no step needs to be kept for it."""

    def __init__(self, day_of: Callable[[int], date]) -> None:
        self.day_of = day_of
        self.servers: dict[str, ServerStats] = {}

    def add_run(self, steps: Iterable[Step]) -> None:
        for step in steps:
            if step.kind != TOOL_KIND or step.server is None:
                continue
            stats = self.servers.get(step.server)
            if stats is None:
                stats = self.servers[step.server] = ServerStats(step.server, slug(step.server))
            stats.add(step, None if step.crdate is None else self.day_of(step.crdate))

    def ranked(self) -> list[ServerStats]:
        """Worst first by the interval's lower bound, so three calls cannot top the list."""

        def rank(stats: ServerStats) -> tuple[float, float, str]:
            interval = stats.counts.wilson_interval()
            lower = interval[0] if interval else -1.0
            rate = stats.counts.failure_rate
            return (-lower, -(rate if rate is not None else -1.0), stats.server)

        return sorted(self.servers.values(), key=rank)
