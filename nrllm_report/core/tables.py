"""The tables nr-llm keeps about a run besides the step events (issue 20), spelled once.

``TABLES`` names each table, the columns that tell it apart when its name is not
given (``marks``), the columns a report reads and their kinds, and the value sets
of its coded columns, as ``../shared/domain.md`` ("The other tables") has them.
``ServerTruths`` is what they say about servers that the events alone cannot: a
tool's server from the MCP catalogue, and which failed calls a policy denied.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

EVENTS_TABLE = "tx_nrllm_agentrun_event"
RUNS_TABLE = "tx_nrllm_agentrun"
CALLS_TABLE = "tx_nrllm_telemetry"
GOVERNANCE_TABLE = "tx_nrllm_governance_event"
TOOLS_TABLE = "tx_nrllm_mcp_tool"
SERVERS_TABLE = "tx_nrllm_mcp_server"


class ColumnKind(str, enum.Enum):
    INTEGER = "integer"
    DECIMAL = "decimal"
    TEXT = "text"
    FLAG = "flag"  # 0/1, as smallint or tinyint


RUN_STATUSES: tuple[str, ...] = (
    "queued", "running", "waiting_for_approval", "waiting_for_input", "completed", "failed", "cancelled",
)
TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
# Each termination reason with the status it comes with; "" while not finished, and on old rows.
TERMINATION_REASONS: dict[str, str] = {
    "completed": "completed", "max_iterations": "completed", "budget_exhausted": "completed",
    "context_truncated": "completed",
    "policy_denied": "failed", "approval_denied": "failed", "provider_failed": "failed",
    "not_retryable": "failed", "retries_exhausted": "failed",
    "cancelled": "cancelled",
}
DECISIONS: tuple[str, ...] = (
    "tool_denied", "response_blocked", "approval_required", "content_filter", "context_blocked", "write_unapproved",
)
TOOL_DENIED = "tool_denied"


@dataclass(frozen=True)
class TableSpec:
    """One table: its name, the columns that mark it, the columns read and their kinds, and
    the coded columns' value sets (a value outside is refused with ``unknown-value``)."""

    name: str
    marks: tuple[str, ...]
    columns: Mapping[str, ColumnKind]
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    key: str = "uid"  # duplicates are rows with the same key


INT, DEC, TEXT, FLAG = ColumnKind.INTEGER, ColumnKind.DECIMAL, ColumnKind.TEXT, ColumnKind.FLAG

TABLES: dict[str, TableSpec] = {
    RUNS_TABLE: TableSpec(
        RUNS_TABLE, ("uuid", "status", "configuration_identifier", "termination_reason"),
        {"uid": INT, "uuid": TEXT, "status": TEXT, "configuration_uid": INT, "configuration_identifier": TEXT,
         "be_user": INT, "iterations": INT, "truncated": FLAG, "total_prompt_tokens": INT,
         "total_completion_tokens": INT, "total_tokens": INT, "estimated_cost": DEC, "error_class": TEXT,
         "termination_reason": TEXT, "started_at": INT, "finished_at": INT, "crdate": INT},
        {"status": RUN_STATUSES, "termination_reason": ("", *TERMINATION_REASONS)},
    ),
    CALLS_TABLE: TableSpec(
        CALLS_TABLE, ("correlation_id", "provider", "model", "latency_ms", "success"),
        {"uid": INT, "correlation_id": TEXT, "operation": TEXT, "provider": TEXT, "model": TEXT,
         "served_provider": TEXT, "served_model": TEXT, "configuration_identifier": TEXT, "success": FLAG,
         "error_class": TEXT, "latency_ms": INT, "time_to_first_token_ms": INT, "cache_hit": FLAG,
         "fallback_attempts": INT, "provider_retries": INT, "actual_input_tokens": INT, "actual_output_tokens": INT,
         "actual_cost": DEC, "be_user": INT, "crdate": INT},
    ),
    GOVERNANCE_TABLE: TableSpec(
        GOVERNANCE_TABLE, ("decision", "guardrail"),
        {"uid": INT, "decision": TEXT, "reason": TEXT, "tool_name": TEXT, "agentrun_uid": INT, "correlation_id": TEXT,
         "guardrail": TEXT, "detail": TEXT, "be_user": INT, "crdate": INT},
        {"decision": DECISIONS},
    ),
    TOOLS_TABLE: TableSpec(
        TOOLS_TABLE, ("tool_name", "remote_name", "server"),
        {"uid": INT, "server": INT, "tool_name": TEXT, "remote_name": TEXT, "orphaned": FLAG},
    ),
    SERVERS_TABLE: TableSpec(
        SERVERS_TABLE, ("identifier", "last_contact"),
        {"uid": INT, "identifier": TEXT, "name": TEXT, "last_contact": INT, "last_latency_ms": INT},
    ),
}
# The events' own marks: what a file of step events has (the CSV header refusal names these).
EVENT_MARKS: tuple[str, ...] = ("run", "sequence", "kind")
# Longest first: ``tx_nrllm_agentrun_event.csv`` starts with ``tx_nrllm_agentrun`` too.
TABLE_NAMES_LONGEST_FIRST: tuple[str, ...] = tuple(sorted([EVENTS_TABLE, *TABLES], key=len, reverse=True))


class Denial(str, enum.Enum):
    """What explains a failed tool call that no server caused; its outcome stays ``failed``."""

    OPERATOR = "operator"  # an approval step with approved: false, then the tool step failed in 0 ms
    POLICY = "policy"  # a governance tool_denied decision of the same run and tool


@dataclass(frozen=True)
class ServerTruths:
    """What the other tables say about servers: ``tool_servers`` (a tool's server from the MCP
    catalogue, over the name rule), ``orphaned`` tools, and ``policy_denials``: per run (as the
    events name it) the (tool, crdate) of each governance ``tool_denied`` decision."""

    tool_servers: Mapping[str, str] = field(default_factory=dict)
    orphaned: frozenset[str] = frozenset()
    policy_denials: Mapping[str, tuple[tuple[str, int | None], ...]] = field(default_factory=dict)

    def identity(self) -> str:
        """What a cached sweep depends on of these, as text (equal truths, equal text)."""
        return repr((sorted(self.tool_servers.items()), sorted(self.orphaned),
                     sorted((run, tuple(sorted(denials, key=repr))) for run, denials in self.policy_denials.items())))


NO_TRUTHS = ServerTruths()
