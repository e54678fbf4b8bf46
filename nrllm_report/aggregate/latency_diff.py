"""``diff`` on latency: per server and per tool, did the slow share change between two exports?
Pure. The slow share (slow of timed calls, over all days of each side, against the server's latency
budget) is compared with the test the failure rates are compared with (``compare``: Fisher's exact
test, two-sided, at 5 %); a server or tool with timed calls on one side only is not compared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..core.model import Outcome
from .compare import Decision, compare
from .latency import LatencySettings
from .verdicts import Proportion, interval_json

_DECISIVE = pa.array([Outcome.OK.value, Outcome.FAILED.value], pa.string())
SlowCounts = dict[tuple[str, str | None], Proportion]  # (server, tool or None for the server) -> slow of timed


@dataclass(frozen=True, slots=True)
class SlowDiffRow:
    """A server's (``tool`` None) or tool's slow share on both sides, and what the test says."""

    server: str
    tool: str | None
    baseline: Proportion
    current: Proportion
    change: float | None  # the current slow share less the baseline's
    p_value: float | None
    decision: Decision | None  # None when one side has no timed calls

    @property
    def is_slower(self) -> bool:
        return self.decision is Decision.WORSE

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"server": self.server}
        if self.tool is not None:
            row["tool"] = self.tool
        sides = {name: {"calls": side.trials, "slow": side.events, "slow_rate": side.rate,
                        "slow_interval": interval_json(side.interval)}
                 for name, side in (("baseline", self.baseline), ("current", self.current))}
        decision = None if self.decision is None else ("slower" if self.decision is Decision.WORSE else
                                                       "faster" if self.decision is Decision.BETTER else "unchanged")
        return {**row, **sides, "change": self.change, "p_value": self.p_value, "decision": decision}


def slow_counts(calls: pa.Table, settings_for: Callable[[str], LatencySettings]) -> SlowCounts:
    """Slow of timed calls per server and per (server, tool), over all days (LATENCY_CALLS_SCHEMA in)."""
    counts: SlowCounts = {}
    for server in sorted(set(calls.column("server").to_pylist())):
        mine = calls.filter(pc.equal(calls.column("server"), pa.scalar(server, pa.string())))
        kept = mine.filter(_timed_mask(mine))
        slow = pc.greater(kept.column("durationMs"), pa.scalar(settings_for(server).latency_budget_ms, pa.float64()))
        counts[(server, None)] = Proportion(int(pc.sum(slow).as_py() or 0), kept.num_rows)
        flagged = kept.append_column("slow", pc.cast(slow, pa.int64()))
        grouped = flagged.group_by("toolName", use_threads=False).aggregate([("slow", "sum"), ("slow", "count")])
        for tool, events, trials in zip(*(grouped.column(name).to_pylist()
                                          for name in ("toolName", "slow_sum", "slow_count"))):
            counts[(server, tool)] = Proportion(int(events), int(trials))
    return counts


def _timed_mask(calls: pa.Table) -> pa.ChunkedArray:
    """The calls ``latency.timed_calls`` keeps: ok or failed, not denied, above 0 ms."""
    decisive = pc.is_in(calls.column("outcome"), value_set=_DECISIVE)
    undenied = pc.invert(pc.fill_null(calls.column("denied"), pa.scalar(False)))
    zero = pa.scalar(0.0, pa.float64())
    timed = pc.and_(pc.and_(decisive, undenied), pc.greater(pc.fill_null(calls.column("durationMs"), zero), zero))
    return pc.fill_null(timed, pa.scalar(False))


def slow_diff_row(key: tuple[str, str | None], *, baseline: Proportion, current: Proportion) -> SlowDiffRow:
    server, tool = key
    if not baseline.trials or not current.trials:
        return SlowDiffRow(server, tool, baseline, current, None, None, None)
    comparison = compare(baseline_ok=baseline.trials - baseline.events, baseline_failed=baseline.events,
                         current_ok=current.trials - current.events, current_failed=current.events)
    return SlowDiffRow(server, tool, baseline, current, comparison.difference, comparison.p_value,
                       comparison.decision)


def slow_diff(baseline: SlowCounts, current: SlowCounts) -> tuple[tuple[SlowDiffRow, ...], tuple[SlowDiffRow, ...]]:
    """The servers' rows and the tools' rows, slower first, then by the size of the change."""
    none = Proportion(0, 0)
    rows = [slow_diff_row(key, baseline=baseline.get(key, none), current=current.get(key, none))
            for key in sorted(set(baseline) | set(current), key=lambda key: (key[0], key[1] or ""))]
    order = {Decision.WORSE: 0, Decision.BETTER: 1, Decision.UNCHANGED: 2, None: 3}
    rows.sort(key=lambda row: (order[row.decision], -abs(row.change or 0.0), row.server, row.tool or ""))
    return (tuple(row for row in rows if row.tool is None), tuple(row for row in rows if row.tool is not None))
