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
class ChartLabel:
    """Where a text of the chart stands."""

    x: int
    y: int


@dataclass(frozen=True, slots=True)
class DayFrame:
    """What a chart of days draws around its data, the same for the calls per day and the
    latency per day (they share the day axis): its size, the plot's band, the axis line, the
    peak's label, the first and last day's labels and where a change's mark stands."""

    width: int
    height: int
    plot_top: int
    plot_bottom: int
    plot_height: int
    axis_start: int  # the axis line runs from a little before the first bar to ``axis_end``
    axis_end: int
    bar_width: int
    peak: str
    peak_at: ChartLabel
    first_day: str
    first_day_at: ChartLabel
    last_day: str
    last_day_at: ChartLabel
    mark_top: int  # a change's line, from above the plot to the axis
    mark_label_y: int


@dataclass(frozen=True, slots=True)
class Chart:
    """The calls per day's every coordinate: ``templates/server.html`` prints them and adds nothing."""

    frame: DayFrame
    bars: tuple[ChartBar, ...]
    legacy_y: int  # the hatching under the axis
    legacy_height: int
    change_marks: tuple[ChartMark, ...] = ()
    current: ChartSpan | None = None  # the current period, shaded
    legacy: tuple[ChartSpan, ...] = ()  # days of rows written before ADR-191, hatched


@dataclass(frozen=True, slots=True)
class ChartMark:
    x: int
    label_x: int
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
CHART_AXIS_OVERHANG = 4  # the axis starts this far before the first bar
CHART_RIGHT_INSET = 16  # the axis ends, and the last day's label ends, this far from the right edge
CHART_LABEL_ABOVE = 6  # the peak's and the changes' labels stand this far above the plot
CHART_MARK_ABOVE = 4  # a change's line starts this far above the plot
CHART_LEGACY_BELOW = 2  # the hatching of pre-ADR-191 days, this far under the axis
CHART_LEGACY_HEIGHT = 4
CHART_FIRST_DAY_BELOW = 16  # the first and the last day's labels, under the axis (the last lower,
CHART_LAST_DAY_BELOW = 28  # so that the two never overlap)
CHART_TEXT_INSET = 4  # the peak's label, from the left edge
CHART_MARK_LABEL_GAP = 2  # a change's label, right of its line
CHART_BOTTOM_MARGIN = CHART_MARGIN + 10


def day_chart(days: dict[date, OutcomeCounts], kit: PageKit, *, health: ServerHealth | None = None) -> Chart | None:
    """Calls per day, ok / failed / cancelled stacked, every day of the span shown; with a
    server's ``health``, its changes marked, its current period shaded, pre-ADR-191 days hatched."""
    if not days:
        return None
    first, last = min(days), max(days)
    peak = max(counts.ok + counts.failed + counts.cancelled for counts in days.values()) or 1
    frame = day_frame(kit, (first, last), peak=kit.format.number(peak), below=CHART_BOTTOM_MARGIN)
    return Chart(
        frame=frame,
        bars=_day_bars(days, kit, first=first, peak=peak),
        legacy_y=frame.plot_bottom + CHART_LEGACY_BELOW,
        legacy_height=CHART_LEGACY_HEIGHT,
        **(_chart_marks(health, kit, first=first, last=last) if health is not None else {}),
    )


def _day_bars(days: dict[date, OutcomeCounts], kit: PageKit, *, first: date, peak: int) -> tuple[ChartBar, ...]:
    """A bar per day from ``first`` to the last of ``days``, its outcomes stacked, scaled to ``peak``."""
    bars = []
    bottom = CHART_MARGIN + CHART_PLOT_HEIGHT
    labels, number = kit.outcome_labels, kit.format.number
    for index in range((max(days) - first).days + 1):
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
        title = (f"{kit.format.date(day)}: {number(counts.ok)} {labels['ok']}, "
                 f"{number(counts.failed)} {labels['failed']}, {number(counts.cancelled)} {labels['cancelled']}")
        bars.append(ChartBar(day_x(first, day), tuple(segments), title))
    return tuple(bars)


def day_frame(kit: PageKit, span: tuple[date, date], *, peak: str, below: int) -> DayFrame:
    """The frame of a chart of the days of ``span`` (first, last), ``below`` its plot the room for the axis' texts."""
    first, last = span
    top, bottom = CHART_MARGIN, CHART_MARGIN + CHART_PLOT_HEIGHT
    width = CHART_MARGIN * 2 + ((last - first).days + 1) * (CHART_BAR_WIDTH + CHART_GAP)
    return DayFrame(
        width=width,
        height=bottom + below,
        plot_top=top,
        plot_bottom=bottom,
        plot_height=CHART_PLOT_HEIGHT,
        axis_start=CHART_MARGIN - CHART_AXIS_OVERHANG,
        axis_end=width - CHART_RIGHT_INSET,
        bar_width=CHART_BAR_WIDTH,
        peak=peak,
        peak_at=ChartLabel(CHART_TEXT_INSET, top - CHART_LABEL_ABOVE),
        first_day=kit.format.date(first),
        first_day_at=ChartLabel(CHART_MARGIN, bottom + CHART_FIRST_DAY_BELOW),
        last_day=kit.format.date(last),
        last_day_at=ChartLabel(width - CHART_RIGHT_INSET, bottom + CHART_LAST_DAY_BELOW),
        mark_top=top - CHART_MARK_ABOVE,
        mark_label_y=top - CHART_LABEL_ABOVE,
    )


def day_x(first: date, day: date) -> int:
    """Where the bar (or column) of ``day`` starts on a chart whose first day is ``first``."""
    return CHART_MARGIN + (day.toordinal() - first.toordinal()) * (CHART_BAR_WIDTH + CHART_GAP)


def change_mark(first: date, day: date, *, direction: str, label: str) -> ChartMark:
    """A change's mark, in the gap just before the bar of its ``day``."""
    x = day_x(first, day) - CHART_GAP // 2
    return ChartMark(x, x + CHART_MARK_LABEL_GAP, direction, label)


def _chart_marks(health: ServerHealth, kit: PageKit, *, first: date, last: date) -> dict[str, Any]:
    """Where the chart marks each change, shades the current period (from just before its first
    bar) and hatches pre-ADR-191 days."""
    step = CHART_BAR_WIDTH + CHART_GAP
    marks = tuple(
        change_mark(first, change.day, direction=change.direction.value,
                    label=kit.gettext("worse") if change.direction is Direction.WORSE else kit.gettext("better"))
        for change in health.changes
    )
    since = health.current.since
    current = (ChartSpan(day_x(first, since) - 1, day_x(first, last) + step - day_x(first, since))
               if since else None)
    legacy = tuple(ChartSpan(day_x(first, day), CHART_BAR_WIDTH) for day in health.legacy_days)
    return {"change_marks": marks, "current": current, "legacy": legacy}
