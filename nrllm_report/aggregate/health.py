"""A server's health: its verdict on its current period, its changes, and what cancels change.

The figures every consumer reads (the servers pages, summary.json, the gates, the
Markdown and JUnit reports) are made here once per server, from its daily counts.
The failure rate is failed / (ok + failed): cancelled calls never enter it
(ADR-191). The current period is the days since the latest change of the failure
rate, or all days when there is none; the verdict is judged on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date

from ..core.model import LatencyVerdict, Verdict
from .changepoints import Change, find_changes
from .figures import OutcomeCounts, ServerStats, ToolStats
from .verdicts import Proportion, rank_key, shown_verdict, verdict

# One detected change of a server's failure (or cancellation) rate, in calendar days.
RateChange = Change[date]


@dataclass(frozen=True, slots=True)
class CurrentPeriod:
    """The days since the latest change (``since`` None: all days), which the verdict judges."""

    since: date | None
    ok: int
    failed: int

    @property
    def failures(self) -> Proportion:
        return Proportion(self.failed, self.ok + self.failed)


@dataclass(frozen=True, slots=True)
class ServerHealth:
    server: str
    verdict: Verdict
    failure_budget: float
    failure_rate: float | None
    interval: tuple[float, float] | None  # of the whole data
    current: CurrentPeriod
    changes: tuple[RateChange, ...]
    cancellation_changes: tuple[RateChange, ...]
    cancelled_share: float | None
    failure_rate_if_cancels_failed: float | None
    legacy_days: tuple[date, ...]
    last_day: date | None  # the server's last day with calls
    slow: Proportion | None = None  # the current latency period's slow share, when the verdict is slow

    @property
    def latest_change(self) -> RateChange | None:
        return self.changes[-1] if self.changes else None

    def rank(self) -> tuple[int, bool, float, str]:
        """Worst first: by verdict, then the lower bound of the interval the verdict judged (the
        current failure rate's, the slow share's for a slow server), then the id."""
        judged = self.slow if self.verdict is Verdict.SLOW and self.slow is not None else self.current.failures
        return rank_key(self.verdict, judged.interval, server=self.server)


def with_latency_verdict(health: ServerHealth, latency: LatencyVerdict | None, *, slow: Proportion) -> ServerHealth:
    """``health`` shown slow where it is reliable and its latency verdict (on the slow share ``slow``) is slow."""
    shown = shown_verdict(health.verdict, latency)
    return health if shown is health.verdict else replace(health, verdict=shown, slow=slow)


def server_health(stats: ServerStats, *, budget: float, min_calls: int) -> ServerHealth:
    """The health of one server against its failure budget."""
    counts = stats.counts
    switch = recording_switch_day(stats.days, stats.legacy_days)
    failure_series = [(day, day_counts.failed, day_counts.decisive) for day, day_counts in stats.days.items()]
    changes = tuple(_rate_change(change, switch) for change in find_changes(failure_series))
    cancel_series = [
        (day, day_counts.cancelled, day_counts.decisive + day_counts.cancelled)
        for day, day_counts in stats.days.items()
    ]
    current = current_period(stats.days, changes[-1].day if changes else None)
    with_outcome = counts.decisive + counts.cancelled
    return ServerHealth(
        server=stats.server,
        verdict=verdict(current.ok, current.failed, budget=budget, min_calls=min_calls),
        failure_budget=budget,
        failure_rate=counts.failure_rate,
        interval=counts.wilson_interval(),
        current=current,
        changes=changes,
        cancellation_changes=tuple(_rate_change(change, switch) for change in find_changes(cancel_series)),
        cancelled_share=counts.cancelled / with_outcome if with_outcome else None,
        failure_rate_if_cancels_failed=(counts.failed + counts.cancelled) / with_outcome if with_outcome else None,
        legacy_days=tuple(sorted(stats.legacy_days)),
        last_day=max(stats.days) if stats.days else None,
    )


def tool_verdict(tool: ToolStats, *, budget: float, min_calls: int) -> Verdict:
    """A tool's verdict on its own figures (all its calls), against its server's budget."""
    return verdict(tool.counts.ok, tool.counts.failed, budget=budget, min_calls=min_calls)


def current_period(days: dict[date, OutcomeCounts], since: date | None) -> CurrentPeriod:
    """The ok and failed calls of the days from ``since`` on (all days when None)."""
    ok = sum(counts.ok for day, counts in days.items() if since is None or day >= since)
    failed = sum(counts.failed for day, counts in days.items() if since is None or day >= since)
    return CurrentPeriod(since, ok, failed)


def recording_switch_day(days: Iterable[date], legacy_days: set[date]) -> date | None:
    """The first day after the last day of pre-ADR-191 rows on which calls state outcomes, if any."""
    if not legacy_days:
        return None
    last_legacy = max(legacy_days)
    later = [day for day in days if day > last_legacy]
    return min(later) if later else None


def _rate_change(change: Change[date], switch: date | None) -> RateChange:
    return replace(change, recording_changed=switch is not None and change.earliest <= switch <= change.latest)


def healths_worst_first(healths: Iterable[ServerHealth]) -> list[ServerHealth]:
    return sorted(healths, key=ServerHealth.rank)
