"""Which of nr-llm's tables each input holds, and the inputs of the tables besides the events.

A table is told by its name where the container carries it (a phpMyAdmin export's
``table`` objects; a file or dataset whose name starts with the table's name, such as
``tx_nrllm_agentrun.csv``), else by its columns (``core.tables``' marks). One
phpMyAdmin export may hold several tables: it is then one input per table. A file whose
columns fit no table is refused, naming the columns it lacks of the table it comes
closest to. A JSON file's records each name their own columns: its first record tells,
and a file of records that merely lack some of the events' columns stays the events',
whose checker names each row's missing field.
"""

from __future__ import annotations

from ..core.errors import InputError
from ..core.tables import EVENT_MARKS, EVENTS_TABLE, TABLE_NAMES_LONGEST_FIRST, TABLES
from .inputs import Input, TableInput

__all__ = ["TableInput", "split_inputs", "table_input", "tables_of"]


def split_inputs(inputs: list[Input]) -> tuple[list[Input], list[TableInput]]:
    """The inputs of step events, and those of the other tables, in the order given."""
    events: list[Input] = []
    others: list[TableInput] = []
    for source in inputs:
        for table in tables_of(source):
            if table == EVENTS_TABLE:
                events.append(source)
            else:
                others.append(table_input(source, table))
    return events, others


def tables_of(source: Input) -> list[str]:
    """The tables an input holds: by the container's word, else the name, else the columns."""
    held = source.reader.tables(source)  # a database, a phpMyAdmin export
    if held is not None:
        return held
    if source.path is None:
        return [EVENTS_TABLE]  # standard input: the events
    lowered = source.path.name.lower()
    for table in TABLE_NAMES_LONGEST_FIRST:
        if lowered.startswith(table):
            return [table]
    return [_table_by_columns(source)]


def table_input(source: Input, table: str) -> TableInput:
    """The input's rows of ``table``, read by the reader of its format (or in the database's session)."""
    return source.reader.table_input(source, table)


def _table_by_columns(source: Input) -> str:
    """The table whose marks the input's columns hold; the events where they hold the events'."""
    columns = source.reader.columns(source)
    if columns is None:
        return EVENTS_TABLE  # empty, or nothing to tell by: the events' reader says what it finds
    if all(mark in columns for mark in EVENT_MARKS):
        return EVENTS_TABLE
    fitting = [spec for spec in TABLES.values() if all(mark in columns for mark in spec.marks)]
    if fitting:
        return max(fitting, key=lambda spec: len(spec.marks)).name
    if any(mark in columns for mark in EVENT_MARKS):
        return EVENTS_TABLE  # the events' reader names what is missing: a CSV header, or row by row
    raise InputError(source.name, _fits_no_table(columns, source.reader.header_row))


def _fits_no_table(columns: set[str], header_row: bool) -> str:
    """One line: what the file lacks of the table it comes closest to, and what it names."""
    candidates = [(EVENTS_TABLE, EVENT_MARKS)] + [(spec.name, spec.marks) for spec in TABLES.values()]
    table, marks = min(candidates, key=lambda item: sum(mark not in columns for mark in item[1]) / len(item[1]))
    lacking = [mark for mark in marks if mark not in columns]
    what = "the step events" if table == EVENTS_TABLE else table
    shown = sorted(columns)
    named = ", ".join(repr(column) for column in shown[:12]) + (", ..." if len(shown) > 12 else "")
    return (f"has {'a header row' if header_row else 'columns'} without the column{'s' if len(lacking) > 1 else ''} "
            f"{', '.join(repr(mark) for mark in lacking)} of {what} ({table}), the table it comes closest to "
            f"(it names {named or 'none'}); it fits none of nr-llm's tables")
