"""The gate on latency: ``--fail-on slow`` fails a server whose latency verdict is slow,
``--fail-on-change slower`` one whose slow share changed for the slower within the change window.
Pure; it adds to the one ``GateResult`` of ``aggregate.gate``, so every output reads the same.

A server that fails for its failure rate and its latency is one failure (reason ``verdict`` or
``change``) carrying its ``SlowFailure``; one that fails for its latency alone has reason ``slow``
(its verdict is slow and ``slow`` is listed) or ``slower`` (a slower change alone).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date

from ..core.model import LatencyVerdict
from .changepoints import Change, Direction
from .gate import GateFailure, GateResult, Reason, SlowFailure, window_start
from .latencies import ServerLatency


def recent_slower_change(latency: ServerLatency, since: date | None) -> Change[date] | None:
    """The latest change of the slow share for the slower on or after ``since`` (None: no window)."""
    if since is None:
        return None
    slower = [change for change in latency.latency.changes
              if change.direction is Direction.WORSE and change.day >= since]
    return slower[-1] if slower else None


def slow_failure(latency: ServerLatency, *, fail_on_slow: bool, since: date | None) -> SlowFailure | None:
    """Why ``latency``'s server fails the gate for its latency, or None when it does not."""
    figures = latency.latency
    listed = fail_on_slow and figures.verdict is LatencyVerdict.SLOW
    change = recent_slower_change(latency, since)
    if not listed and change is None:
        return None
    slow = figures.slow if listed or change is None else change.after
    return SlowFailure(slow, figures.settings.slow_budget, figures.settings.latency_budget_ms,
                       change.day if change is not None else None)


def with_latency_gate(
    result: GateResult, latencies: dict[str, ServerLatency], *, fail_on_slow: bool, fail_on_slower: bool,
    last_day: date | None = None,
) -> GateResult:
    """``result`` with the servers that fail for their latency; the failures stay worst first."""
    since = (window_start(result.servers, change_window=result.change_window, last_day=last_day)
             if fail_on_slower else None)
    failing = result.failed_servers
    failures: list[GateFailure] = []
    for health in result.servers:
        latency = latencies.get(health.server)
        slow = None if latency is None else slow_failure(latency, fail_on_slow=fail_on_slow, since=since)
        failure = failing.get(health.server)
        if failure is not None:
            failures.append(failure if slow is None else replace(failure, slow=slow))
        elif slow is not None:
            reason = Reason.SLOWER if slow.change_day is not None and not (
                fail_on_slow and latency is not None and latency.latency.verdict is LatencyVerdict.SLOW
            ) else Reason.SLOW
            failures.append(GateFailure(health.server, reason, health.verdict, health.current.failures,
                                        health.failure_budget, None, slow))
    return replace(result, failures=tuple(failures), fail_on_slow=fail_on_slow, fail_on_slower=fail_on_slower)
