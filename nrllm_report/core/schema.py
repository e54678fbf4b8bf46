"""The canonical step and every spelling of its fields, in one place.

``Step`` names the canonical fields (metadata only); their camelCase record names
and Arrow types are derived from it. The raw export's column spellings, the
payload keys the fast path reads, and the location columns that travel with a
checked row are spelled here too; every other module derives from these.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields
from typing import Any

import pyarrow as pa

from .model import Outcome


@dataclass(frozen=True, slots=True)
class Step:
    """One canonical, validated step: metadata only, never content.

    The fields from ``finish_reason`` on are the allow-listed non-content facts
    (``FACT_FIELD_NAMES``); anything not named here never leaves the normalizer.
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
    # False for a row written before ADR-191 (toolIsError without toolOutcome): its
    # failures may include cancellations. None where the step states no outcome.
    outcome_stated: bool | None
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
    requested_tool_names: tuple[str, ...] | None = None
    tool_specs: tuple[str, ...] | None = None
    tool_artifact_types: tuple[str, ...] | None = None
    content_length: int | None = None
    thinking_length: int | None = None
    tool_result_length: int | None = None
    content_redacted: bool | None = None
    dropped_sources: tuple[str, ...] | None = None

    def values(self) -> tuple[Any, ...]:
        """The canonical values in field order: the outcome as its string, a list of names as a list."""
        return tuple(_plain(getattr(self, name)) for name in STEP_FIELD_NAMES)

    def to_record(self) -> dict[str, Any]:
        """The canonical record as written by ``normalize`` (camelCase keys)."""
        return dict(zip((CANONICAL_NAMES[name] for name in STEP_FIELD_NAMES), self.values()))


def _plain(value: Any) -> Any:
    if isinstance(value, Outcome):
        return value.value
    return list(value) if isinstance(value, tuple) else value


STEP_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Step))
# The allow-listed facts: every field from the finish reason on.
FACT_FIELD_NAMES: tuple[str, ...] = STEP_FIELD_NAMES[STEP_FIELD_NAMES.index("finish_reason"):]


def camel_case(name: str) -> str:
    """``duration_ms`` → ``durationMs``: the payload's spelling of a canonical field."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


CANONICAL_NAMES: dict[str, str] = {name: camel_case(name) for name in STEP_FIELD_NAMES}

ARROW_TYPES: dict[Any, pa.DataType] = {
    str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_(), Outcome: pa.string(),
    tuple[str, ...]: pa.list_(pa.string()),
}


def _arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type of a ``Step`` field's annotation (``X | None`` is ``X``, nullable)."""
    members = [member for member in typing.get_args(annotation) if member is not type(None)]
    return ARROW_TYPES[members[0] if len(members) == 1 and typing.get_origin(annotation) is not tuple else annotation]


_HINTS = typing.get_type_hints(Step)
CANONICAL_SCHEMA = pa.schema([(CANONICAL_NAMES[name], _arrow_type(_HINTS[name])) for name in STEP_FIELD_NAMES])
# A canonical record's own word on whether its outcome was stated or read from a legacy flag:
# its ``outcome`` is always there, so the record says so itself (read back where there is no payload).
OUTCOME_STATED = CANONICAL_NAMES["outcome_stated"]
# The facts of a canonical record by their record names: read back from the top level of a
# row without a payload, which is how ``normalize`` writes them.
CANONICAL_FACTS: dict[str, pa.DataType] = {
    CANONICAL_NAMES[name]: CANONICAL_SCHEMA.field(CANONICAL_NAMES[name]).type for name in FACT_FIELD_NAMES
}

# Extra columns that travel with each canonical row until problems are located.
LOCATION_SCHEMA = pa.schema([("input_index", pa.int32()), ("row", pa.int64())])
CHECKED_SCHEMA = pa.schema(list(CANONICAL_SCHEMA) + list(LOCATION_SCHEMA))

# Columns of the checked-steps table a timeline row reads (see CHECKED_SCHEMA): what a run page can show.
TIMELINE_COLUMNS = (
    "sequence", "crdate", "kind", "round", "durationMs", "toolName", "server", "outcome",
    *(CANONICAL_NAMES[name] for name in FACT_FIELD_NAMES),
)

# What explains a denied call (``core.tables.Denial``), a column the sweep appends to the kept
# steps after the check (``aggregate.denials``): never a canonical field, so neither
# ``normalize`` nor the archive writes it. A run page shows it, so its data key hashes it.
DENIAL_COLUMN = "denial"
PAGE_COLUMNS = (*TIMELINE_COLUMNS, DENIAL_COLUMN)

# Top-level spellings of each column: the table's snake_case and the payload's camelCase.
# A canonical record's ``outcome`` is the outcome it states, so it is read as ``toolOutcome``.
COLUMN_SPELLINGS: dict[str, tuple[str, ...]] = {
    "uid": ("uid",),
    "run": ("run",),
    "sequence": ("sequence",),
    "kind": ("kind",),
    "round": ("round",),
    "durationMs": ("duration_ms", "durationMs"),
    "crdate": ("crdate",),
    "payload": ("payload",),
    "toolName": ("toolName", "tool_name"),
    "toolIsError": ("toolIsError", "tool_is_error"),
    "toolOutcome": ("toolOutcome", "tool_outcome", "outcome"),  # "outcome": a canonical record read back
    "server": ("server",),
}

# Keys that may stand both as a flattened column and in the payload.
FLATTENED_KEYS: tuple[str, ...] = ("toolName", "toolIsError", "toolOutcome", "server")

# The table's columns that hold numbers; a string holding a plain number of the column's kind
# is read as that number (PHP's MySQL driver, CSV and phpMyAdmin write them as text).
INTEGER_COLUMNS: tuple[str, ...] = ("uid", "sequence", "round", "crdate")
DECIMAL_COLUMNS: tuple[str, ...] = ("durationMs",)

NAMES = pa.list_(pa.string())

# The payload keys the fast path reads; anything else in a payload is ignored by the parser.
# Content keys (messagesSent, requestedToolCalls, toolArtifacts, content, thinking, toolResult)
# are read only to count, measure and name them, as nr-llm's privacy filter does.
PAYLOAD_FIELDS: dict[str, pa.DataType] = {
    "toolName": pa.string(),
    "toolIsError": pa.bool_(),
    "toolOutcome": pa.string(),
    "server": pa.string(),
    "finishReason": pa.string(),
    "promptTokens": pa.int64(),
    "completionTokens": pa.int64(),
    "totalTokens": pa.int64(),
    "estimatedCost": pa.float64(),
    "messagesSentCount": pa.int64(),
    "messagesSent": pa.list_(pa.struct([])),
    "requestedToolNames": NAMES,
    "requestedToolCalls": pa.list_(pa.struct([("name", pa.string())])),
    "toolSpecs": NAMES,
    "toolArtifactsCount": pa.int64(),
    "toolArtifactTypes": NAMES,
    "toolArtifacts": pa.list_(pa.struct([("type", pa.string())])),
    "contentLength": pa.int64(),
    "thinkingLength": pa.int64(),
    "toolResultLength": pa.int64(),
    "content": pa.string(),
    "thinking": pa.string(),
    "toolResult": pa.string(),
    "contentRedacted": pa.bool_(),
    "droppedSources": NAMES,
    "approved": pa.bool_(),
    "decidedBy": pa.int64(),
}

# The archive (``build --archive``): canonical records in Parquet, marked with the format's
# version in the schema's key-value metadata, so that another file is never taken for one.
ARCHIVE_MARKER_KEY = b"nrllm-report-archive"
ARCHIVE_VERSION = 1
ARCHIVE_SCHEMA = CANONICAL_SCHEMA.with_metadata({ARCHIVE_MARKER_KEY: str(ARCHIVE_VERSION).encode("ascii")})
# The archived runs' rows of the other tables (run rows, provider calls, decisions; metadata only),
# as compressed JSON in the schema's metadata: an archive without it is one of steps alone.
ARCHIVE_WHOLE_RUN_KEY = b"nrllm-report-whole-run"
# Where a database read resumes (``readers.resume``): per URL and table the last ``uid`` read,
# the rows of the tables besides the events, and the problems of the events' rows.
ARCHIVE_DATABASE_KEY = b"nrllm-report-database"
