"""The rows the overview pages' templates lay out: plain, pre-formatted texts per row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..aggregate.changepoints import Direction
from ..aggregate.figures import OutcomeCounts, ServerStats
from ..aggregate.health import RateChange, ServerHealth
from ..aggregate.verdicts import Proportion
from ..core.model import Problem
from .fast_markup import denied_fact
from .kit import PageKit


@dataclass(frozen=True, slots=True)
class CountsRow:
    calls: str
    ok: str
    failed: str
    cancelled: str
    failed_in_0ms: str
    denied: str
    failure_rate: str
    interval: str
    # Where the site knows denials (a denied call, or the other tables), their fact; else nothing,
    # so that a site of events without denials is what it was before denials were told.
    denied_fact: str = ""



def counts_row(counts: OutcomeCounts, kit: PageKit) -> CountsRow:
    number = kit.format.number
    return CountsRow(
        calls=number(counts.calls),
        ok=number(counts.ok),
        failed=number(counts.failed),
        cancelled=number(counts.cancelled),
        failed_in_0ms=number(counts.failed_in_0ms),
        denied=number(counts.denied),
        failure_rate=kit.format.percent(counts.failure_rate),
        interval=interval_text(counts.wilson_interval(), kit),
        denied_fact=denied_fact(kit, counts.denied),
    )


@dataclass(frozen=True, slots=True)
class ProblemRow:
    input: str
    row: str
    run: str | None
    sequence: str
    rule: str
    severity: str
    message: str


def problem_row(problem: Problem, kit: PageKit) -> ProblemRow:
    return ProblemRow(
        input=problem.input,
        row=kit.format.number(problem.row),
        run=problem.run,
        sequence="" if problem.sequence is None else kit.format.number(problem.sequence),
        rule=problem.rule.value,
        severity=problem.severity.value,
        message=problem.text(kit.gettext),
    )


@dataclass(frozen=True, slots=True)
class ServerRow:
    server: str
    href: str
    counts: CountsRow
    first_seen: str
    last_seen: str
    verdict: str
    verdict_label: str
    budget: str
    current_rate: str
    current_interval: str
    current_since: str
    latest_change: str
    cancelled_share: str
    failed_if_cancels_failed: str


def server_row(stats: ServerStats, health: ServerHealth, *, kit: PageKit, href: str) -> ServerRow:
    fmt = kit.format
    current = health.current
    return ServerRow(
        server=stats.server,
        href=href,
        counts=counts_row(stats.counts, kit),
        first_seen=fmt.datetime(stats.first_seen),
        last_seen=fmt.datetime(stats.last_seen),
        verdict=health.verdict.value,
        verdict_label=kit.verdict_labels[health.verdict.value],
        budget=fmt.percent(health.failure_budget),
        current_rate=fmt.percent(current.failures.rate),
        current_interval=interval_text(current.failures.interval, kit),
        current_since=fmt.date(current.since) if current.since else kit.gettext("all days"),
        latest_change=change_since_text(health.latest_change, kit),
        cancelled_share=fmt.percent(health.cancelled_share),
        failed_if_cancels_failed=fmt.percent(health.failure_rate_if_cancels_failed),
    )


def interval_text(interval: tuple[float, float] | None, kit: PageKit) -> str:
    return "–" if interval is None else f"{kit.format.percent(interval[0])} – {kit.format.percent(interval[1])}"


def rate_text(failures: Proportion, kit: PageKit) -> str:
    """``38.1% (20.8% – 59.1%)``: a rate with its interval, a dash without trials."""
    return ("–" if failures.rate is None
            else f"{kit.format.percent(failures.rate)} ({interval_text(failures.interval, kit)})")


def change_since_text(change: RateChange | None, kit: PageKit) -> str:
    """``worse since 14 Sep 2026`` for the latest change, a dash without one."""
    if change is None:
        return "–"
    day = kit.format.date(change.day)
    if change.direction is Direction.WORSE:
        return kit.gettext("worse since %(day)s") % {"day": day}
    return kit.gettext("better since %(day)s") % {"day": day}


@dataclass(frozen=True, slots=True)
class ChangeRow:
    day: str
    range: str
    direction: str
    direction_label: str
    before: str
    after: str
    probability: str
    recording_changed: bool


def change_rows(changes: Sequence[RateChange], kit: PageKit) -> list[ChangeRow]:
    """The changes of a rate, newest first, as the server page lists them."""
    fmt = kit.format
    labels = {"worse": kit.gettext("worse"), "better": kit.gettext("better")}
    return [
        ChangeRow(
            day=fmt.date(change.day),
            range=f"{fmt.date(change.earliest)} – {fmt.date(change.latest)}",
            direction=change.direction.value,
            direction_label=labels[change.direction.value],
            before=rate_text(change.before, kit),
            after=rate_text(change.after, kit),
            probability=fmt.percent(change.probability),
            recording_changed=change.recording_changed,
        )
        for change in reversed(changes)
    ]


