"""A server's latency on its pages: the figures, the histogram and the p50 / p90 per day (inline
SVG, like the calls per day), the slow share's changes, and the servers index's p90 and verdict.
Every word from the catalogs; the figures from ``aggregate.latencies``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any

from ..aggregate.changepoints import Change
from ..aggregate.latencies import HISTOGRAM_BINS, ServerLatency, bin_edges_ms
from ..aggregate.latency import Latency, Percentile, Percentiles, latency_direction
from ..core.model import N_, LatencyDirection, LatencyVerdict, Outcome
from .charts import (
    CHART_AXIS_OVERHANG,
    CHART_BAR_WIDTH,
    CHART_FIRST_DAY_BELOW,
    CHART_LABEL_ABOVE,
    CHART_MARGIN,
    CHART_PLOT_HEIGHT,
    CHART_TEXT_INSET,
    ChartLabel,
    ChartMark,
    DayFrame,
    change_mark,
    day_frame,
    day_x,
)
from .kit import PageKit
from .table_rows import ChangeRow, rate_text

LATENCY_VERDICT_LABEL_KEYS = {
    LatencyVerdict.SLOW: N_("verdict.slow"),
    LatencyVerdict.UNCERTAIN: N_("verdict.uncertain"),
    LatencyVerdict.TOO_FEW_CALLS: N_("verdict.too-few-calls"),
    LatencyVerdict.WITHIN_BUDGET: N_("verdict.within-budget"),
}
assert all(key == f"verdict.{verdict.value}" for verdict, key in LATENCY_VERDICT_LABEL_KEYS.items())
DIRECTION_LABELS = {LatencyDirection.SLOWER: N_("slower"), LatencyDirection.FASTER: N_("faster")}
HISTOGRAM_BAR_WIDTH = 14


def latency_label(kit: PageKit, verdict: LatencyVerdict) -> str:
    return kit.gettext(LATENCY_VERDICT_LABEL_KEYS[verdict])


def percentile_text(percentile: Percentile, kit: PageKit) -> str:
    """``1.2 s (0.9 s – 1.6 s)``: a percentile with its 95 % interval; a dash without calls."""
    if percentile.value_ms is None:
        return "–"
    text = kit.format.duration(percentile.value_ms)
    if percentile.interval_ms is None:
        return text
    low, high = percentile.interval_ms
    return f"{text} ({kit.format.duration(low)} – {kit.format.duration(high)})"


def index_cells(latency: ServerLatency | None, kit: PageKit) -> dict[str, str]:
    """The servers index's latency cells: the current period's p90 and the latency verdict."""
    if latency is None:
        return {"p90": "–", "latency_verdict": "", "latency_verdict_label": "–"}
    figures = latency.latency
    return {"p90": percentile_text(figures.timed.p90, kit), "latency_verdict": figures.verdict.value,
            "latency_verdict_label": latency_label(kit, figures.verdict)}


@dataclass(frozen=True, slots=True)
class PercentileRow:
    label: str
    calls: str
    p50: str
    p90: str
    p99: str


def percentile_rows(figures: Latency, kit: PageKit) -> list[PercentileRow]:
    """The percentiles of the current period, then of all days: of the ok and failed calls, of the ok,
    of the failed."""
    def row(label: str, of: Percentiles | None) -> PercentileRow | None:
        if of is None:
            return None
        return PercentileRow(label, kit.format.number(of.calls), percentile_text(of.p50, kit),
                             percentile_text(of.p90, kit), percentile_text(of.p99, kit))
    ok, failed, everyday = kit.outcome_labels[Outcome.OK], kit.outcome_labels[Outcome.FAILED], kit.gettext("All days")
    rows = [row(kit.gettext("Ok and failed"), figures.timed), row(ok, figures.ok), row(failed, figures.failed),
            row(everyday, figures.all_days), row(f"{everyday}: {ok}", figures.all_days_ok),
            row(f"{everyday}: {failed}", figures.all_days_failed)]
    return [found for found in rows if found is not None]


def latency_change_rows(changes: tuple[Change[date], ...], kit: PageKit) -> list[ChangeRow]:
    """The slow share's changes, newest first, as ``changes_table`` lists them."""
    fmt = kit.format
    return [
        ChangeRow(day=fmt.date(change.day), range=f"{fmt.date(change.earliest)} – {fmt.date(change.latest)}",
                  direction=change.direction.value,
                  direction_label=kit.gettext(DIRECTION_LABELS[latency_direction(change)]),
                  before=rate_text(change.before, kit), after=rate_text(change.after, kit),
                  probability=fmt.percent(change.probability), recording_changed=False)
        for change in reversed(changes)
    ]


def latency_context(latency: ServerLatency | None, kit: PageKit,
                    *, span: tuple[date, date] | None = None) -> dict[str, Any] | None:
    """What server.html's latency section shows, or None for a server without calls; ``span`` is the
    calls-per-day chart's first and last day, which the p50 / p90 per day share."""
    if latency is None:
        return None
    figures, fmt = latency.latency, kit.format
    left_out = figures.left_out
    return {
        "verdict": figures.verdict.value, "verdict_label": latency_label(kit, figures.verdict),
        "latency_budget": fmt.duration(figures.settings.latency_budget_ms),
        "slow_budget": fmt.percent(figures.settings.slow_budget), "slow": rate_text(figures.slow, kit),
        "near_timeout": rate_text(figures.near_timeout, kit),
        "call_timeout": fmt.duration(figures.settings.call_timeout_ms),
        "since": fmt.date(figures.since) if figures.since else kit.gettext("all days"),
        "rows": percentile_rows(figures, kit), "changes": latency_change_rows(figures.changes, kit),
        "cancelled": fmt.number(left_out.cancelled), "zero_ms": fmt.number(left_out.zero_ms),
        "denied": fmt.number(left_out.denied) if kit.denials_shown else None,
        "histogram": histogram_chart(latency, kit), "daily": daily_chart(latency, kit, span=span),
        "tools": [tool_row(name, tool, kit=kit) for name, tool in sorted(latency.tools.items())],
    }


def tool_row(name: str, figures: Latency, *, kit: PageKit) -> dict[str, str]:
    return {"name": name, "calls": kit.format.number(figures.timed.calls),
            "p50": percentile_text(figures.timed.p50, kit), "p90": percentile_text(figures.timed.p90, kit),
            "p99": percentile_text(figures.timed.p99, kit), "slow": rate_text(figures.slow, kit),
            "verdict": figures.verdict.value, "verdict_label": latency_label(kit, figures.verdict)}


# ---------------------------------------------------------------- the charts' geometry


@dataclass(frozen=True, slots=True)
class HistogramBar:
    x: int
    y: int
    height: int
    outcome: str
    title: str


@dataclass(frozen=True, slots=True)
class AxisText:
    """A text under the axis: where it stands, how it is anchored there, what it says."""

    at: ChartLabel
    anchor: str
    text: str


@dataclass(frozen=True, slots=True)
class Histogram:
    """The histogram's every coordinate: ``templates/latency.html`` prints them and adds nothing."""

    width: int
    height: int
    title: str
    axis_start: int
    axis_end: int
    plot_bottom: int
    peak: str
    peak_at: ChartLabel
    bar_width: int
    bars: tuple[HistogramBar, ...]
    edges: tuple[AxisText, AxisText]  # the first bin's lower edge and the last bin's upper edge


@dataclass(frozen=True, slots=True)
class DayHit:
    """A day's column, transparent, there to show the day's figures on hover: its date, p50 and
    p90, and its calls (the count, for the plural, and as shown)."""

    x: int
    day: str
    p50: str
    p90: str
    calls: int
    calls_shown: str


@dataclass(frozen=True, slots=True)
class DailyLatency:
    """The p50 / p90 per day chart's every coordinate, printed by ``templates/latency.html``; its
    frame is the calls per day's, on the same days."""

    frame: DayFrame
    title: str
    lines: tuple[tuple[str, str], ...]  # (percentile name, the polyline's points)
    hits: tuple[DayHit, ...]
    marks: tuple[ChartMark, ...]


CHART_BELOW_AXIS = 40  # the latency charts' room under the plot, for the axis' texts
HISTOGRAM_RIGHT_INSET = 4  # the histogram's axis, and its last edge's label, end this far from the right edge


def histogram_chart(latency: ServerLatency, kit: PageKit) -> Histogram | None:
    """Calls per log-scale bin of duration, ok and failed side by side in each bin (all days)."""
    peak = max((*latency.ok_bins, *latency.failed_bins), default=0)
    if not peak:
        return None
    used = [index for index in range(HISTOGRAM_BINS) if latency.ok_bins[index] or latency.failed_bins[index]]
    first, last = used[0], used[-1]
    bottom, step = CHART_MARGIN + CHART_PLOT_HEIGHT, 2 * HISTOGRAM_BAR_WIDTH + 4
    width = CHART_MARGIN * 2 + (last - first + 1) * step
    bars = []
    for index in range(first, last + 1):
        x = CHART_MARGIN + (index - first) * step
        low, high = bin_edges_ms(index)
        span = f"{kit.format.duration(low)} – {kit.format.duration(high)}"
        for offset, outcome, counts in ((0, "ok", latency.ok_bins),
                                        (HISTOGRAM_BAR_WIDTH, "failed", latency.failed_bins)):
            height = math.ceil(counts[index] * CHART_PLOT_HEIGHT / peak) if counts[index] else 0
            label = f"{span}: {kit.format.number(counts[index])} {kit.outcome_labels[outcome]}"
            bars.append(HistogramBar(x + offset, bottom - height, height, outcome, label))
    below = bottom + CHART_FIRST_DAY_BELOW
    edges = (AxisText(ChartLabel(CHART_MARGIN, below), "start", kit.format.duration(bin_edges_ms(first)[0])),
             AxisText(ChartLabel(width - HISTOGRAM_RIGHT_INSET, below), "end",
                      kit.format.duration(bin_edges_ms(last)[1])))
    return Histogram(
        width=width, height=bottom + CHART_BELOW_AXIS,
        title=kit.gettext("Calls by duration of %(server)s") % {"server": latency.server},
        axis_start=CHART_MARGIN - CHART_AXIS_OVERHANG, axis_end=width - HISTOGRAM_RIGHT_INSET, plot_bottom=bottom,
        peak=kit.format.number(peak), peak_at=ChartLabel(CHART_TEXT_INSET, CHART_MARGIN - CHART_LABEL_ABOVE),
        bar_width=HISTOGRAM_BAR_WIDTH, bars=tuple(bars), edges=edges,
    )


def _log_y(duration_ms: float, low: float, *, high: float, bottom: int) -> float:
    """Where a duration stands on the per-day chart's log axis from ``low`` to ``high``."""
    share = (math.log10(max(duration_ms, low)) - math.log10(low)) / (math.log10(high) - math.log10(low) or 1)
    return round(bottom - share * CHART_PLOT_HEIGHT, 1)


def daily_chart(latency: ServerLatency, kit: PageKit, *, span: tuple[date, date] | None = None) -> DailyLatency | None:
    """The p50 and p90 per day on the calls-per-day chart's day axis (log scale), slow-share changes marked."""
    days = latency.days
    if not days:
        return None
    first, last = span if span is not None else (days[0].day, days[-1].day)
    bottom = CHART_MARGIN + CHART_PLOT_HEIGHT
    low = max(1.0, min(day.p50_ms for day in days))
    high = max(low * 10, max(day.p90_ms for day in days))
    lines = tuple(
        (name, " ".join(f"{day_x(first, day.day) + CHART_BAR_WIDTH // 2},"
                        f"{_log_y(getattr(day, f'{name}_ms'), low, high=high, bottom=bottom)}" for day in days))
        for name in ("p50", "p90")
    )
    hits = tuple(
        DayHit(x=day_x(first, day.day), day=kit.format.date(day.day), p50=kit.format.duration(day.p50_ms),
               p90=kit.format.duration(day.p90_ms), calls=day.calls, calls_shown=kit.format.number(day.calls))
        for day in days
    )
    marks = tuple(
        change_mark(first, change.day, direction=change.direction.value,
                    label=kit.gettext(DIRECTION_LABELS[latency_direction(change)]))
        for change in latency.latency.changes
    )
    return DailyLatency(
        frame=day_frame(kit, (first, last), peak=kit.format.duration(high), below=CHART_BELOW_AXIS),
        title=kit.gettext("p50 and p90 per day of %(server)s") % {"server": latency.server},
        lines=lines, hits=hits, marks=marks,
    )
