"""The figures as JSON and back, as the input cache keeps a swept partition's."""

from __future__ import annotations

from dataclasses import fields
from datetime import date
from typing import Any

from .figures import OutcomeCounts, RunSummary, ServerStats, SiteFigures, ToolStats
from .latencies import calls_of, calls_record
from .whole_run import Spend, Tokens

COUNT_FIELDS = tuple(count.name for count in fields(OutcomeCounts))  # a counts record's order


def _counts_record(counts: OutcomeCounts) -> list[int]:
    return [getattr(counts, name) for name in COUNT_FIELDS]


def _counts_of(record: list[int]) -> OutcomeCounts:
    if len(record) != len(COUNT_FIELDS):  # a record of an older version: its input is swept again
        raise ValueError(f"counts record of {len(record)} numbers, expected {len(COUNT_FIELDS)}")
    return OutcomeCounts(*record)


def _server_record(stats: ServerStats) -> list[Any]:
    return [
        stats.server, stats.slug, _counts_record(stats.counts), stats.first_seen, stats.last_seen,
        [[tool.name, _counts_record(tool.counts), tool.first_seen, tool.last_seen,
          [[run, _counts_record(counts)] for run, counts in tool.runs.items()]] for tool in stats.tools.values()],
        [[day.isoformat(), _counts_record(counts)] for day, counts in stats.days.items()],
        [[run, _counts_record(counts)] for run, counts in stats.runs.items()],
        sorted(day.isoformat() for day in stats.legacy_days),
    ]


def _server_of(record: list[Any]) -> ServerStats:
    server, slug_, counts, first, last, tools, days, runs, legacy = record
    return ServerStats(
        server, slug_, _counts_of(counts), first, last,
        {name: ToolStats(name, _counts_of(tool_counts), tool_first, tool_last,
                         {run: _counts_of(run_counts) for run, run_counts in tool_runs})
         for name, tool_counts, tool_first, tool_last, tool_runs in tools},
        {date.fromisoformat(day): _counts_of(day_counts) for day, day_counts in days},
        {run: _counts_of(run_counts) for run, run_counts in runs}, {date.fromisoformat(day) for day in legacy},
    )


def figures_record(figures: SiteFigures) -> dict[str, Any]:
    """The figures as JSON; ``figures_from_record`` reads them back."""
    return {
        "timezone": figures.timezone_name,
        "summaries": [
            [summary.run, summary.slug, summary.start, summary.end, summary.duration_ms, summary.steps,
             summary.tool_calls, _counts_record(summary.counts), list(summary.servers),
             list(summary.tools)]
            for summary in figures.runs
        ],
        "servers": [_server_record(stats) for stats in figures.by_server.values()],
        "outcomes": _counts_record(figures.outcomes),
        "time_range": list(figures.time_range) if figures.time_range is not None else None,
        "spend": [[run, spend.tokens.prompt, spend.tokens.completion, spend.tokens.total, spend.cost]
                  for run, spend in figures.spend.items()],
        "latency_calls": calls_record(figures.latency_calls),
    }


def figures_from_record(record: dict[str, Any]) -> SiteFigures:
    figures = SiteFigures(record["timezone"])
    figures.runs = [
        RunSummary(run, slug, start, end, float(duration), steps, calls, _counts_of(counts), tuple(servers),
                   tuple(tools))
        for run, slug, start, end, duration, steps, calls, counts, servers, tools in record["summaries"]
    ]
    figures.by_server = {stats.server: stats for stats in map(_server_of, record["servers"])}
    figures.outcomes = _counts_of(record["outcomes"])
    time_range = record["time_range"]
    figures.time_range = (time_range[0], time_range[1]) if time_range is not None else None
    figures.spend = {run: Spend(Tokens(prompt, completion, total), cost)
                     for run, prompt, completion, total, cost in record["spend"]}
    figures.latency_calls = calls_of(record["latency_calls"])  # KeyError: a record of an older version
    return figures
