"""Two exports side by side: per server and per tool, did the failure rate change? Pure.

Each side's figures are the servers' ``ServerStats`` as a build adds them up. The
failure rates are compared with ``compare`` (Fisher's exact test, two-sided, at
5 %); a server or tool with calls on one side only is listed as appearing or
vanishing instead of being compared. Cancelled calls never enter a failure rate
(ADR-191).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.model import Outcome
from .compare import Decision, compare
from .figures import OutcomeCounts, ServerStats
from .latency_diff import SlowDiffRow
from .verdicts import Proportion, interval_json


class Presence(str, enum.Enum):
    """Where a server or tool has calls: on both sides, only the current one, only the baseline."""

    BOTH = "both"
    APPEARED = "appeared"
    VANISHED = "vanished"


@dataclass(frozen=True, slots=True)
class Side:
    """One side's calls of a server or tool, and its failure rate with the Wilson 95 % interval."""

    calls: int
    ok: int
    failed: int
    cancelled: int

    @property
    def failures(self) -> Proportion:
        return Proportion(self.failed, self.ok + self.failed)

    @property
    def failure_rate(self) -> float | None:
        return self.failures.rate

    @property
    def interval(self) -> tuple[float, float] | None:
        return self.failures.interval

    def to_json(self) -> dict[str, Any]:
        counts = {Outcome.OK: self.ok, Outcome.FAILED: self.failed, Outcome.CANCELLED: self.cancelled}
        return {
            "calls": self.calls, **{outcome.value: count for outcome, count in counts.items()},
            "failure_rate": self.failure_rate, "interval": interval_json(self.interval),
        }


NO_CALLS = Side(0, 0, 0, 0)


def side_of(counts: OutcomeCounts | None) -> Side:
    if counts is None:
        return NO_CALLS
    return Side(counts.calls, counts.ok, counts.failed, counts.cancelled)


@dataclass(frozen=True, slots=True)
class DiffRow:
    """A server (``tool`` None) or one of its tools on both sides, and what the comparison says."""

    server: str
    tool: str | None
    presence: Presence
    baseline: Side
    current: Side
    change: float | None  # current failure rate less the baseline's
    p_value: float | None
    decision: Decision | None  # None when the server or tool is on one side only

    @property
    def is_worse(self) -> bool:
        return self.decision is Decision.WORSE

    @property
    def result(self) -> Decision | Presence:
        """What the row comes to: its decision, or where it has calls when on one side only."""
        return self.decision if self.decision is not None else self.presence

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"server": self.server}
        if self.tool is not None:
            row["tool"] = self.tool
        row.update({
            "presence": self.presence.value, "baseline": self.baseline.to_json(), "current": self.current.to_json(),
            "change": self.change, "p_value": self.p_value,
            "decision": self.decision.value if self.decision is not None else None,
        })
        return row


# Worse first, then what appeared or vanished, then better, then unchanged.
_ORDER = {Decision.WORSE: 0, Presence.APPEARED: 1, Presence.VANISHED: 2, Decision.BETTER: 3, Decision.UNCHANGED: 4}


def _row_order(row: DiffRow) -> tuple[int, float, str, str]:
    return (_ORDER[row.result], -abs(row.change or 0.0), row.server, row.tool or "")


def diff_row(server: str, tool: str | None, *, baseline: OutcomeCounts | None,
             current: OutcomeCounts | None) -> DiffRow:
    """Compare one server's (or tool's) counts; ``None`` for a side without it."""
    if baseline is None or current is None:
        presence = Presence.APPEARED if baseline is None else Presence.VANISHED
        return DiffRow(server, tool, presence, side_of(baseline), side_of(current), None, None, None)
    comparison = compare(baseline_ok=baseline.ok, baseline_failed=baseline.failed, current_ok=current.ok,
                         current_failed=current.failed)
    return DiffRow(server, tool, Presence.BOTH, side_of(baseline), side_of(current), comparison.difference,
                   comparison.p_value, comparison.decision)


@dataclass(frozen=True)
class ExportDiff:
    """Every server and tool of either side, worse first."""

    servers: tuple[DiffRow, ...]
    tools: tuple[DiffRow, ...]
    slow_servers: tuple[SlowDiffRow, ...] = ()  # the slow shares compared (aggregate.latency_diff)
    slow_tools: tuple[SlowDiffRow, ...] = ()

    @property
    def slower_servers(self) -> list[str]:
        return [row.server for row in self.slow_servers if row.is_slower]

    @property
    def worse_servers(self) -> list[str]:
        return self.servers_with(Decision.WORSE)

    def servers_with(self, result: Decision | Presence) -> list[str]:
        return [row.server for row in self.servers if row.result is result]


def _tool_counts(servers: Mapping[str, ServerStats]) -> dict[tuple[str, str], OutcomeCounts]:
    return {(server, name): tool.counts for server, stats in servers.items() for name, tool in stats.tools.items()}


def _rows(keys: Iterable[Any], *, baseline: Mapping[Any, OutcomeCounts], current: Mapping[Any, OutcomeCounts],
          name_of: Callable[[Any], tuple[str, str | None]]) -> tuple[DiffRow, ...]:
    rows = [diff_row(*name_of(key), baseline=baseline.get(key), current=current.get(key)) for key in keys]
    return tuple(sorted(rows, key=_row_order))


def diff_exports(baseline: Mapping[str, ServerStats], current: Mapping[str, ServerStats]) -> ExportDiff:
    """Compare every server and every (server, tool) found on either side."""
    servers = sorted(set(baseline) | set(current))
    server_rows = _rows(
        servers, baseline={server: stats.counts for server, stats in baseline.items()},
        current={server: stats.counts for server, stats in current.items()}, name_of=lambda server: (server, None),
    )
    baseline_tools, current_tools = _tool_counts(baseline), _tool_counts(current)
    tool_rows = _rows(sorted(set(baseline_tools) | set(current_tools)), baseline=baseline_tools, current=current_tools,
                      name_of=lambda key: key)
    return ExportDiff(server_rows, tool_rows)


@dataclass(frozen=True)
class InputSide:
    """What one side was read from: the inputs as given, rows read and rows rejected."""

    inputs: tuple[str, ...]
    rows_read: int
    rows_rejected: int

    def to_json(self) -> dict[str, Any]:
        return {"inputs": list(self.inputs), "rows_read": self.rows_read, "rows_rejected": self.rows_rejected}


@dataclass(frozen=True)
class DiffReport:
    """The comparison and the two sides it was made from."""

    diff: ExportDiff
    baseline: InputSide
    current: InputSide
