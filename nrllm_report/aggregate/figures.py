"""Runs, servers and flakiness figures from validated steps. Pure: data in, data out.

A cancelled call is never a server's fault (ADR-191): the failure rate is
failed / (ok + failed), and cancelled calls are counted beside it, never in it. A denied
call (``aggregate.denials``: the operator or a policy refused it, its outcome string still
``failed``) is not the server's fault either: it is counted as ``denied``, not as failed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

import pyarrow as pa
import pyarrow.compute as pc

from ..core.model import TOOL_KIND, Outcome
from ..core.pickled import pickled_as_fields
from ..core.slugs import slug
from .denials import DENIAL_COLUMN, DENIAL_TYPE
from .latencies import empty_calls, joined_calls, latency_calls
from .verdicts import Proportion
from .whole_run import Spend, Tokens


@pickled_as_fields
@dataclass(slots=True)
class OutcomeCounts:
    """Tool calls by outcome; ``unstated`` are tool steps without a flag.

    ``denied`` are the calls whose outcome is ``failed`` that a denial explains (the
    operator's or a policy's): kept apart, they are in ``calls`` but neither in ``failed``
    nor in ``decisive``, so a denial never counts in a failure rate, like a cancel.
    ``failed`` are the other failed calls. ``failed_in_0ms`` are those of them that took
    0 ms: mostly calls nr-llm refused itself that nothing explains (a tool no longer
    permitted, an unknown tool, a spent call budget), which the rows cannot tell from a
    server's failure. They stay failed.
    """

    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    unstated: int = 0
    failed_in_0ms: int = 0
    denied: int = 0

    def add(self, outcome: Outcome | None) -> None:
        if outcome is Outcome.OK:
            self.ok += 1
        elif outcome is Outcome.FAILED:
            self.failed += 1
        elif outcome is Outcome.CANCELLED:
            self.cancelled += 1
        else:
            self.unstated += 1

    def absorb(self, other: OutcomeCounts) -> None:
        self.ok += other.ok
        self.failed += other.failed
        self.cancelled += other.cancelled
        self.unstated += other.unstated
        self.failed_in_0ms += other.failed_in_0ms
        self.denied += other.denied

    def of(self, outcome: Outcome) -> int:
        return int(getattr(self, outcome.name.lower()))

    @property
    def calls(self) -> int:
        return self.ok + self.failed + self.cancelled + self.unstated + self.denied

    @property
    def decisive(self) -> int:
        """Calls that say something about the server: ok and failed, never cancelled or denied."""
        return self.ok + self.failed

    @property
    def failures(self) -> Proportion:
        """Failed of ok + failed calls: the failure rate and its interval (ADR-191)."""
        return Proportion(self.failed, self.decisive)

    @property
    def failure_rate(self) -> float | None:
        return self.failures.rate

    def wilson_interval(self) -> tuple[float, float] | None:
        return self.failures.interval


@pickled_as_fields
@dataclass(slots=True)
class RunSummary:
    """One row of the run index."""

    run: str
    slug: str
    start: int | None
    end: int | None
    duration_ms: float
    steps: int
    tool_calls: int
    counts: OutcomeCounts
    servers: tuple[str, ...]
    tools: tuple[str, ...] = ()  # the tools it called, by name (the run index's filter)

    @property
    def has_failure(self) -> bool:
        return self.counts.failed > 0


def newest_first(runs: Iterable[RunSummary]) -> list[RunSummary]:
    """Runs by start, newest first; runs without a time last; ties by run id."""
    return sorted(runs, key=lambda run: (run.start is None, -(run.start or 0), run.run))


@pickled_as_fields
@dataclass(slots=True)
class ToolStats:
    name: str
    counts: OutcomeCounts = field(default_factory=OutcomeCounts)
    first_seen: int | None = None
    last_seen: int | None = None
    runs: dict[str, OutcomeCounts] = field(default_factory=dict)  # every run that called it: its calls of it


@pickled_as_fields
@dataclass(slots=True)
class ServerStats:
    """Everything the servers pages show about one MCP server."""

    server: str
    slug: str
    counts: OutcomeCounts = field(default_factory=OutcomeCounts)
    first_seen: int | None = None
    last_seen: int | None = None
    tools: dict[str, ToolStats] = field(default_factory=dict)
    days: dict[date, OutcomeCounts] = field(default_factory=dict)
    runs: dict[str, OutcomeCounts] = field(default_factory=dict)  # every run that called it: its calls there
    # Days with calls from rows written before ADR-191, whose failures may include cancels.
    legacy_days: set[date] = field(default_factory=set)

    def runs_with(self, outcome: Outcome) -> dict[str, int]:
        """The runs with calls of ``outcome`` to this server, and how many each made."""
        return {run: count for run, counts in self.runs.items() if (count := counts.of(outcome))}

# ---------------------------------------------------------------- from the table of checked steps

OUTCOME_FLAGS = {outcome: f"is_{outcome.value}" for outcome in Outcome}


def _with_outcome_flags(table: pa.Table) -> pa.Table:
    """0/1 columns per outcome (and for no outcome, failed in 0 ms and denied), so group sums
    count them; a denied call is counted as denied, not under its outcome string ``failed``."""
    outcome = table.column("outcome")
    denied = pc.is_valid(table.column(DENIAL_COLUMN))
    undenied = pc.invert(denied)
    for value, name in OUTCOME_FLAGS.items():
        flag = pc.fill_null(pc.equal(outcome, value.value), False)
        if value is Outcome.FAILED:
            flag = pc.and_(flag, undenied)
        table = table.append_column(name, pc.cast(flag, pa.int64()))
    table = table.append_column("is_unstated", pc.cast(pc.is_null(outcome), pa.int64()))
    in_0ms = pc.and_(pc.equal(outcome, Outcome.FAILED.value), pc.equal(table.column("durationMs"), 0.0))
    in_0ms = pc.and_(in_0ms, undenied)
    table = table.append_column("is_failed_in_0ms", pc.cast(pc.fill_null(in_0ms, False), pa.int64()))
    return table.append_column("is_denied", pc.cast(denied, pa.int64()))


EXTRA_FLAGS = ("is_unstated", "is_failed_in_0ms", "is_denied")
COUNT_AGGREGATES = [(name, "sum") for name in [*OUTCOME_FLAGS.values(), *EXTRA_FLAGS]]
# The sums in the order OutcomeCounts takes them.
COUNT_COLUMNS = [f"{OUTCOME_FLAGS[outcome]}_sum" for outcome in (Outcome.OK, Outcome.FAILED, Outcome.CANCELLED)] + [
    f"{name}_sum" for name in EXTRA_FLAGS
]


def _counts(row: dict[str, int]) -> OutcomeCounts:
    return OutcomeCounts(*(row[name] for name in COUNT_COLUMNS))


# The columns the figures read of a tool step: filtering only these copies a fraction of the rows' bytes.
TOOL_FIGURE_COLUMNS = ("run", "sequence", "crdate", "durationMs", "outcome", "outcomeStated", "server", "toolName",
                       DENIAL_COLUMN)


def tool_steps(steps: pa.Table) -> pa.Table:
    """The tool steps of the table, the columns the figures read and outcome flag columns.

    Steps without a ``denial`` column (``aggregate.denials``) have no denied call."""
    if DENIAL_COLUMN not in steps.column_names:
        steps = steps.append_column(pa.field(DENIAL_COLUMN, DENIAL_TYPE), pa.nulls(steps.num_rows, DENIAL_TYPE))
    tools = steps.select(list(TOOL_FIGURE_COLUMNS)).filter(pc.equal(steps.column("kind"), TOOL_KIND))
    return _with_outcome_flags(tools)


def run_summaries(steps: pa.Table, tools: pa.Table, *, ordered: bool = True) -> list[RunSummary]:
    """One index row per run, newest first (in the table's order unless ``ordered``)."""
    group = {"use_threads": False}
    per_run = steps.group_by("run", **group).aggregate(
        [("crdate", "min"), ("crdate", "max"), ("durationMs", "sum"), ("sequence", "count")]
    )
    tool_counts = tools.group_by("run", **group).aggregate(COUNT_AGGREGATES)
    counts_by_run = {
        run: OutcomeCounts(*counts)
        for run, *counts in zip(*(tool_counts.column(name).to_pylist() for name in ["run", *COUNT_COLUMNS]))
    }
    with_server = tools.filter(pc.is_valid(tools.column("server")))
    distinct = with_server.group_by("run", **group).aggregate([("server", "distinct")])
    names: dict[str, str] = {}  # one string object per server name, not one per run
    servers = {
        run: tuple(sorted(names.setdefault(server, server) for server in run_servers))
        for run, run_servers in zip(distinct.column("run").to_pylist(), distinct.column("server_distinct").to_pylist())
    }
    tools_by_run = run_tools(tools, names)
    columns = [per_run.column(name).to_pylist()
               for name in ("run", "crdate_min", "crdate_max", "durationMs_sum", "sequence_count")]
    summaries = []
    for run, start, end, duration, step_count in zip(*columns):
        counts = counts_by_run.get(run) or OutcomeCounts()
        summaries.append(
            RunSummary(run, slug(run), start, end, duration, step_count, counts.calls, counts, servers.get(run, ()),
                       tools_by_run.get(run, ()))
        )
    return newest_first(summaries) if ordered else summaries


def run_tools(tools: pa.Table, names: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Each run's tools by name, sorted; ``names`` keeps one string object per name."""
    named = tools.filter(pc.is_valid(tools.column("toolName")))
    distinct = named.group_by("run", use_threads=False).aggregate([("toolName", "distinct")])
    return {
        run: tuple(sorted(names.setdefault(tool, tool) for tool in run_tools))
        for run, run_tools in zip(distinct.column("run").to_pylist(), distinct.column("toolName_distinct").to_pylist())
    }


SPEND_COLUMNS = ("promptTokens", "completionTokens", "totalTokens", "estimatedCost")


def run_spend(steps: pa.Table) -> dict[str, Spend]:
    """What each run's steps say it spent (tokens and cost of its llm steps), for runs whose steps say any."""
    stated = None
    for column in SPEND_COLUMNS:
        valid = pc.is_valid(steps.column(column))
        stated = valid if stated is None else pc.or_(stated, valid)
    spending = steps.select(["run", *SPEND_COLUMNS]).filter(stated)
    if spending.num_rows == 0:
        return {}
    sums = spending.group_by("run", use_threads=False).aggregate(
        [(column, "sum", pc.ScalarAggregateOptions(min_count=1)) for column in SPEND_COLUMNS])
    columns = [sums.column(name).to_pylist() for name in ["run", *(f"{column}_sum" for column in SPEND_COLUMNS)]]
    return {run: Spend(Tokens(prompt, completion, total), cost)
            for run, prompt, completion, total, cost in zip(*columns)}


def outcome_totals(tools: pa.Table) -> OutcomeCounts:
    """Every rendered tool step by outcome, local tools included."""
    sums = {name: pc.sum(tools.column(name)).as_py() or 0 for name in [*OUTCOME_FLAGS.values(), *EXTRA_FLAGS]}
    return _counts({f"{name}_sum": value for name, value in sums.items()})


def local_days(crdate: pa.ChunkedArray, timezone_name: str) -> pa.ChunkedArray:
    """The calendar day of each time in the report's time zone."""
    moments = pc.cast(crdate, pa.timestamp("s", tz="UTC"))
    if timezone_name != "UTC":
        moments = pc.local_timestamp(pc.cast(moments, pa.timestamp("s", tz=timezone_name)))
    return pc.cast(pc.cast(moments, pa.timestamp("s")), pa.date32())


def server_stats(tools: pa.Table, timezone_name: str) -> list[ServerStats]:
    """Per MCP server: calls by outcome, tools, calls per day, runs with failed or cancelled calls."""
    calls = tools.filter(pc.is_valid(tools.column("server")))
    calls = calls.append_column("day", local_days(calls.column("crdate"), timezone_name))
    group = {"use_threads": False}
    times = [("crdate", "min"), ("crdate", "max")]
    stats: dict[str, ServerStats] = {}
    for row in calls.group_by("server", **group).aggregate(COUNT_AGGREGATES + times).to_pylist():
        server = row["server"]
        stats[server] = ServerStats(server, slug(server), _counts(row), row["crdate_min"], row["crdate_max"])
    for row in calls.group_by(["server", "toolName"], **group).aggregate(COUNT_AGGREGATES + times).to_pylist():
        name = row["toolName"] or ""
        stats[row["server"]].tools[name] = ToolStats(name, _counts(row), row["crdate_min"], row["crdate_max"])
    dated = calls.filter(pc.is_valid(calls.column("day")))
    for row in dated.group_by(["server", "day"], **group).aggregate(COUNT_AGGREGATES).to_pylist():
        stats[row["server"]].days[row["day"]] = _counts(row)
    legacy = dated.filter(pc.equal(dated.column("outcomeStated"), False))
    for row in legacy.group_by(["server", "day"], **group).aggregate([]).to_pylist():
        stats[row["server"]].legacy_days.add(row["day"])
    per_run = calls.group_by(["server", "run"], **group).aggregate(COUNT_AGGREGATES)
    for server, run, *counts in zip(*(per_run.column(name).to_pylist() for name in ["server", "run", *COUNT_COLUMNS])):
        stats[server].runs[run] = OutcomeCounts(*counts)
    per_tool_run = calls.group_by(["server", "toolName", "run"], **group).aggregate(COUNT_AGGREGATES)
    columns = ["server", "toolName", "run", *COUNT_COLUMNS]
    for server, name, run, *counts in zip(*(per_tool_run.column(column).to_pylist() for column in columns)):
        stats[server].tools[name or ""].runs[run] = OutcomeCounts(*counts)
    return rank_servers(stats.values())


def rank_servers(servers: Iterable[ServerStats]) -> list[ServerStats]:
    """Worst first by the interval's lower bound, so three calls cannot top the list."""

    def rank(stats: ServerStats) -> tuple[float, float, str]:
        interval = stats.counts.wilson_interval()
        lower = interval[0] if interval else -1.0
        rate = stats.counts.failure_rate
        return (-lower, -(rate if rate is not None else -1.0), stats.server)

    return sorted(servers, key=rank)


def _earliest(left: int | None, right: int | None) -> int | None:
    return right if left is None else left if right is None else min(left, right)


def _latest(left: int | None, right: int | None) -> int | None:
    return right if left is None else left if right is None else max(left, right)


def _absorb_server(into: ServerStats, other: ServerStats) -> None:
    """Add the figures of ``other`` (the same server, other runs) to ``into``."""
    into.counts.absorb(other.counts)
    into.first_seen = _earliest(into.first_seen, other.first_seen)
    into.last_seen = _latest(into.last_seen, other.last_seen)
    for name, tool in other.tools.items():
        if name not in into.tools:
            into.tools[name] = tool
            continue
        mine = into.tools[name]
        mine.counts.absorb(tool.counts)
        mine.first_seen = _earliest(mine.first_seen, tool.first_seen)
        mine.last_seen = _latest(mine.last_seen, tool.last_seen)
        mine.runs.update(tool.runs)
    for day, counts in other.days.items():
        into.days.setdefault(day, OutcomeCounts()).absorb(counts)
    into.runs.update(other.runs)
    into.legacy_days |= other.legacy_days


class SiteFigures:
    """The figures of the overview pages, added up part by part (runs never span parts).

    Only these aggregates outlive a part: one summary per run, the servers, the totals.
    """

    def __init__(self, timezone_name: str) -> None:
        self.timezone_name = timezone_name
        self.runs: list[RunSummary] = []
        self.by_server: dict[str, ServerStats] = {}
        self.outcomes = OutcomeCounts()
        self.time_range: tuple[int, int] | None = None
        self.spend: dict[str, Spend] = {}  # what the steps of a run say it spent, where they say any
        self.latency_calls: pa.Table = empty_calls()  # the MCP calls' durations (aggregate.latencies)

    @classmethod
    def of(cls, steps: pa.Table, timezone_name: str) -> SiteFigures:
        """The figures of the steps of whole runs, sorted by run and sequence."""
        figures = cls(timezone_name)
        tools = tool_steps(steps)
        figures.runs = run_summaries(steps, tools, ordered=False)
        figures.by_server = {stats.server: stats for stats in server_stats(tools, timezone_name)}
        figures.outcomes = outcome_totals(tools)
        figures.time_range = time_range(steps)
        figures.spend = run_spend(steps)
        figures.latency_calls = latency_calls(tools, local_days(tools.column("crdate"), timezone_name))
        return figures

    def absorb(self, other: SiteFigures) -> None:
        """Add the figures of other runs."""
        self.runs.extend(other.runs)
        for server, stats in other.by_server.items():
            if server in self.by_server:
                _absorb_server(self.by_server[server], stats)
            else:
                self.by_server[server] = stats
        self.outcomes.absorb(other.outcomes)
        self.spend.update(other.spend)
        self.latency_calls = joined_calls(self.latency_calls, other.latency_calls)
        if other.time_range is not None:
            first, last = self.time_range or other.time_range
            self.time_range = (min(first, other.time_range[0]), max(last, other.time_range[1]))

    @property
    def summaries(self) -> list[RunSummary]:
        """Every run, newest first."""
        return newest_first(self.runs)

    @property
    def servers(self) -> list[ServerStats]:
        return rank_servers(self.by_server.values())


def time_range(steps: pa.Table) -> tuple[int, int] | None:
    bounds = pc.min_max(steps.column("crdate")).as_py()
    if bounds["min"] is None:
        return None
    return bounds["min"], bounds["max"]
