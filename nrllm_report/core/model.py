"""The values that travel through every stage: outcomes, rules, steps, problems.

The enums' values are the strings users see in data, JSON, CSS classes and
catalog keys. They are spelled here and nowhere else (ADR-191, decision 3).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
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
    # The tables besides the events (issue 20): a value outside its column's set, a uid twice.
    UNKNOWN_VALUE = "unknown-value"
    DUPLICATE_ROW = "duplicate-row"

    @property
    def severity(self) -> Severity:
        if self in (Rule.TOOL_STEP_WITHOUT_FLAG, Rule.UNKNOWN_KIND):
            return Severity.WARNING
        return Severity.ERROR


KNOWN_KINDS = frozenset(
    {"context", "request", "llm", "tool", "assembled", "dropped", "approval", "input"}
)
TOOL_KIND = "tool"
APPROVAL_KIND = "approval"  # an operator's decision on a tool call: {approved, decidedBy}
MCP_PREFIX = "mcp_"


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
    """What a server's (or a tool's) figures say against its failure budget; worst first.

    ``slow`` is never the failure rate's: a server (or tool) the failure budget finds reliable and
    whose latency verdict is slow is shown slow (``verdicts.shown_verdict``).
    """

    DOWN = "down"
    FLAKY = "flaky"
    SLOW = "slow"
    UNCERTAIN = "uncertain"
    TOO_FEW_CALLS = "too-few-calls"
    RELIABLE = "reliable"


class LatencyVerdict(str, enum.Enum):
    """What a server's (or a tool's) share of slow calls says against its slow budget; worst first.

    ``uncertain`` and ``too-few-calls`` are the failure verdicts' strings: the same judgement.
    """

    SLOW = "slow"
    UNCERTAIN = "uncertain"
    TOO_FEW_CALLS = "too-few-calls"
    WITHIN_BUDGET = "within-budget"


class LatencyDirection(str, enum.Enum):
    """Whether calls became slower (the slow share went up) or faster at a change."""

    SLOWER = "slower"
    FASTER = "faster"
