"""The per-day chart's geometry, all of it: the template only prints its numbers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from ..aggregate.changepoints import Direction
from ..aggregate.figures import OutcomeCounts
from ..aggregate.health import ServerHealth
from ..core.model import Outcome
from .kit import PageKit


@dataclass(frozen=True, slots=True)
class ChartBar:
    x: int
    segments: tuple[tuple[str, int, int], ...]  # (outcome value, y, height)
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    plot_top: int
    plot_bottom: int
    bar_width: int
    bars: tuple[ChartBar, ...]
    first_day: str
    last_day: str
    max_calls: str
    change_marks: tuple[ChartMark, ...] = ()
    current: ChartSpan | None = None  # the current period, shaded
    legacy: tuple[ChartSpan, ...] = ()  # days of rows written before ADR-191, hatched


@dataclass(frozen=True, slots=True)
class ChartMark:
    x: int
    direction: str
    label: str


@dataclass(frozen=True, slots=True)
class ChartSpan:
    x: int
    width: int


CHART_BAR_WIDTH = 10
CHART_GAP = 2
CHART_PLOT_HEIGHT = 120
CHART_MARGIN = 20


def day_chart(days: dict[date, OutcomeCounts], kit: PageKit, health: ServerHealth | None = None) -> Chart | None:
    """Calls per day, ok / failed / cancelled stacked, every day of the span shown; with a
    server's ``health``, its changes marked, its current period shaded, pre-ADR-191 days hatched."""
    if not days:
        return None
    first, last = min(days), max(days)
    span = (last - first).days + 1
    peak = max(counts.ok + counts.failed + counts.cancelled for counts in days.values()) or 1
    bars = []
    bottom = CHART_MARGIN + CHART_PLOT_HEIGHT
    for index in range(span):
        day = date.fromordinal(first.toordinal() + index)
        counts = days.get(day, OutcomeCounts())
        y = bottom
        segments = []
        for outcome in Outcome:
            value = counts.of(outcome)
            height = round(value * CHART_PLOT_HEIGHT / peak)
            if value and height == 0:
                height = 1
            y -= height
            if height:
                segments.append((outcome.value, y, height))
        labels, number = kit.outcome_labels, kit.format.number
        title = (f"{kit.format.date(day)}: {number(counts.ok)} {labels['ok']}, "
                 f"{number(counts.failed)} {labels['failed']}, {number(counts.cancelled)} {labels['cancelled']}")
        bars.append(ChartBar(CHART_MARGIN + index * (CHART_BAR_WIDTH + CHART_GAP), tuple(segments), title))
    width = CHART_MARGIN * 2 + span * (CHART_BAR_WIDTH + CHART_GAP)
    return Chart(
        width=width,
        height=bottom + CHART_MARGIN + 10,
        plot_top=CHART_MARGIN,
        plot_bottom=bottom,
        bar_width=CHART_BAR_WIDTH,
        bars=tuple(bars),
        first_day=kit.format.date(first),
        last_day=kit.format.date(last),
        max_calls=kit.format.number(peak),
        **(_chart_marks(health, first, last, kit) if health is not None else {}),
    )


def _day_x(first: date, day: date) -> int:
    return CHART_MARGIN + (day.toordinal() - first.toordinal()) * (CHART_BAR_WIDTH + CHART_GAP)


def _chart_marks(health: ServerHealth, first: date, last: date, kit: PageKit) -> dict[str, Any]:
    """Where the chart marks each change, shades the current period and hatches pre-ADR-191 days."""
    step = CHART_BAR_WIDTH + CHART_GAP
    marks = tuple(
        ChartMark(_day_x(first, change.day) - CHART_GAP // 2, change.direction.value,
                  kit.gettext("worse") if change.direction is Direction.WORSE else kit.gettext("better"))
        for change in health.changes
    )
    since = health.current.since
    current = ChartSpan(_day_x(first, since), _day_x(first, last) + step - _day_x(first, since)) if since else None
    legacy = tuple(ChartSpan(_day_x(first, day), CHART_BAR_WIDTH) for day in health.legacy_days)
    return {"change_marks": marks, "current": current, "legacy": legacy}


