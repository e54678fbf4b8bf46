"""Each server's and tool's latency, wired through the build: the calls a partition hands on, and
the figures made of them once every partition is in (``aggregate.latency`` holds the statistics).

What crosses partitions is one compact Arrow table of the MCP calls (LATENCY_CALLS_SCHEMA): server,
tool, day, duration, outcome and whether a denial explains the call; nothing per call in Python
objects. The percentiles are exact (nearest rank), so the durations themselves are kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .denials import DENIAL_COLUMN
from .latency import FAILED_COLUMN, Latency, LatencySettings, latency_figures, nearest_rank, timed_calls

LATENCY_CALLS_SCHEMA = pa.schema([
    ("server", pa.string()), ("toolName", pa.string()), ("day", pa.date32()), ("durationMs", pa.float64()),
    ("outcome", pa.string()), ("denied", pa.bool_()),
])
# The histogram's bins: four a decade from 1 ms (bin i holds [10^(i/4), 10^((i+1)/4)) ms), the first
# also holding anything shorter, the last anything longer (10^6 ms: over 16 minutes).
BINS_PER_DECADE = 4
HISTOGRAM_BINS = 6 * BINS_PER_DECADE


def empty_calls() -> pa.Table:
    return LATENCY_CALLS_SCHEMA.empty_table()


def latency_calls(tools: pa.Table, days: pa.ChunkedArray | pa.Array) -> pa.Table:
    """The MCP calls of the tool steps (``figures.tool_steps``) with their local ``days``."""
    with_server = pc.is_valid(tools.column("server"))
    table = pa.table({
        "server": tools.column("server"), "toolName": pc.fill_null(tools.column("toolName"), ""),
        "day": days, "durationMs": pc.cast(tools.column("durationMs"), pa.float64()),
        "outcome": tools.column("outcome"), "denied": pc.is_valid(tools.column(DENIAL_COLUMN)),
    }).filter(with_server)
    return table.cast(LATENCY_CALLS_SCHEMA)


def joined_calls(left: pa.Table, right: pa.Table) -> pa.Table:
    """The calls of two parts of the runs."""
    if right.num_rows == 0:
        return left
    return right if left.num_rows == 0 else pa.concat_tables([left, right])


def calls_record(calls: pa.Table) -> dict[str, list[Any]]:
    """The calls as JSON columns (days as days since 1970-01-01: Arrow's date32, no Python dates);
    ``calls_of`` reads them back."""
    record = {name: calls.column(name).to_pylist() for name in LATENCY_CALLS_SCHEMA.names if name != "day"}
    record["day"] = pc.cast(calls.column("day"), pa.int32()).to_pylist()
    return record


def calls_of(record: dict[str, list[Any]]) -> pa.Table:
    columns = {name: pa.array(record[name], LATENCY_CALLS_SCHEMA.field(name).type)
               for name in LATENCY_CALLS_SCHEMA.names if name != "day"}
    columns["day"] = pa.array(record["day"], pa.int32()).cast(pa.date32())
    return pa.table(columns).select(LATENCY_CALLS_SCHEMA.names).cast(LATENCY_CALLS_SCHEMA)


# ---------------------------------------------------------------- one server's figures


@dataclass(frozen=True, slots=True)
class DayPercentiles:
    """One day's p50 and p90 of the timed calls (all days, not only the current period)."""

    day: date
    calls: int
    p50_ms: float
    p90_ms: float


@dataclass(frozen=True, slots=True)
class ServerLatency:
    """A server's latency, its tools', its histogram (all days: ok and failed apart) and its days."""

    server: str
    latency: Latency
    tools: dict[str, Latency]
    ok_bins: tuple[int, ...]
    failed_bins: tuple[int, ...]
    days: tuple[DayPercentiles, ...]


def bin_of(duration_ms: float) -> int:
    """The histogram bin of a duration."""
    if duration_ms < 1:
        return 0
    return min(HISTOGRAM_BINS - 1, int(math.floor(math.log10(duration_ms) * BINS_PER_DECADE)))


def bin_edges_ms(index: int) -> tuple[float, float]:
    """The durations bin ``index`` spans: from the first up to (not including) the second."""
    return 10 ** (index / BINS_PER_DECADE), 10 ** ((index + 1) / BINS_PER_DECADE)


def histogram(durations_ms: pa.Array | pa.ChunkedArray) -> tuple[int, ...]:
    """How many durations fall in each log-scale bin."""
    clipped = pc.max_element_wise(durations_ms, pa.scalar(1.0, pa.float64()))
    bins = pc.floor(pc.multiply(pc.log10(clipped), pa.scalar(float(BINS_PER_DECADE), pa.float64())))
    bins = pc.min_element_wise(bins, pa.scalar(float(HISTOGRAM_BINS - 1), pa.float64()))
    counts = pc.value_counts(pc.cast(bins, pa.int64()))
    found = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
    return tuple(int(found.get(index, 0)) for index in range(HISTOGRAM_BINS))


def daily_percentiles(timed: pa.Table) -> tuple[DayPercentiles, ...]:
    """Per day with timed calls its nearest-rank p50 and p90, exactly: one sort, then index arithmetic."""
    dated = timed.filter(pc.is_valid(timed.column("day")))
    if dated.num_rows == 0:
        return ()
    ordered = dated.sort_by([("day", "ascending"), ("durationMs", "ascending")])
    counts = pc.value_counts(ordered.column("day").combine_chunks())
    pairs = sorted(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
    durations = ordered.column("durationMs").combine_chunks()
    result, offset = [], 0
    for day, calls in pairs:
        p50 = durations[offset + nearest_rank(calls, 0.5) - 1].as_py()
        p90 = durations[offset + nearest_rank(calls, 0.9) - 1].as_py()
        result.append(DayPercentiles(day, int(calls), float(p50), float(p90)))
        offset += calls
    return tuple(result)


def _figures(calls: pa.Table, settings: LatencySettings) -> Latency:
    return latency_figures(calls.column("durationMs"), calls.column("outcome"), days=calls.column("day"),
                           settings=settings, denied=calls.column("denied"), ordered=True)


def server_latency(server: str, calls: pa.Table, *, settings: LatencySettings) -> ServerLatency:
    """One server's latency from its calls, shortest first (a tool's, filtered from them, stay so);
    its tools judged against its settings."""
    tool_names = sorted(pc.unique(calls.column("toolName")).to_pylist())
    tools = {name: _figures(calls.filter(pc.equal(calls.column("toolName"), pa.scalar(name, pa.string()))), settings)
             for name in tool_names}
    timed, _ = timed_calls(calls.column("durationMs"), calls.column("outcome"), days=calls.column("day"),
                           denied=calls.column("denied"))
    failed = timed.column(FAILED_COLUMN)
    return ServerLatency(
        server=server, latency=_figures(calls, settings), tools=tools,
        ok_bins=histogram(timed.filter(pc.invert(failed)).column("durationMs")),
        failed_bins=histogram(timed.filter(failed).column("durationMs")),
        days=daily_percentiles(timed),
    )


def server_latencies(calls: pa.Table, settings_for: Callable[[str], LatencySettings]) -> dict[str, ServerLatency]:
    """Every server's latency, against the settings ``settings_for`` gives it."""
    if calls.num_rows == 0:
        return {}
    # One sort of the durations (sorting by the server's string as well costs more than all the rest).
    ordered = calls.sort_by([("durationMs", "ascending")])
    servers = ordered.column("server")
    return {server: server_latency(server, ordered.filter(pc.equal(servers, pa.scalar(server, pa.string()))),
                                   settings=settings_for(server))
            for server in sorted(pc.unique(servers).to_pylist())}
