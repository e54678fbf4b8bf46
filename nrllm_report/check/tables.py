"""The rows of the tables besides the events, checked like the events' (issue 20).

Each column a report reads is converted to its kind (``core.tables.ColumnKind``) on
whole Arrow columns: integers and decimals may come as text (phpMyAdmin, CSV, PHP's
driver), flags as 0/1, true/false or text of them. A row with a value that is not of
its column's kind (``bad-type``), a coded value outside its set (``unknown-value``), a
missing join column (``missing-field``), or a ``uid`` an earlier row of the table had
(``duplicate-row``) is rejected and listed with the table's name, the file and the row;
a rejected row never stops a build. What passes is one Arrow table per table, typed,
with the file and row of each row beside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..core.model import N_, Problem, Rule, Unreadable
from ..core.tables import (
    CALLS_TABLE,
    GOVERNANCE_TABLE,
    RUNS_TABLE,
    SERVERS_TABLE,
    TABLES,
    TOOLS_TABLE,
    ColumnKind,
    TableSpec,
)
from ..readers.chunks import ArrowChunk, Chunk
from ..readers.tables import TableInput

ARROW_KINDS: dict[ColumnKind, pa.DataType] = {
    ColumnKind.INTEGER: pa.int64(), ColumnKind.DECIMAL: pa.float64(), ColumnKind.TEXT: pa.string(),
    ColumnKind.FLAG: pa.bool_(),
}
EXPECTED: dict[ColumnKind, str] = {
    ColumnKind.INTEGER: N_("an integer"), ColumnKind.DECIMAL: N_("a number"), ColumnKind.TEXT: N_("a string"),
    ColumnKind.FLAG: N_("0 or 1"),
}
INTEGER_TEXT = r"^\s*[-+]?[0-9]{1,18}(\.0*)?\s*$"
DECIMAL_TEXT = r"^\s*[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$"
FLAG_TEXTS = {"0": False, "1": True, "false": False, "true": True}
# Which columns a row cannot be joined without: one of each group must be given.
JOIN_COLUMNS: dict[str, tuple[tuple[str, ...], ...]] = {
    RUNS_TABLE: (("uid", "uuid"),),
    CALLS_TABLE: (),
    GOVERNANCE_TABLE: (("decision",),),
    TOOLS_TABLE: (("tool_name",), ("server",)),
    SERVERS_TABLE: (("uid",), ("identifier",)),
}
INPUT_COLUMN, ROW_COLUMN = "input", "row"  # where each kept row came from


@dataclass
class CheckedTables:
    """The kept rows of each table (typed, with ``input`` and ``row``), the problems found,
    and the rows read and rejected."""

    tables: dict[str, pa.Table] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    rows_read: int = 0
    rows_rejected: int = 0
    names: list[str] = field(default_factory=list)  # the inputs, in the order given


def check_tables(inputs: Iterable[TableInput]) -> CheckedTables:
    """Every table input read and checked; the rows of one table from several files are one table."""
    checked = CheckedTables()
    parts: dict[str, list[pa.Table]] = {}
    for source in inputs:
        checked.names.append(source.name)
        spec = TABLES[source.table]
        for chunk in source.chunks():
            table, problems, read = _checked_chunk(chunk, spec, name=source.name)
            checked.rows_read += read
            checked.problems.extend(problems)
            checked.rows_rejected += len(problems)
            if table.num_rows:
                parts.setdefault(spec.name, []).append(table)
    for name, tables in parts.items():
        table = pa.concat_tables(tables)
        table, duplicates = _without_duplicates(table, TABLES[name])
        checked.problems.extend(duplicates)
        checked.rows_rejected += len(duplicates)
        checked.tables[name] = table
    return checked


def _checked_chunk(chunk: Chunk, spec: TableSpec, *, name: str) -> tuple[pa.Table, list[Problem], int]:
    """A chunk's kept rows as a typed table, the problems of the others, and the rows read."""
    problems: list[Problem] = []
    if isinstance(chunk, ArrowChunk):
        raw = chunk.table
        numbers = chunk.numbers()
        unread = chunk.unread
        if unread is not None and pc.any(unread).as_py():
            keep = pc.invert(unread)
            for position in pc.indices_nonzero(unread).to_pylist():
                problems += _row_problems(chunk.raw_row(position), int(numbers[position].as_py()), spec=spec, name=name)
            raw, numbers = raw.filter(keep), numbers.filter(keep)
    else:
        rows = []
        row_numbers = []
        for number, value in chunk.rows:
            if isinstance(value, dict):
                rows.append({key: _as_text(item) for key, item in value.items() if key in spec.columns})
                row_numbers.append(number)
            else:
                problems += _row_problems(value, number, spec=spec, name=name)
        present = [column for column in spec.columns if any(column in row for row in rows)]
        raw = pa.table({column: pa.array([row.get(column) for row in rows], pa.string()) for column in present})
        numbers = pa.array(row_numbers, pa.int64())
    read = len(numbers) + len(problems)
    typed, bad = _typed(raw, spec, rows=len(numbers))
    bad_rows = _reasons(typed, bad, spec=spec)
    if bad_rows:
        numbers_list = numbers.to_pylist()
        for position, (rule, message, params) in sorted(bad_rows.items()):
            problems.append(_problem(name, numbers_list[position], rule=rule, message=message, spec=spec, params=params,
                                     run=_run_of(typed, position, spec=spec)))
        keep = pa.array([position not in bad_rows for position in range(typed.num_rows)], pa.bool_())
        typed, numbers = typed.filter(keep), numbers.filter(keep)
    typed = typed.append_column(INPUT_COLUMN, pa.array([name] * typed.num_rows, pa.string()))
    typed = typed.append_column(ROW_COLUMN, numbers)
    return typed, problems, read


def _as_text(value: Any) -> Any:
    """A JSON value as the text a delimited export would hold (a nested value stays, to be refused)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    return NESTED


NESTED = "\x00nested"  # a list or an object where a column holds a plain value


def _typed(raw: pa.Table, spec: TableSpec, *, rows: int) -> tuple[pa.Table, dict[str, pa.Array]]:
    """Every column of the spec in its kind (null where absent), and per column where a value was bad."""
    columns: dict[str, pa.Array] = {}
    bad: dict[str, pa.Array] = {}
    for column, kind in spec.columns.items():
        if column not in raw.column_names:
            columns[column] = pa.nulls(rows, ARROW_KINDS[kind])
            continue
        values = raw.column(column).combine_chunks() if rows else pa.array([], raw.schema.field(column).type)
        converted, wrong = _converted(values, kind)
        columns[column] = converted
        if wrong is not None and pc.any(wrong).as_py():
            bad[column] = wrong
    return pa.table(columns), bad


def _converted(values: pa.Array, kind: ColumnKind) -> tuple[pa.Array, pa.Array | None]:
    """``values`` in ``kind`` (null where bad), and True where a value was given but is not of it."""
    target = ARROW_KINDS[kind]
    value_type = values.type
    if pa.types.is_null(value_type):
        return pa.nulls(len(values), target), None
    if pa.types.is_dictionary(value_type):
        values = values.cast(value_type.value_type)
        value_type = values.type
    if kind is ColumnKind.TEXT:
        if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
            return _nested_refused(values.cast(pa.string()))
        if pa.types.is_integer(value_type):
            return values.cast(pa.string()), None
        return pa.nulls(len(values), target), pc.is_valid(values)
    if pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
        values = values.cast(pa.string())
        if kind is ColumnKind.FLAG:
            folded = pc.utf8_lower(pc.utf8_trim_whitespace(values))
            good = pc.is_in(folded, value_set=pa.array(list(FLAG_TEXTS)))
            converted = pc.is_in(folded, value_set=pa.array(["1", "true"]))
            return _masked(converted, good), _wrong(values, good)
        pattern = INTEGER_TEXT if kind is ColumnKind.INTEGER else DECIMAL_TEXT
        good = pc.match_substring_regex(values, pattern)
        text = pc.if_else(good, pc.utf8_trim_whitespace(values), pa.scalar(None, pa.string()))
        text = pc.replace_substring_regex(text, r"^\+", "")
        if kind is ColumnKind.INTEGER:
            converted = pc.cast(pc.replace_substring_regex(text, r"\.0*$", ""), pa.int64())
        else:
            converted = pc.cast(text, pa.float64())
        return converted, _wrong(values, good)
    if pa.types.is_boolean(value_type):
        return (values, None) if kind is ColumnKind.FLAG else (values.cast(target), None)
    if pa.types.is_integer(value_type) or pa.types.is_floating(value_type) or pa.types.is_decimal(value_type):
        numbers = values.cast(pa.float64()) if not pa.types.is_integer(value_type) else values
        if kind is ColumnKind.DECIMAL:
            return values.cast(pa.float64()), None
        if kind is ColumnKind.FLAG:
            good = pc.is_in(numbers.cast(pa.float64()), value_set=pa.array([0.0, 1.0]))
            return _masked(pc.equal(numbers.cast(pa.float64()), 1.0), good), _wrong(values, good)
        if pa.types.is_integer(value_type):
            return values.cast(pa.int64()), None
        good = pc.equal(pc.floor(numbers), numbers)
        return _masked(pc.cast(numbers, pa.int64(), safe=False), good), _wrong(values, good)
    return pa.nulls(len(values), target), pc.is_valid(values)


def _nested_refused(values: pa.Array) -> tuple[pa.Array, pa.Array | None]:
    nested = pc.fill_null(pc.equal(values, NESTED), False)
    if not pc.any(nested).as_py():
        return values, None
    return pc.if_else(nested, pa.scalar(None, pa.string()), values), nested


def _masked(values: pa.Array, good: pa.Array) -> pa.Array:
    return pc.if_else(pc.fill_null(good, False), values, pa.scalar(None, values.type))


def _wrong(values: pa.Array, good: pa.Array) -> pa.Array:
    """Given but not good."""
    return pc.and_(pc.is_valid(values), pc.invert(pc.fill_null(good, False)))


def _reasons(typed: pa.Table, bad: dict[str, pa.Array], *, spec: TableSpec) -> dict[int, tuple[Rule, str, dict[str,
                                                                                                               str]]]:
    """Each rejected row's first reason: a missing join column, a bad value, an unknown value."""
    reasons: dict[int, tuple[Rule, str, dict[str, str]]] = {}
    for group in JOIN_COLUMNS.get(spec.name, ()):
        given = None
        for column in group:
            present = pc.is_valid(typed.column(column))
            if spec.columns[column] is ColumnKind.TEXT:
                present = pc.and_(present, pc.fill_null(pc.not_equal(typed.column(column), ""), False))
            given = present if given is None else pc.or_(given, present)
        for position in pc.indices_nonzero(pc.invert(given)).to_pylist():
            reasons.setdefault(position, (Rule.MISSING_FIELD, N_("%(table)s: %(field)s is missing or null"),
                                          {"field": " / ".join(group)}))
    for column, wrong in bad.items():
        for position in pc.indices_nonzero(wrong).to_pylist():
            reasons.setdefault(position, (Rule.BAD_TYPE, N_("%(table)s: %(field)s must be %(expected)s"),
                                          {"field": column, "expected": EXPECTED[spec.columns[column]]}))
    for column, allowed in spec.values.items():
        values = typed.column(column)
        outside = pc.and_(pc.is_valid(values), pc.invert(pc.is_in(values, value_set=pa.array(list(allowed)))))
        if not pc.any(outside).as_py():
            continue
        for position in pc.indices_nonzero(outside).to_pylist():
            reasons.setdefault(position, (Rule.UNKNOWN_VALUE,
                                          N_("%(table)s: %(field)s is %(value)s, which nr-llm does not write there"),
                                          {"field": column, "value": repr(values[position].as_py())}))
    return reasons


def _row_problems(value: Any, number: int, *, spec: TableSpec, name: str) -> list[Problem]:
    """A row that could not be read, or is not an object."""
    if isinstance(value, Unreadable):
        return [_problem(name, number, rule=Rule.UNREADABLE_ROW, message=value.message, spec=spec,
                         params=dict(value.params), run=None)]
    return [_problem(name, number, rule=Rule.BAD_TYPE,
                     message=N_("%(table)s: the record is not a JSON object but %(type)s"), spec=spec,
                     params={"type": type(value).__name__}, run=None)]


def _problem(name: str, row: int, *, rule: Rule, message: str, spec: TableSpec, params: dict[str, str],
             run: str | None) -> Problem:
    """A table row's problem: its message names the table (``%(table)s``), in every language."""
    return Problem(name, row, rule, message, (("table", spec.name), *sorted(params.items())), run=run)


def _run_of(typed: pa.Table, position: int, *, spec: TableSpec) -> str | None:
    """The run a table's row is about, as far as it says (for the timeline's problems of a run)."""
    for column in ("uuid", "correlation_id", "agentrun_uid") if spec.name != TOOLS_TABLE else ():
        if column in spec.columns:
            value = typed.column(column)[position].as_py()
            if value not in (None, "", 0):
                return str(value)
    if spec.name == RUNS_TABLE:
        uid = typed.column("uid")[position].as_py()
        return None if uid is None else str(uid)
    return None


def _without_duplicates(table: pa.Table, spec: TableSpec) -> tuple[pa.Table, list[Problem]]:
    """The table without the rows whose key an earlier row had (rows without a key all stay)."""
    keys = table.column(spec.key)
    if table.num_rows == 0 or pc.count(keys).as_py() == pc.count_distinct(keys).as_py():
        return table, []
    seen: dict[Any, tuple[str, int]] = {}
    keep: list[bool] = []
    problems: list[Problem] = []
    for position, (key, source, row) in enumerate(zip(keys.to_pylist(), table.column(INPUT_COLUMN).to_pylist(),
                                                       table.column(ROW_COLUMN).to_pylist())):
        if key is None or key not in seen:
            if key is not None:
                seen[key] = (source, row)
            keep.append(True)
            continue
        keep.append(False)
        first_input, first_row = seen[key]
        problems.append(_problem(source, row, rule=Rule.DUPLICATE_ROW,
                                 message=N_("%(table)s: %(key)s %(value)s is also in row %(first_row)s of "
                                            "%(first_input)s; this later row is rejected"),
                                 spec=spec, params={"key": spec.key, "value": str(key), "first_row": str(first_row),
                                                    "first_input": first_input},
                                 run=_run_of(table, position, spec=spec)))
    return table.filter(pa.array(keep, pa.bool_())), problems
