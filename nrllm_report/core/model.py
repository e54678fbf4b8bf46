"""The values that travel through every stage: outcomes, rules, steps, problems.

The enums' values are the strings users see in data, JSON, CSS classes and
catalog keys. They are spelled here and nowhere else (ADR-191, decision 3).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any


def N_(message: str) -> str:
    """Marks a message for extraction into the catalogs; it is translated where shown."""
    return message


class Outcome(str, enum.Enum):
    """What a tool step states about its call (ADR-191)."""

    OK = "ok"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_error(self) -> bool:
        """The value ``toolIsError`` must carry beside this outcome."""
        return self is not Outcome.OK


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"


class Rule(str, enum.Enum):
    """Validation rule codes, in the order they are checked: a rejected row gets the first."""

    UNREADABLE_ROW = "unreadable-row"
    MISSING_FIELD = "missing-field"
    BAD_TYPE = "bad-type"
    FLAG_NOT_BOOLEAN = "flag-not-boolean"
    UNKNOWN_OUTCOME = "unknown-outcome"
    OUTCOME_WITHOUT_FLAG = "outcome-without-flag"
    FLAG_CONTRADICTS_OUTCOME = "flag-contradicts-outcome"
    OUTCOME_ON_NON_TOOL_STEP = "outcome-on-non-tool-step"
    COLUMN_CONTRADICTS_PAYLOAD = "column-contradicts-payload"
    DUPLICATE_STEP = "duplicate-step"
    TOOL_STEP_WITHOUT_FLAG = "tool-step-without-flag"
    UNKNOWN_KIND = "unknown-kind"

    @property
    def severity(self) -> Severity:
        if self in (Rule.TOOL_STEP_WITHOUT_FLAG, Rule.UNKNOWN_KIND):
            return Severity.WARNING
        return Severity.ERROR


KNOWN_KINDS = frozenset(
    {"context", "request", "llm", "tool", "assembled", "dropped", "approval", "input"}
)
TOOL_KIND = "tool"
MCP_PREFIX = "mcp_"


@dataclass(frozen=True, slots=True)
class Step:
    """One canonical, validated step: metadata only, never content.

    The field names after ``outcome`` are the allow-listed non-content facts;
    anything not named here never leaves the normalizer.
    """

    run: str
    sequence: int
    kind: str
    round: int
    duration_ms: float
    crdate: int | None
    tool_name: str | None
    server: str | None
    tool_is_error: bool | None
    outcome: Outcome | None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    estimated_cost: float | None = None
    requested_tool_call_count: int | None = None
    message_count: int | None = None
    tool_spec_count: int | None = None
    artifact_count: int | None = None
    dropped_source_count: int | None = None
    approved: bool | None = None
    decided_by: int | None = None

    def values(self) -> tuple[Any, ...]:
        """The canonical values in field order, the outcome as its string."""
        return tuple(
            value.value if isinstance(value, Outcome) else value
            for value in (getattr(self, name) for name in STEP_FIELD_NAMES)
        )

    def to_record(self) -> dict[str, Any]:
        """The canonical record as written by ``normalize`` (camelCase keys)."""
        return dict(zip((CANONICAL_NAMES[name] for name in STEP_FIELD_NAMES), self.values()))


STEP_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Step))

CANONICAL_NAMES: dict[str, str] = {
    "run": "run",
    "sequence": "sequence",
    "kind": "kind",
    "round": "round",
    "duration_ms": "durationMs",
    "crdate": "crdate",
    "tool_name": "toolName",
    "server": "server",
    "tool_is_error": "toolIsError",
    "outcome": "outcome",
    "finish_reason": "finishReason",
    "prompt_tokens": "promptTokens",
    "completion_tokens": "completionTokens",
    "total_tokens": "totalTokens",
    "estimated_cost": "estimatedCost",
    "requested_tool_call_count": "requestedToolCallCount",
    "message_count": "messageCount",
    "tool_spec_count": "toolSpecCount",
    "artifact_count": "artifactCount",
    "dropped_source_count": "droppedSourceCount",
    "approved": "approved",
    "decided_by": "decidedBy",
}


# Message parameters that are themselves catalog messages (a type or a description), not data.
TRANSLATED_PARAMS = frozenset({"expected", "type"})


@dataclass(frozen=True, slots=True)
class Problem:
    """A rule a row broke, where, and the message parameters to say so in any language."""

    input: str
    row: int
    rule: Rule
    message: str
    params: tuple[tuple[str, str], ...] = ()
    run: str | None = None
    sequence: int | None = None

    @property
    def severity(self) -> Severity:
        return self.rule.severity

    def text(self, gettext: Any = None) -> str:
        """The message as one sentence, translated by ``gettext`` when given."""
        if gettext is None:
            return self.message % dict(self.params)
        params = {
            key: gettext(value) if key in TRANSLATED_PARAMS else value
            for key, value in self.params
        }
        return gettext(self.message) % params

    def to_json(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "row": self.row,
            "run": self.run,
            "sequence": self.sequence,
            "rule": self.rule.value,
            "severity": self.severity.value,
            "message": self.text(),
        }


@dataclass(frozen=True, slots=True)
class Unreadable:
    """What a reader yields for a line or record it could not turn into a JSON value."""

    message: str
    params: tuple[tuple[str, str], ...] = ()


class Verdict(str, enum.Enum):
    """What the servers page says of a server; withheld below the minimum number of calls."""

    HEALTHY = "healthy"
    FLAKY = "flaky"
    FAILING = "failing"
    TOO_FEW_CALLS = "too-few-calls"
