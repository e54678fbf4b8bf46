"""The fast path: a whole batch of raw rows checked and normalized with Arrow compute.

It only ever vouches for rows that pass every rule; every other row goes back to
the row-by-row checker in ``validate``, which is the definition of the rules. So
the fast path may be conservative, never different: a property test holds the
two to the same output.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from . import normalize as n
from ..core.model import TOOL_KIND, Outcome
from .rows import FACTS
from ..core.schema import CHECKED_SCHEMA, COLUMN_SPELLINGS, FLATTENED_KEYS, PAYLOAD_FIELDS

OUTCOME_VALUES = pa.array([outcome.value for outcome in Outcome])

PAYLOAD_SCHEMA = pa.schema(list(PAYLOAD_FIELDS.items()))
PAYLOAD_PARSE = pajson.ParseOptions(explicit_schema=PAYLOAD_SCHEMA, unexpected_field_behavior="ignore")

COUNTED_FACTS = {
    "requestedToolCalls": "requestedToolCallCount",
    "messagesSent": "messageCount",
    "toolSpecs": "toolSpecCount",
    "toolArtifacts": "artifactCount",
    "droppedSources": "droppedSourceCount",
}
INTEGER_FACTS = ("promptTokens", "completionTokens", "totalTokens", "decidedBy")

# The fast path must read every payload key the row checker reads, or it would vouch for
# rows without looking at a key the rules look at.
assert set(PAYLOAD_FIELDS) == {key for key, *_rest in FACTS} | set(FLATTENED_KEYS)

class NotFast(Exception):
    """The batch has a shape the fast path does not handle; check it row by row."""


@dataclass
class FastResult:
    clean: pa.RecordBatch  # CHECKED_SCHEMA rows the fast path vouches for
    unclean: list[int]  # positions in the batch to check row by row


def check_batch(
    table: pa.Table, input_index: int, first_row: int, known_servers: Sequence[str]
) -> FastResult:
    """Canonical rows for the clean part of ``table``; raises NotFast for odd shapes."""
    columns = _resolve_columns(table)
    length = table.num_rows
    run = _run_column(columns.get("run"), length)
    sequence = _integer_column(columns.get("sequence"), length)
    kind = _string_column(columns.get("kind"), length)
    round_number = _integer_column(columns.get("round"), length)
    duration = _number_column(columns.get("durationMs"), length)
    crdate = _integer_column(columns.get("crdate"), length)
    payload, payload_ok = _payload_fields(columns.get("payload"), length)
    flat = {key: _flattened(columns.get(key), PAYLOAD_FIELDS[key], length) for key in FLATTENED_KEYS}

    clean = _all(
        pc.is_valid(run), pc.not_equal(run, ""),
        pc.is_valid(sequence), pc.greater_equal(sequence, 0),
        pc.is_valid(kind), pc.not_equal(kind, ""),
        _null_or(round_number, pc.greater_equal(round_number, 0)),
        _null_or(duration, _finite_non_negative(duration)),
        _null_or(crdate, pc.greater_equal(crdate, 0)),
        payload_ok,
        *_outcome_rules(kind, [flat["toolIsError"], payload["toolIsError"]],
                        [flat["toolOutcome"], payload["toolOutcome"]]),
        *[_agree(flat[key], payload[key]) for key in FLATTENED_KEYS],
        *[_null_or(payload[key], pc.greater_equal(payload[key], 0)) for key in INTEGER_FACTS],
        _null_or(payload["estimatedCost"], _finite_non_negative(payload["estimatedCost"])),
    )
    is_tool = pc.fill_null(pc.equal(kind, TOOL_KIND), False)
    tool_name = pc.coalesce(flat["toolName"], payload["toolName"])
    flag = pc.coalesce(flat["toolIsError"], payload["toolIsError"])
    stated = pc.coalesce(flat["toolOutcome"], payload["toolOutcome"])
    legacy = pc.if_else(flag, Outcome.FAILED.value, Outcome.OK.value)
    outcome = pc.if_else(pc.is_valid(flag), pc.coalesce(stated, legacy), pa.nulls(length, pa.string()))
    given_server = pc.coalesce(flat["server"], payload["server"])
    server = pc.if_else(is_tool, pc.coalesce(given_server, _servers_of(tool_name, known_servers)),
                        pa.nulls(length, pa.string()))
    arrays = {
        "run": run,
        "sequence": sequence,
        "kind": kind,
        "round": pc.fill_null(round_number, 0),
        "durationMs": pc.fill_null(duration, 0.0),
        "crdate": crdate,
        "toolName": tool_name,
        "server": server,
        "toolIsError": flag,
        "outcome": outcome,
        "outcomeStated": pc.if_else(pc.is_valid(flag), pc.is_valid(stated), pa.nulls(length, pa.bool_())),
        "finishReason": payload["finishReason"],
        "estimatedCost": payload["estimatedCost"],
        "approved": payload["approved"],
        "input_index": pa.array([input_index] * length, pa.int32()),
        "row": pa.array(range(first_row, first_row + length), pa.int64()),
    }
    for key in INTEGER_FACTS:
        arrays[key] = payload[key]
    for key, name in COUNTED_FACTS.items():
        arrays[name] = pc.cast(pc.list_value_length(payload[key]), pa.int64())
    batch = pa.RecordBatch.from_arrays(
        [_as_array(arrays[field.name], field.type) for field in CHECKED_SCHEMA], schema=CHECKED_SCHEMA
    )
    clean_mask = pc.fill_null(clean, False)
    unclean = pc.indices_nonzero(pc.invert(clean_mask)).to_pylist()
    return FastResult(batch.filter(clean_mask), unclean)


# ---------------------------------------------------------------- columns


def _resolve_columns(table: pa.Table) -> dict[str, pa.ChunkedArray]:
    """Each canonical column under whichever spelling holds values; an all-null column is absent."""
    names = set(table.column_names)
    columns = {}
    for name, spellings in COLUMN_SPELLINGS.items():
        present = [
            table.column(spelling) for spelling in spellings
            if spelling in names and table.column(spelling).null_count < table.num_rows
        ]
        if len(present) > 1:
            raise NotFast(f"{name} is given under two spellings")
        if present and not pa.types.is_null(present[0].type):
            columns[name] = present[0]
    return columns


def _as_array(values: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values if values.type == type_ else values.cast(type_)


def _run_column(column: pa.ChunkedArray | None, length: int) -> pa.Array:
    if column is None:
        return pa.nulls(length, pa.string())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return _as_array(column, pa.string())
    if pa.types.is_integer(column.type):
        return _as_array(column, pa.int64()).cast(pa.string())
    raise NotFast("run has another type")


def _integer_column(column: pa.ChunkedArray | None, length: int) -> pa.Array:
    if column is None:
        return pa.nulls(length, pa.int64())
    if pa.types.is_integer(column.type):
        try:
            return _as_array(column, pa.int64())
        except pa.ArrowInvalid:
            raise NotFast("an integer beyond 64 bits") from None
    raise NotFast("an integer column has another type")


def _number_column(column: pa.ChunkedArray | None, length: int) -> pa.Array:
    if column is None:
        return pa.nulls(length, pa.float64())
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return _as_array(column, pa.float64())
    raise NotFast("a number column has another type")


def _string_column(column: pa.ChunkedArray | None, length: int) -> pa.Array:
    if column is None:
        return pa.nulls(length, pa.string())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return _as_array(column, pa.string())
    raise NotFast("a string column has another type")


def _flattened(column: pa.ChunkedArray | None, type_: pa.DataType, length: int) -> pa.Array:
    if column is None:
        return pa.nulls(length, type_)
    if pa.types.is_string(type_):
        return _string_column(column, length)
    if column.type != type_:
        raise NotFast("a flattened column has another type")
    return _as_array(column, type_)


def _payload_fields(column: pa.ChunkedArray | None, length: int) -> tuple[dict[str, pa.Array], pa.Array]:
    """The payload's allow-listed keys as columns, and which rows' payloads were readable here."""
    if column is None:
        return {key: pa.nulls(length, type_) for key, type_ in PAYLOAD_FIELDS.items()}, pa.array([True] * length)
    if pa.types.is_struct(column.type):
        return _struct_payload(_as_array(column, column.type)), pa.array([True] * length)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return _text_payload(_as_array(column, pa.string()))
    raise NotFast("payload has another type")


def _struct_payload(payload: pa.StructArray) -> dict[str, pa.Array]:
    fields = {}
    names = {payload.type.field(index).name for index in range(payload.type.num_fields)}
    for key, type_ in PAYLOAD_FIELDS.items():
        if key not in names:
            fields[key] = pa.nulls(len(payload), type_)
            continue
        values = payload.field(key)
        if pa.types.is_null(values.type):
            fields[key] = pa.nulls(len(payload), type_)
        elif pa.types.is_list(type_) and (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
            fields[key] = values
        elif values.type == type_ or (pa.types.is_large_string(values.type) and type_ == pa.string()):
            fields[key] = values.cast(type_)
        elif pa.types.is_integer(values.type) and type_ == pa.int64():
            fields[key] = values.cast(type_)
        else:
            raise NotFast(f"payload field {key} has another type")
        # A struct's own null hides its children's values: keep them null as the dict would.
        fields[key] = pc.if_else(pc.is_valid(payload), fields[key], pa.nulls(len(payload), fields[key].type))
    return fields


PAYLOAD_BLOCK_BYTES = 1 << 20  # Arrow parses blocks of this size on its threads, both cores


def _text_payload(payload: pa.StringArray) -> tuple[dict[str, pa.Array], pa.Array]:
    """Payload strings parsed in one go by Arrow's JSON reader, one line a payload."""
    length = len(payload)
    # Arrow's reader takes "{}{}" as two rows and "null" as an empty one (or crashes on
    # it): only single-line texts that open and close an object go to it.
    trimmed = pc.utf8_trim_whitespace(payload)
    one_object = pc.and_(pc.starts_with(trimmed, "{"), pc.ends_with(trimmed, "}"))
    has_newline = pc.match_substring(payload, "\n")
    readable = pc.fill_null(pc.and_(one_object, pc.invert(has_newline)), False)
    lines = pc.if_else(readable, pc.fill_null(payload, "{}"), "{}")
    joined = pc.binary_join_element_wise(lines, "", "\n")
    _validity, offset_buffer, data = joined.buffers()
    offsets = pa.Array.from_buffers(pa.int32(), length + 1, [None, offset_buffer], offset=joined.offset)
    text = data.to_pybytes()[offsets[0].as_py(): offsets[length].as_py()] if length else b""
    # A block holds whole lines: one longer than a block would fail the batch.
    block_size = max(PAYLOAD_BLOCK_BYTES, (pc.max(pc.binary_length(lines)).as_py() or 0) + 2)
    try:
        parsed = pajson.read_json(
            io.BytesIO(text),
            read_options=pajson.ReadOptions(block_size=block_size, use_threads=True),
            parse_options=PAYLOAD_PARSE,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise NotFast("a payload is not an object of the expected shape") from None
    if parsed.num_rows != length:
        raise NotFast("the payloads did not parse one per row")
    return {key: _as_array(parsed.column(key), type_) for key, type_ in PAYLOAD_FIELDS.items()}, readable


# ---------------------------------------------------------------- rules as masks


def _all(*conditions: pa.Array) -> pa.Array:
    result = conditions[0]
    for condition in conditions[1:]:
        result = pc.and_kleene(result, condition)
    return result


def _null_or(values: pa.Array, condition: pa.Array) -> pa.Array:
    return pc.or_kleene(pc.is_null(values), pc.fill_null(condition, False))


def _finite_non_negative(values: pa.Array) -> pa.Array:
    return pc.and_(pc.is_finite(values), pc.greater_equal(values, 0))


def _agree(column: pa.Array, payload: pa.Array) -> pa.Array:
    both = pc.and_(pc.is_valid(column), pc.is_valid(payload))
    return pc.or_(pc.invert(both), pc.fill_null(pc.equal(column, payload), False))


def _outcome_rules(kind: pa.Array, flags: list[pa.Array], outcomes: list[pa.Array]) -> list[pa.Array]:
    """ADR-191's invariants: known outcomes, a flag beside every outcome, agreement, tool steps only."""
    rules = [_null_or(outcome, pc.is_in(outcome, value_set=OUTCOME_VALUES)) for outcome in outcomes]
    any_flag = pc.or_(pc.is_valid(flags[0]), pc.is_valid(flags[1]))
    any_outcome = pc.or_(pc.is_valid(outcomes[0]), pc.is_valid(outcomes[1]))
    rules.append(pc.or_(pc.invert(any_outcome), any_flag))
    for flag in flags:
        for outcome in outcomes:
            both = pc.and_(pc.is_valid(flag), pc.is_valid(outcome))
            agrees = pc.equal(flag, pc.not_equal(outcome, Outcome.OK.value))
            rules.append(pc.or_(pc.invert(both), pc.fill_null(agrees, False)))
    is_tool = pc.fill_null(pc.equal(kind, TOOL_KIND), False)
    rules.append(pc.or_(is_tool, pc.invert(pc.or_(any_flag, any_outcome))))
    return rules


def _servers_of(tool_names: pa.Array, known_servers: Sequence[str]) -> pa.Array:
    """``server_of`` for each distinct tool name, spread back over the rows."""
    distinct = pc.unique(tool_names).drop_null()
    servers = pa.array([n.server_of(name, known_servers) for name in distinct.to_pylist()], pa.string())
    positions = pc.index_in(tool_names, value_set=distinct)
    return pc.take(servers, positions)
