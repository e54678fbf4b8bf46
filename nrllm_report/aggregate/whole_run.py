"""The whole run: the run row, its provider calls and governance decisions joined to its steps.

Joins as nr-llm makes them (``../shared/domain.md``, "The other tables"): the events'
``run`` is the run row's ``uid``, or, in exports that replaced it, its ``uuid``;
a provider call's ``correlation_id`` is the run's ``uuid``; a governance decision
names its run by ``agentrun_uid`` or ``correlation_id``. A row that names no run of
the events (telemetry of other extensions, runs already purged) is counted per table
in ``unmatched`` and left out. Metadata only: nothing here holds content.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import marshal
import statistics
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from ..core.model import Outcome
from ..core.pickled import pickled_as_fields
from ..core.tables import (
    CALLS_TABLE,
    GOVERNANCE_TABLE,
    RUN_STATUSES,
    RUNS_TABLE,
    SERVERS_TABLE,
    TERMINATION_REASONS,
    TOOL_DENIED,
    TOOLS_TABLE,
    ServerTruths,
)

WHOLE_RUN_TABLES = (RUNS_TABLE, CALLS_TABLE, GOVERNANCE_TABLE)
PAGE_KEY_MARSHAL_VERSION = 2  # the last without back-references, which depend on reference counts


@pickled_as_fields
@dataclass(frozen=True, slots=True)
class Tokens:
    prompt: int | None = None
    completion: int | None = None
    total: int | None = None

    def to_json(self) -> dict[str, int | None]:
        return {"prompt": self.prompt, "completion": self.completion, "total": self.total}

    @property
    def known(self) -> bool:
        return any(value is not None for value in (self.prompt, self.completion, self.total))


@pickled_as_fields
@dataclass(frozen=True, slots=True)
class Spend:
    """What a run's steps (their ``llm`` steps' figures) add up to."""

    tokens: Tokens = Tokens()
    cost: float | None = None


class RunRow(NamedTuple):
    uid: int | None
    uuid: str | None
    status: str | None
    termination_reason: str | None
    configuration: str | None
    be_user: int | None
    created: int | None
    finished: int | None
    iterations: int | None
    truncated: bool | None
    tokens: Tokens
    estimated_cost: float | None
    error_class: str | None


class CallRow(NamedTuple):
    """A provider call as the timeline shows it (a named tuple: a quarter of a million are made at once)."""

    crdate: int | None
    operation: str | None
    provider: str | None
    model: str | None
    served_provider: str | None
    served_model: str | None
    success: bool | None
    error_class: str | None
    latency_ms: int | None
    ttft_ms: int | None
    cache_hit: bool | None
    fallback_attempts: int | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None
    be_user: int | None

    @property
    def swapped(self) -> bool:
        """A fallback served the call with another provider or model."""
        return served_elsewhere(provider=self.provider, model=self.model, served_provider=self.served_provider,
                                served_model=self.served_model)


def served_elsewhere(*, provider: str | None, model: str | None, served_provider: str | None,
                     served_model: str | None) -> bool:
    """A call served by another provider or model than it asked for (a fallback's)."""
    return bool((served_provider and served_provider != provider) or (served_model and served_model != model))


class DecisionRow(NamedTuple):
    crdate: int | None
    decision: str | None
    reason: str | None
    tool: str | None
    guardrail: str | None
    detail: str | None
    be_user: int | None


@dataclass(frozen=True, slots=True)
class RunHeader:
    """The header of a run's page, as nr-llm's shows it, with what was spent beside the row's totals."""

    row: RunRow
    cost: float | None
    cost_source: str  # "telemetry" | "steps" | "run"
    calls_priced: int
    calls: int
    spent: Spend
    spent_source: str | None  # "telemetry" | "steps" | None: what ``spent`` adds up

    @property
    def totals_differ(self) -> bool:
        """The row's totals are not what was spent (a failed settle writes 0 rounds, tokens, cost)."""
        return self.spent.tokens.known and self.spent.tokens != self.row.tokens

    def to_json(self) -> dict[str, Any]:
        row = self.row
        return {
            "uid": row.uid, "uuid": row.uuid, "status": row.status, "terminationReason": row.termination_reason or None,
            "configuration": row.configuration, "created": row.created, "finished": row.finished,
            "iterations": row.iterations, "truncated": row.truncated, "tokens": row.tokens.to_json(),
            "cost": self.cost, "costSource": self.cost_source, "errorClass": row.error_class or None,
            "spent": {"tokens": self.spent.tokens.to_json(), "cost": self.spent.cost},
        }


# ---------------------------------------------------------------- before the sweep


class WholeRunTables:
    """The checked tables, indexed for the joins; ``truths`` for the sweep, ``joined`` after it."""

    def __init__(self, tables: Mapping[str, pa.Table]) -> None:
        self.present = frozenset(name for name in tables)
        self.runs = _run_rows(tables.get(RUNS_TABLE))
        self.by_uid = {str(row.uid): row for row in self.runs if row.uid is not None}
        self.by_uuid = {row.uuid: row for row in self.runs if row.uuid}
        calls = tables.get(CALLS_TABLE)
        self.calls = list(zip(_texts(calls, "correlation_id"), _made(CallRow, calls, columns=CALL_COLUMNS)))
        decisions = tables.get(GOVERNANCE_TABLE)
        self.decisions = list(zip(_values(decisions, "agentrun_uid"), _texts(decisions, "correlation_id"),
                                  _made(DecisionRow, decisions, columns=DECISION_COLUMNS)))
        self.tool_servers, self.orphaned = _catalogue(tables.get(TOOLS_TABLE), tables.get(SERVERS_TABLE))

    @property
    def any(self) -> bool:
        return bool(self.present)

    def run_keys(self, uid: Any, uuid: str) -> list[str]:
        """Every value the events may name a run by, given what a row says of it."""
        row = self.by_uid.get(str(uid)) if uid not in (None, 0) else None
        row = row or (self.by_uuid.get(uuid) if uuid else None)
        keys = [str(uid)] if uid not in (None, 0) else []
        keys += [uuid] if uuid else []
        if row is not None:
            keys += [str(row.uid)] if row.uid is not None else []
            keys += [row.uuid] if row.uuid else []
        return list(dict.fromkeys(keys))

    def truths(self) -> ServerTruths:
        """What the tables say about servers, for the sweep: the catalogue and the policy denials,
        each denial under every value the events may name its run by."""
        denials: dict[str, list[tuple[str, int | None]]] = {}
        for uid, correlation, decision in self.decisions:
            if decision.decision != TOOL_DENIED or not decision.tool:
                continue
            for key in self.run_keys(uid, correlation):
                denials.setdefault(key, []).append((decision.tool, decision.crdate))
        return ServerTruths(dict(self.tool_servers), frozenset(self.orphaned),
                            {key: tuple(found) for key, found in denials.items()})

    def joined(self, runs: Iterable[str], archived: ArchivedRuns | None = None) -> WholeRuns:
        """The rows of the events' ``runs``; every other row counted as unmatched. A run the
        tables say nothing of keeps what the archive kept of it."""
        known = list(runs)
        known_set = set(known)
        rows: dict[str, RunRow] = {}
        for run in known:
            row = self.by_uid.get(run) or self.by_uuid.get(run)
            if row is not None:
                rows[run] = row
        matched_rows = {id(row) for row in rows.values()}
        by_uuid: dict[str, str] = {run: run for run in known}  # events named by their uuid
        by_uid: dict[str, str] = {run: run for run in known}
        for run, row in rows.items():
            if row.uuid:
                by_uuid[row.uuid] = run
            if row.uid is not None:
                by_uid[str(row.uid)] = run
        calls: dict[str, list[CallRow]] = {}
        unmatched = Counter({table: 0 for table in self.present if table in WHOLE_RUN_TABLES})
        unmatched[RUNS_TABLE] = (sum(1 for row in self.runs if id(row) not in matched_rows)
                                 if RUNS_TABLE in self.present else 0)
        for correlation, call in self.calls:
            caller = by_uuid.get(correlation) if correlation else None
            if caller is None:
                unmatched[CALLS_TABLE] += 1
            else:
                calls.setdefault(caller, []).append(call)
        decisions: dict[str, list[DecisionRow]] = {}
        for uid, correlation, decision in self.decisions:
            decider = (by_uid.get(str(uid)) if uid not in (None, 0) else None) or (
                by_uuid.get(correlation) if correlation else None)
            if decider is None:
                unmatched[GOVERNANCE_TABLE] += 1
            else:
                decisions.setdefault(decider, []).append(decision)
        assert known_set >= set(rows)
        present = self.present
        for run, (row, kept_calls, kept_decisions) in (archived or {}).items():
            if run not in known_set:
                continue
            if row is not None and run not in rows:
                rows[run] = row
            if kept_calls and run not in calls:
                calls[run] = kept_calls
            if kept_decisions and run not in decisions:
                decisions[run] = kept_decisions
            present = present | {table for table, there in ((RUNS_TABLE, row), (CALLS_TABLE, kept_calls),
                                                            (GOVERNANCE_TABLE, kept_decisions)) if there}
        return WholeRuns(present, rows, calls, decisions,
                         {table: unmatched[table] for table in WHOLE_RUN_TABLES if table in present})


def _rows(table: pa.Table | None) -> list[dict[str, Any]]:
    return [] if table is None else table.to_pylist()


# Each row type's fields from the table's columns, in the type's order; "" is said as None.
CALL_COLUMNS = ("crdate", "operation", "provider", "model", "served_provider", "served_model", "success",
                "error_class", "latency_ms", "time_to_first_token_ms", "cache_hit", "fallback_attempts",
                "actual_input_tokens", "actual_output_tokens", "actual_cost", "be_user")
DECISION_COLUMNS = ("crdate", "decision", "reason", "tool_name", "guardrail", "detail", "be_user")
RUN_COLUMNS = ("uid", "uuid", "status", "termination_reason", "configuration_identifier", "be_user", "crdate",
               "finished_at", "iterations", "truncated")
EMPTY_IS_NONE = frozenset({"error_class", "reason", "tool_name", "guardrail", "detail", "uuid",
                           "configuration_identifier"})


def _values(table: pa.Table | None, column: str) -> list[Any]:
    return [] if table is None else table.column(column).to_pylist()


def _texts(table: pa.Table | None, column: str) -> list[str]:
    return [] if table is None else pc.fill_null(table.column(column), "").to_pylist()


def _column(table: pa.Table, column: str) -> list[Any]:
    """A column's values, as Python objects made by Arrow in one go (not a dict a row)."""
    values = table.column(column)
    if column in EMPTY_IS_NONE:
        values = pc.if_else(pc.equal(values, ""), pa.scalar(None, values.type), values)
    if column == "finished_at":  # 0 until the run finished
        values = pc.if_else(pc.equal(values, 0), pa.scalar(None, values.type), values)
    if pa.types.is_string(values.type):  # a few providers, models, statuses: one string object each
        encoded = pc.dictionary_encode(values).combine_chunks()
        words = encoded.dictionary.to_pylist()
        return [None if index is None else words[index] for index in encoded.indices.to_pylist()]
    return values.to_pylist()


def _made(kind: Any, table: pa.Table | None, *, columns: tuple[str, ...]) -> list[Any]:
    if table is None:
        return []
    return list(itertools.starmap(kind, zip(*(_column(table, column) for column in columns))))


def _run_rows(table: pa.Table | None) -> list[RunRow]:
    if table is None:
        return []
    tokens = map(Tokens, *(_column(table, column) for column in
                           ("total_prompt_tokens", "total_completion_tokens", "total_tokens")))
    fields = zip(*(_column(table, column) for column in RUN_COLUMNS), tokens,
                 _column(table, "estimated_cost"), _column(table, "error_class"))
    return list(itertools.starmap(RunRow, fields))


def _catalogue(tools: pa.Table | None, servers: pa.Table | None) -> tuple[dict[str, str], set[str]]:
    """Each catalogued tool's server identifier (tools whose server row is missing keep the name
    rule), and the orphaned tools."""
    identifiers = {row["uid"]: row["identifier"] for row in _rows(servers) if row.get("identifier")}
    tool_servers: dict[str, str] = {}
    orphaned: set[str] = set()
    for row in _rows(tools):
        name = row.get("tool_name")
        if not name:
            continue
        if row.get("server") in identifiers:
            tool_servers[name] = identifiers[row["server"]]
        if row.get("orphaned"):
            orphaned.add(name)
    return tool_servers, orphaned


# ---------------------------------------------------------------- after the sweep


@dataclass
class WholeRuns:
    """Each run's row, provider calls and decisions, by the events' run id; what matched nothing."""

    present: frozenset[str] = frozenset()
    rows: dict[str, RunRow] = field(default_factory=dict)
    calls: dict[str, list[CallRow]] = field(default_factory=dict)
    decisions: dict[str, list[DecisionRow]] = field(default_factory=dict)
    unmatched: dict[str, int] = field(default_factory=dict)
    headers: dict[str, RunHeader | None] = field(default_factory=dict, repr=False)  # made as asked for

    @property
    def merged(self) -> bool:
        """The site shows the whole run: a table beside the events was given."""
        return bool(self.present & set(WHOLE_RUN_TABLES))

    @property
    def runs_known(self) -> bool:
        return RUNS_TABLE in self.present

    def header(self, run: str, steps: Spend | None) -> RunHeader | None:
        """The run's header, or None without a run row (made once a run: pages in every language ask)."""
        if run in self.headers:
            return self.headers[run]
        header = self.headers[run] = self._header(run, steps)
        return header

    def _header(self, run: str, steps: Spend | None) -> RunHeader | None:
        row = self.rows.get(run)
        if row is None:
            return None
        calls = self.calls.get(run, [])
        priced = [call.cost for call in calls if call.cost is not None]
        if calls:
            tokens = Tokens(_sum(call.input_tokens for call in calls), _sum(call.output_tokens for call in calls), None)
            tokens = Tokens(tokens.prompt, tokens.completion, _sum([tokens.prompt, tokens.completion]))
            spent, spent_source = Spend(tokens, _sum(priced) if priced else None), "telemetry"
        elif steps is not None and (steps.tokens.known or steps.cost is not None):
            spent, spent_source = steps, "steps"
        else:
            spent, spent_source = Spend(), None
        if calls:
            cost, source = (_sum(priced) if priced else None), "telemetry"
        elif steps is not None and steps.cost is not None:
            cost, source = steps.cost, "steps"
        else:
            cost, source = row.estimated_cost, "run"
        return RunHeader(row, cost, source, len(priced), len(calls), spent, spent_source)

    def entries(self, run: str) -> tuple[list[CallRow], list[DecisionRow]]:
        return self.calls.get(run, []), self.decisions.get(run, [])

    def page_key(self, run: str) -> str:
        """What of these rows shapes the run's page, as a digest ('' for a run with none)."""
        row, calls, decisions = self.rows.get(run), self.calls.get(run), self.decisions.get(run)
        if row is None and not calls and not decisions:
            return "" if not self.merged else "merged"
        rows = (None if row is None else tuple(_row_fields(row)), tuple(map(tuple, calls or ())),
                tuple(map(tuple, decisions or ())))
        # marshal's format 2 writes values, not references: the same rows, the same bytes (and
        # four times faster than their repr, for every run of a build).
        return hashlib.sha256(marshal.dumps(rows, PAGE_KEY_MARSHAL_VERSION)).hexdigest()

    def slug_source(self, run: str) -> str:
        """What a run's page is named by: its uuid where its row gives one, else the events' id."""
        row = self.rows.get(run)
        return row.uuid if row is not None and row.uuid else run


def _sum(values: Iterable[Any]) -> Any:
    present = [value for value in values if value is not None]
    return sum(present) if present else None


# ---------------------------------------------------------------- summaries


def runs_by(whole: WholeRuns, runs: Iterable[str], *, field_name: str, order: Iterable[str]) -> dict[str, int]:
    """Runs by ``status`` or ``termination_reason``, in nr-llm's order, then any other value."""
    return _ordered(Counter(getattr(whole.rows[run], field_name) or "" for run in runs if run in whole.rows), order)


def runs_by_status(whole: WholeRuns, runs: Iterable[str]) -> dict[str, int]:
    return runs_by(whole, runs, field_name="status", order=RUN_STATUSES)


def runs_by_termination_reason(whole: WholeRuns, runs: Iterable[str]) -> dict[str, int]:
    return runs_by(whole, runs, field_name="termination_reason", order=["", *TERMINATION_REASONS])


@dataclass
class ConfigurationFigures:
    """One agent configuration's runs, calls and spending (the Configurations page)."""

    identifier: str
    runs: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_termination_reason: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)  # tool calls by outcome
    durations_ms: list[float] = field(default_factory=list)
    tokens: int = 0
    cost: float | None = None

    @property
    def median_duration_ms(self) -> float | None:
        return statistics.median(self.durations_ms) if self.durations_ms else None

    def per_run(self, value: float | None) -> float | None:
        return None if value is None or not self.runs else value / self.runs

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs, "runs_by_status": self.by_status,
            "runs_by_termination_reason": self.by_termination_reason, "tool_calls": self.calls,
            "median_duration_ms": self.median_duration_ms, "tokens": self.tokens,
            "tokens_per_run": self.per_run(self.tokens), "cost": self.cost, "cost_per_run": self.per_run(self.cost),
        }


def configuration_figures(whole: WholeRuns, summaries: Iterable[Any], *, header_of: Any) -> list[ConfigurationFigures]:
    """Per configuration identifier (runs whose row names one), sorted by identifier.

    ``summaries`` are the run index's (``RunSummary``: duration and tool calls by outcome);
    ``header_of(run)`` gives a run's header, whose spent tokens and cost count (what the
    provider calls or steps add up to; the row's totals where nothing else says).
    """
    by_identifier: dict[str, ConfigurationFigures] = {}
    statuses: dict[str, Counter[str]] = {}
    reasons: dict[str, Counter[str]] = {}
    for summary in summaries:
        row = whole.rows.get(summary.run)
        if row is None or not row.configuration:
            continue
        figures = by_identifier.setdefault(row.configuration, ConfigurationFigures(row.configuration))
        figures.runs += 1
        statuses.setdefault(row.configuration, Counter())[row.status or ""] += 1
        reasons.setdefault(row.configuration, Counter())[row.termination_reason or ""] += 1
        for outcome in Outcome:
            figures.calls[outcome.value] = figures.calls.get(outcome.value, 0) + summary.counts.of(outcome)
        figures.durations_ms.append(summary.duration_ms)
        header = header_of(summary.run)
        tokens = header.spent.tokens.total if header is not None and header.spent.tokens.total is not None else (
            row.tokens.total)
        figures.tokens += tokens or 0
        if header is not None and header.cost is not None:
            figures.cost = (figures.cost or 0.0) + header.cost
    for identifier, figures in by_identifier.items():
        figures.by_status = _ordered(statuses[identifier], RUN_STATUSES)
        figures.by_termination_reason = _ordered(reasons[identifier], ["", *TERMINATION_REASONS])
    return [by_identifier[identifier] for identifier in sorted(by_identifier)]


def _ordered(counts: Counter[str], order: Iterable[str]) -> dict[str, int]:
    ordered = [value for value in order if counts.get(value)]
    ordered += sorted(value for value in counts if value not in ordered)
    return {value: counts[value] for value in ordered}


# ---------------------------------------------------------------- in the archive

ArchivedRuns = dict[str, tuple["RunRow | None", list[CallRow], list[DecisionRow]]]


def archive_record(whole: WholeRuns, runs: Iterable[str]) -> bytes | None:
    """What the archive keeps of ``runs``' other rows: compressed JSON, base64 (None for none)."""
    kept = []
    for run in runs:
        row, calls, decisions = whole.rows.get(run), whole.calls.get(run), whole.decisions.get(run)
        if row is None and not calls and not decisions:
            continue
        kept.append([run, None if row is None else _row_fields(row), [list(call) for call in calls or []],
                     [list(decision) for decision in decisions or []]])
    if not kept:
        return None
    text = json.dumps({"version": 1, "runs": kept}, ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(zlib.compress(text.encode("utf-8", "surrogatepass"), 9))


def archived_runs(data: bytes | None) -> ArchivedRuns:
    """The archive's kept rows by run; nothing for an archive without them or one this version cannot read."""
    if not data:
        return {}
    try:
        record = json.loads(zlib.decompress(base64.b64decode(data)).decode("utf-8", "surrogatepass"))
        return {run: (None if row is None else _row_of_fields(row), [CallRow(*call) for call in calls],
                      [DecisionRow(*decision) for decision in decisions])
                for run, row, calls, decisions in record["runs"]}
    except (ValueError, TypeError, KeyError, zlib.error):
        return {}


def _row_fields(row: RunRow) -> list[Any]:
    values: list[Any] = list(row)
    values[RunRow._fields.index("tokens")] = [row.tokens.prompt, row.tokens.completion, row.tokens.total]
    return values


def _row_of_fields(values: list[Any]) -> RunRow:
    values = list(values)
    position = RunRow._fields.index("tokens")
    values[position] = Tokens(*values[position])
    return RunRow(*values)
