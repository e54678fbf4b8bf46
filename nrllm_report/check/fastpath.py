"""The fast path: a whole batch of raw rows checked and normalized with Arrow compute.

It only ever vouches for rows that pass every rule; every other row goes back to
the row-by-row checker in ``rows``, which is the definition of the rules. So
the fast path may be conservative, never different: a property test holds the
two to the same output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ..core import jsontext
from ..core.lists import all_true, relisted, rows_holding, with_positions
from ..core.model import TOOL_KIND, Outcome
from ..core.schema import (
    CANONICAL_FACTS,
    CHECKED_SCHEMA,
    COLUMN_SPELLINGS,
    FLATTENED_KEYS,
    INTEGER_COLUMNS,
    NAMES,
    OUTCOME_STATED,
    PAYLOAD_FIELDS,
)
from . import normalize
from .rows import PAYLOAD_KEY_TYPES

OUTCOME_VALUES = pa.array([outcome.value for outcome in Outcome])

PAYLOAD_SCHEMA = pa.schema(list(PAYLOAD_FIELDS.items()))

# Payload keys holding an integer ≥ 0, names, and content strings that are only measured.
PAYLOAD_COUNTS = ("promptTokens", "completionTokens", "totalTokens", "decidedBy", "messagesSentCount",
                  "toolArtifactsCount", "contentLength", "thinkingLength", "toolResultLength")
PAYLOAD_NAMES = tuple(key for key, type_ in PAYLOAD_FIELDS.items() if type_ == NAMES)
MEASURED = {"contentLength": "content", "thinkingLength": "thinking", "toolResultLength": "toolResult"}
# Content lists whose items are read for one field: requested calls' names, artifacts' types.
ITEM_FIELDS = {"requestedToolCalls": "name", "toolArtifacts": "type"}

# The fast path must read every payload key the row checker reads, or it would vouch for
# rows without looking at a key the rules look at.
assert set(PAYLOAD_FIELDS) == set(PAYLOAD_KEY_TYPES) | set(FLATTENED_KEYS)

# A canonical record's columns read only when a row has no payload.
CANONICAL_ONLY = (*CANONICAL_FACTS, OUTCOME_STATED)

# Plain numbers written as text, as the row checker reads them (normalize.py); integers only
# up to 18 digits, which int64 always holds: a 19-digit one may not fit, so the row checker decides.
INTEGER_TEXT = r"^[0-9]{1,18}$"
DECIMAL_TEXT = f"^{normalize.DECIMAL_TEXT.pattern}$"


class NotFast(Exception):
    """The batch has a shape the fast path does not handle; check it row by row."""


@dataclass
class FastResult:
    clean: pa.RecordBatch  # CHECKED_SCHEMA rows the fast path vouches for
    unclean: list[int]  # positions in the batch to check row by row


@dataclass
class Checked:
    """Columns of canonical values, and the conditions every clean row meets."""

    arrays: dict[str, pa.Array] = field(default_factory=dict)
    conditions: list[pa.Array] = field(default_factory=list)


def check_batch(
    table: pa.Table, *, input_index: int, rows: pa.Array, known_servers: Sequence[str]
) -> FastResult:
    """Canonical rows for the clean part of ``table`` (row numbers ``rows``); raises NotFast for odd shapes."""
    columns, single_spellings = _resolve_columns(table)
    length = table.num_rows
    checked = _table_columns(columns, length)
    checked.conditions += single_spellings
    payload, payload_ok = _payload_fields(columns.get("payload"), length, checked=checked)
    checked.conditions.append(payload_ok)
    if "payload" not in columns:
        _canonical_facts(table, length, checked=checked)
    elif any(name in table.column_names and table.column(name).null_count < length for name in CANONICAL_ONLY):
        raise NotFast("facts both in a payload and at the top level")  # each row reads one of them
    else:
        _payload_facts(payload, length, checked=checked)
    stated = _tool_columns(columns, payload, known_servers=known_servers, checked=checked)
    _outcome_stated(stated, None if "payload" in columns else table, checked=checked)
    checked.arrays["input_index"] = pa.repeat(pa.scalar(input_index, pa.int32()), length)
    checked.arrays["row"] = rows
    batch = pa.RecordBatch.from_arrays(
        [_as_array(checked.arrays[field.name], field.type) for field in CHECKED_SCHEMA], schema=CHECKED_SCHEMA
    )
    clean_mask = pc.fill_null(_all(*checked.conditions), False)
    unclean = pc.indices_nonzero(pc.invert(clean_mask)).to_pylist()
    return FastResult(batch.filter(clean_mask), unclean)


# ---------------------------------------------------------------- columns


def _resolve_columns(table: pa.Table) -> tuple[dict[str, pa.Array], list[pa.Array]]:
    """Each canonical column under whichever spelling holds values (an all-null column is absent),
    and masks of the rows that give a column under one spelling at most.

    A row giving two spellings is left to the row checker, which compares their JSON types
    too (``12`` and ``12.0`` disagree), where Arrow has already made them one type.
    """
    names = set(table.column_names)
    if len(names) != table.num_columns:
        raise NotFast("two columns have one name")  # read row by row, as JSON's repeated keys: the last wins
    columns, single = {}, []
    for name, spellings in COLUMN_SPELLINGS.items():
        present = [
            _decoded(_as_array(table.column(spelling), table.column(spelling).type)) for spelling in spellings
            if spelling in names and table.column(spelling).null_count < table.num_rows
        ]
        present = [values for values in present if not pa.types.is_null(values.type)]
        if len(present) > 1:
            if len({values.type for values in present}) > 1:
                raise NotFast(f"{name} is given under two spellings of different types")
            given = [pc.cast(pc.is_valid(values), pa.int8()) for values in present]
            single.append(pc.less_equal(_sum(given), 1))
            present = [pc.coalesce(*present)]
        if present:
            columns[name] = present[0]
    return columns, single


def _sum(values: list[pa.Array]) -> pa.Array:
    total = values[0]
    for more in values[1:]:
        total = pc.add(total, more)
    return total


def _decoded(values: pa.Array) -> pa.Array:
    """A dictionary-encoded column (a pandas category, say) as its plain values."""
    return values.dictionary_decode() if pa.types.is_dictionary(values.type) else values


def _as_array(values: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values if values.type == type_ else values.cast(type_)


def _is_text_type(type_: pa.DataType) -> bool:
    is_view = getattr(pa.types, "is_string_view", lambda _type: False)
    return pa.types.is_string(type_) or pa.types.is_large_string(type_) or is_view(type_)


def _table_columns(columns: dict[str, pa.Array], length: int) -> Checked:
    """run, sequence, kind, round, durationMs, crdate (and uid, checked only) with their rules."""
    checked = Checked()
    run = _run_column(columns.get("run"), length)
    kind = _string_column(columns.get("kind"), length)
    numbers = {}
    for name in INTEGER_COLUMNS:
        numbers[name], readable = _integer_column(columns.get(name), length)
        checked.conditions += [readable, _null_or(numbers[name], pc.greater_equal(numbers[name], 0))]
    duration, readable = _number_column(columns.get("durationMs"), length)
    checked.conditions += [
        readable, _null_or(duration, _finite_non_negative(duration)),
        pc.is_valid(run), pc.not_equal(run, ""), pc.is_valid(numbers["sequence"]),
        pc.is_valid(kind), pc.not_equal(kind, ""),
    ]
    checked.arrays.update(
        run=run, sequence=numbers["sequence"], kind=kind, round=pc.fill_null(numbers["round"], 0),
        durationMs=pc.fill_null(duration, 0.0), crdate=numbers["crdate"],
    )
    return checked


def _run_column(column: pa.Array | None, length: int) -> pa.Array:
    if column is None:
        return pa.nulls(length, pa.string())
    if _is_text_type(column.type):
        return _as_array(column, pa.string())
    if pa.types.is_integer(column.type):
        return column.cast(pa.string())  # any width: a uint64 past int64 too
    raise NotFast("run has another type")


def _integer_column(column: pa.Array | None, length: int) -> tuple[pa.Array, pa.Array]:
    """A table column's integers (null where absent or unreadable), and which rows it can vouch
    for: a JSON integer, or text of plain digits (``"12"``) short enough for int64."""
    if column is None:
        return pa.nulls(length, pa.int64()), all_true(length)
    if pa.types.is_integer(column.type):
        return _int64(column)
    if _is_text_type(column.type):
        return _parsed_text(_as_array(column, pa.string()), INTEGER_TEXT, type_=pa.int64())
    raise NotFast("an integer column has another type")


def _int64(column: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Integers of any width as int64, and the rows it holds: a uint64 past int64 is not vouched for."""
    if not pa.types.is_uint64(column.type):
        return column.cast(pa.int64()), all_true(len(column))
    fits = pc.fill_null(pc.less_equal(column, pa.scalar(normalize.MAX_INT64, pa.uint64())), True)
    return pc.if_else(fits, column, pa.scalar(0, column.type)).cast(pa.int64()), fits


def _number_column(column: pa.Array | None, length: int) -> tuple[pa.Array, pa.Array]:
    """``durationMs`` as floats, and which rows it can vouch for (see ``_integer_column``)."""
    if column is None:
        return pa.nulls(length, pa.float64()), all_true(length)
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return _float64(column), all_true(length)
    if _is_text_type(kind):
        values, readable = _parsed_text(_as_array(column, pa.string()), DECIMAL_TEXT, type_=pa.float64())
        return _float64(values), readable
    raise NotFast("a number column has another type")


def _float64(values: pa.Array) -> pa.Array:
    """Any number as float64, correctly rounded as Python's ``float`` rounds it; -0 is 0."""
    if pa.types.is_decimal(values.type):
        values = values.cast(pa.string())  # Arrow's decimal-to-float cast is not correctly rounded; its parse is
    return pc.add(values.cast(pa.float64(), safe=False), 0.0)


def _parsed_text(texts: pa.Array, pattern: str, *, type_: pa.DataType) -> tuple[pa.Array, pa.Array]:
    """Numbers written as text: those matching ``pattern`` cast, the others null and unvouched."""
    plain = pc.match_substring_regex(texts, pattern)
    values = pc.if_else(plain, texts, pa.scalar(None, pa.string())).cast(type_)
    return values, pc.or_(pc.is_null(texts), pc.fill_null(plain, False))


def _string_column(column: pa.Array | None, length: int) -> pa.Array:
    if column is None:
        return pa.nulls(length, pa.string())
    if _is_text_type(column.type):
        return _as_array(column, pa.string())
    raise NotFast("a string column has another type")


def _flattened(column: pa.ChunkedArray | None, type_: pa.DataType, *, length: int) -> pa.Array:
    if column is None:
        return pa.nulls(length, type_)
    if pa.types.is_string(type_):
        return _string_column(column, length)
    if column.type != type_:
        raise NotFast("a flattened column has another type")
    return _as_array(column, type_)


# ---------------------------------------------------------------- the payload


def _payload_fields(
    column: pa.Array | None, length: int, *, checked: Checked
) -> tuple[dict[str, pa.Array], pa.Array]:
    """The payload's allow-listed keys as columns, and which rows' payloads were readable here."""
    readable = all_true(length)
    if column is None:
        return {key: pa.nulls(length, type_) for key, type_ in PAYLOAD_FIELDS.items()}, readable
    if pa.types.is_struct(column.type):
        return _struct_payload(column, checked), readable
    if _is_text_type(column.type):
        return _text_payload(_as_array(column, pa.string()))
    raise NotFast("payload has another type")


def _struct_payload(payload: pa.StructArray, checked: Checked) -> dict[str, pa.Array]:
    fields = {}
    names = {payload.type.field(index).name for index in range(payload.type.num_fields)}
    if len(names) != payload.type.num_fields:
        raise NotFast("two payload fields have one name")
    for key, type_ in PAYLOAD_FIELDS.items():
        if key not in names or pa.types.is_null(payload.field(key).type):
            fields[key] = pa.nulls(len(payload), type_)
            continue
        fields[key] = _struct_field(_decoded(payload.field(key)), key, type_=type_, checked=checked)
        # A struct's own null hides its children's values: keep them null as the dict would.
        fields[key] = pc.if_else(pc.is_valid(payload), fields[key], pa.nulls(len(payload), fields[key].type))
    return fields


def _struct_field(values: pa.Array, key: str, *, type_: pa.DataType, checked: Checked) -> pa.Array:
    """A struct payload's field as the type the fast path reads (rows it cannot hold are not
    vouched for), or NotFast."""
    if pa.types.is_list(type_):
        if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)):
            raise NotFast(f"payload field {key} is not a list")
        item = values.type.value_type
        if type_ == NAMES and not _is_text_type(item):
            raise NotFast(f"payload field {key} is not a list of strings")
        if key in ITEM_FIELDS and not pa.types.is_struct(item):
            raise NotFast(f"payload field {key} is not a list of objects")
        return values.cast(NAMES) if type_ == NAMES else values
    number = pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or pa.types.is_decimal(values.type)
    if number and type_ == pa.float64():
        return _float64(values)
    if pa.types.is_integer(values.type) and type_ == pa.int64():
        integers, fits = _int64(values)
        checked.conditions.append(fits)
        return integers
    if values.type == type_ or (_is_text_type(values.type) and type_ == pa.string()):
        return values.cast(type_)
    raise NotFast(f"payload field {key} has another type")


PAYLOAD_BLOCK_BYTES = 1 << 20  # Arrow parses blocks of this size on its threads, both cores


def _text_payload(payload: pa.StringArray) -> tuple[dict[str, pa.Array], pa.Array]:
    """Payload strings parsed in one go by Arrow's JSON reader, one line a payload, and which
    rows' payloads it read as the row checker would."""
    # Arrow's reader takes "{}{}" as two rows and "null" as an empty one (or crashes on
    # it): only single-line texts that open and close an object go to it, and of those
    # only the ones it reads as ``jsontext.loads`` does (see ``arrow_may_differ``).
    trimmed = pc.utf8_trim_whitespace(payload)
    readable = pc.and_(pc.starts_with(trimmed, "{"), pc.ends_with(trimmed, "}"))  # one object
    if jsontext.any_text_holds(payload, b"\n"):  # and on one line
        readable = pc.and_(readable, pc.invert(pc.match_substring(payload, "\n")))
    readable = pc.fill_null(readable, True)  # null: absent, read as {}
    if pc.any(readable).as_py():
        readable = pc.and_(readable, pc.invert(jsontext.arrow_may_differ(payload)))
    lines = pc.if_else(readable, pc.fill_null(payload, "{}"), "{}")
    parsed, failed = jsontext.read_json_lines(lines, PAYLOAD_SCHEMA, block_bytes=PAYLOAD_BLOCK_BYTES, use_threads=True)
    if parsed is None:
        return {key: pa.nulls(len(payload), type_) for key, type_ in PAYLOAD_FIELDS.items()}, pa.array(
            [False] * len(payload), pa.bool_())
    readable = with_positions(readable, failed, value=False)
    fields = {key: _as_array(parsed.column(key), type_) for key, type_ in PAYLOAD_FIELDS.items()}
    return ({key: _float64(values) if values.type == pa.float64() else values for key, values in fields.items()},
            readable)


def _payload_facts(payload: dict[str, pa.Array], length: int, *, checked: Checked) -> None:
    """The facts as ``rows.PAYLOAD_FACTS`` derives them: the metadata key first, else the
    content's count, length in characters, or its items' names and types."""
    facts, conditions = checked.arrays, checked.conditions
    for key in PAYLOAD_COUNTS:
        conditions.append(_null_or(payload[key], pc.greater_equal(payload[key], 0)))
    conditions.append(_null_or(payload["estimatedCost"], _finite_non_negative(payload["estimatedCost"])))
    conditions += [_no_null_items(payload[key], length) for key in PAYLOAD_NAMES]
    items = {}
    for key, item_field in ITEM_FIELDS.items():
        items[key], complete = _item_texts(payload[key], item_field, length=length)
        conditions.append(complete)  # an item without one is skipped row by row: leave it to that path
    for name in ("finishReason", "promptTokens", "completionTokens", "totalTokens", "estimatedCost",
                 "approved", "decidedBy", "contentRedacted", "toolSpecs", "droppedSources"):
        facts[name] = payload[name]
    facts["requestedToolNames"] = _first_valid(payload["requestedToolNames"], items["requestedToolCalls"])
    facts["toolArtifactTypes"] = _first_valid(payload["toolArtifactTypes"], items["toolArtifacts"])
    facts["messageCount"] = _first_valid(payload["messagesSentCount"], _lengths(payload["messagesSent"]))
    facts["artifactCount"] = _first_valid(payload["toolArtifactsCount"], _lengths(payload["toolArtifacts"]))
    facts["requestedToolCallCount"] = _lengths(facts["requestedToolNames"])
    facts["toolSpecCount"] = _lengths(payload["toolSpecs"])
    facts["droppedSourceCount"] = _lengths(payload["droppedSources"])
    for name, content in MEASURED.items():
        facts[name] = _first_valid(payload[name], pc.cast(pc.utf8_length(payload[content]), pa.int64()))


def _canonical_facts(table: pa.Table, length: int, *, checked: Checked) -> None:
    """A row without a payload (a canonical record): its facts at its top level."""
    for name, type_ in CANONICAL_FACTS.items():
        column = table.column(name) if name in table.column_names else None
        values = _canonical_column(column, name, type_=type_, length=length, checked=checked)
        checked.arrays[name] = values
        if type_ == pa.int64():
            checked.conditions.append(_null_or(values, pc.greater_equal(values, 0)))
        elif type_ == pa.float64():
            checked.conditions.append(_null_or(values, _finite_non_negative(values)))
        elif type_ == NAMES:
            checked.conditions.append(_no_null_items(values, length))


def _canonical_column(
    column: pa.ChunkedArray | None, name: str, *, type_: pa.DataType, length: int, checked: Checked
) -> pa.Array:
    """A canonical record's fact column as the fast path reads it; numbers as every number is
    read (``_int64``, ``_float64``), so a row it cannot hold is not vouched for."""
    if column is None or column.null_count == len(column):
        return pa.nulls(length, type_)
    kind = column.type
    fits = (
        (type_ == pa.int64() and pa.types.is_integer(kind))
        or (type_ == pa.float64() and (pa.types.is_floating(kind) or pa.types.is_integer(kind)))
        or (type_ == pa.string() and _is_text_type(kind))
        or (type_ == pa.bool_() and pa.types.is_boolean(kind))
        or (type_ == NAMES and (pa.types.is_list(kind) or pa.types.is_large_list(kind))
            and _is_text_type(kind.value_type))
    )
    if not fits:
        raise NotFast(f"{name} has another type")
    values = _as_array(column, kind)
    if type_ == pa.float64():
        return _float64(values)
    if type_ == pa.int64():
        integers, readable = _int64(values)
        checked.conditions.append(readable)
        return integers
    return values.cast(type_)


def _lengths(lists: pa.Array) -> pa.Array:
    return pc.cast(pc.list_value_length(lists), pa.int64())


def _first_valid(first: pa.Array, second: pa.Array) -> pa.Array:
    return pc.if_else(pc.is_valid(first), first, second)


def _no_null_items(lists: pa.Array, length: int) -> pa.Array:
    """Rows whose list holds no null item (a name list's items must be strings)."""
    items = pc.list_flatten(lists)
    if items.null_count == 0:
        return all_true(length)
    return pc.invert(rows_holding(lists, pc.is_null(items)))


def _item_texts(lists: pa.Array, item_field: str, *, length: int) -> tuple[pa.Array, pa.Array]:
    """Each list's items' ``item_field`` as a list of strings, and the rows where every item is
    an object holding a string there."""
    items = pc.list_flatten(lists)
    struct = items.type
    if struct.get_field_index(item_field) >= 0 and _is_text_type(struct.field(item_field).type):
        texts = pc.cast(pc.struct_field(items, item_field), pa.string())
    else:
        texts = pa.nulls(len(items), pa.string())
    complete = all_true(length) if texts.null_count == 0 else pc.invert(rows_holding(lists, pc.is_null(texts)))
    return relisted(lists, texts), complete


# ---------------------------------------------------------------- tool columns and the outcome


def _tool_columns(
    columns: dict[str, pa.ChunkedArray], payload: dict[str, pa.Array], *, known_servers: Sequence[str],
    checked: Checked,
) -> pa.Array:
    """toolName, server, toolIsError and the outcome (ADR-191), and their rules; returns the
    outcome each row states (null where it states none or only a flag)."""
    length = len(checked.arrays["kind"])
    kind = checked.arrays["kind"]
    flat = {key: _flattened(columns.get(key), PAYLOAD_FIELDS[key], length=length) for key in FLATTENED_KEYS}
    checked.conditions += _outcome_rules(kind, [flat["toolIsError"], payload["toolIsError"]],
                                         outcomes=[flat["toolOutcome"], payload["toolOutcome"]])
    checked.conditions += [_agree(flat[key], payload[key]) for key in FLATTENED_KEYS]
    checked.conditions += _server_rules(flat["server"], payload["server"])
    is_tool = pc.fill_null(pc.equal(kind, TOOL_KIND), False)
    tool_name = pc.coalesce(flat["toolName"], payload["toolName"])
    flag = pc.coalesce(flat["toolIsError"], payload["toolIsError"])
    stated = pc.coalesce(flat["toolOutcome"], payload["toolOutcome"])
    legacy = pc.if_else(flag, Outcome.FAILED.value, Outcome.OK.value)
    given_server = pc.coalesce(flat["server"], payload["server"])
    checked.arrays.update(
        toolName=tool_name,
        server=pc.if_else(is_tool, pc.coalesce(given_server, _servers_of(tool_name, known_servers)),
                          pa.nulls(length, pa.string())),
        toolIsError=flag,
        outcome=pc.if_else(pc.is_valid(flag), pc.coalesce(stated, legacy), pa.nulls(length, pa.string())),
    )
    return stated


def _outcome_stated(stated_outcomes: pa.Array, canonical: pa.Table | None, *, checked: Checked) -> None:
    """Whether a step's outcome was stated (``toolOutcome``) or read from a legacy flag; a
    canonical record says so itself (``outcomeStated``), since its ``outcome`` is always there."""
    flag, length = checked.arrays["toolIsError"], len(checked.arrays["toolIsError"])
    stated = pc.is_valid(stated_outcomes)
    if canonical is not None and OUTCOME_STATED in canonical.column_names:
        given = canonical.column(OUTCOME_STATED)
        if given.null_count < len(given):
            if not pa.types.is_boolean(given.type):
                raise NotFast(f"{OUTCOME_STATED} has another type")
            stated = pc.coalesce(_as_array(given, pa.bool_()), stated)
    checked.arrays["outcomeStated"] = pc.if_else(pc.is_valid(flag), stated, pa.nulls(length, pa.bool_()))


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


def _server_rules(*servers: pa.Array) -> list[pa.Array]:
    """A server, where given, is a non-empty string (as ``run`` and ``kind`` are)."""
    return [_null_or(server, pc.not_equal(server, "")) for server in servers]


def _outcome_rules(kind: pa.Array, flags: list[pa.Array], *, outcomes: list[pa.Array]) -> list[pa.Array]:
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
    servers = pa.array([normalize.server_of(name, known_servers) for name in distinct.to_pylist()], pa.string())
    positions = pc.index_in(tool_names, value_set=distinct)
    return pc.take(servers, positions)
