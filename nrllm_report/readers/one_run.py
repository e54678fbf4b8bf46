"""One run's rows, found without reading the whole of an input (``timeline RUN``).

Every reader here yields, as raw rows, each row that may belong to the run and each
row that cannot be read (whose run nobody can tell); the row checker then decides.
It may yield more than that, never less:

- a Parquet file skips the row groups whose statistics exclude the run, reads the
  ``run`` column of the others, and reads in full only the groups that hold the run;
- JSON Lines are searched for the run's bytes a block at a time; only the lines that
  may hold it are parsed, and the rest are only checked to be readable;
- any other shape is read as usual and its rows filtered by their run.

Each reader's ``run_rows`` (``registry``) says which of these its shape takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core import jsontext
from ..core.errors import InputError
from ..core.schema import COLUMN_SPELLINGS
from .chunks import ArrowChunk, Chunk, RowChunk
from .inputs import Input
from .json import left_to_rows, line_blocks, parse_json_line
from .parquet import parquet_file_chunks, raw_row_of

RUN_SPELLINGS = COLUMN_SPELLINGS["run"]
# Characters JSON may write with a short escape (\" \\ \/ \b \f \n \r \t); any character may be \u-escaped.
SHORT_ESCAPED = frozenset('"\\/\b\f\n\r\t')


def run_rows(source: Input, run: str) -> Iterator[RowChunk]:
    """The rows of ``source`` that may be ``run``'s or cannot be read, with their row numbers."""
    return source.run_rows(run)


# ---------------------------------------------------------------- any shape


def filtered_rows(chunks: Iterable[Chunk], run: str) -> Iterator[RowChunk]:
    """The rows of a reader's chunks whose run may be ``run``, and those that are no object."""
    for chunk in chunks:
        if isinstance(chunk, ArrowChunk):
            wanted = _may_be_run(chunk.table, run)
            if chunk.unread is not None:  # a row left to the row reader stands as {} in the table
                wanted = pc.or_(wanted, chunk.unread)
            positions = pc.indices_nonzero(wanted)
            numbers = chunk.numbers().take(positions).to_pylist()
            yield RowChunk([(number, chunk.raw_row(position))
                            for number, position in zip(numbers, positions.to_pylist())])
        else:
            yield RowChunk([(number, raw) for number, raw in chunk.rows if _raw_may_be_run(raw, run)])


def _raw_may_be_run(raw: Any, run: str) -> bool:
    if not isinstance(raw, Mapping):
        return True  # unreadable, or not an object: reported whatever its run
    return any(_run_text(raw.get(spelling)) == run for spelling in RUN_SPELLINGS)


def _run_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _may_be_run(table: pa.Table, run: str) -> pa.Array:
    """Which rows of a table may hold ``run`` under any of its spellings."""
    found = pa.array([False] * table.num_rows, pa.bool_())
    for spelling in RUN_SPELLINGS:
        if spelling in table.column_names:
            found = pc.or_(found, _equals_run(table.column(spelling), run))
    return found


def _equals_run(column: pa.ChunkedArray | pa.Array, run: str) -> pa.Array:
    """Rows whose value is ``run`` (a uid as its decimal text); every row for a type not compared here."""
    if pa.types.is_dictionary(column.type):  # each distinct value compared once
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        found = [pc.take(_equals_run(chunk.dictionary, run), chunk.indices) for chunk in chunks]
        return pc.fill_null(pa.concat_arrays(found), False) if found else pa.array([], pa.bool_())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        matches = pc.equal(column, run)
    elif pa.types.is_integer(column.type):
        if _as_uid(run) is None:
            return pa.array([False] * len(column), pa.bool_())
        matches = pc.equal(pc.cast(column, pa.string()), run)  # any width, a uint64 past int64 too
    else:
        return pa.array([True] * len(column), pa.bool_())
    matches = pc.fill_null(matches, False)
    return matches.combine_chunks() if isinstance(matches, pa.ChunkedArray) else matches


def _as_uid(run: str) -> int | None:
    """The integer whose decimal text is ``run``, or None when there is none."""
    try:
        number = int(run)
    except ValueError:
        return None
    return number if str(number) == run and -(2**63) <= number < 2**64 else None


# ---------------------------------------------------------------- Parquet


def parquet_run_rows(path: Path, name: str, *, run: str) -> Iterator[RowChunk]:
    """A Parquet file's rows of ``run``: only row groups that may hold it are read, and in
    full only those that do."""
    try:
        parquet = pq.ParquetFile(path, pre_buffer=False)
        spellings = [spelling for spelling in RUN_SPELLINGS if spelling in parquet.schema_arrow.names]
        if len(spellings) > 1 or (spellings and not _comparable(parquet.schema_arrow.field(spellings[0]).type)):
            yield from filtered_rows(parquet_file_chunks(path, name), run)
            return
        # The run column read dictionary-encoded where it is text: each distinct run compared once.
        scanner = pq.ParquetFile(path, pre_buffer=False, read_dictionary=spellings)
        rows_before = 0
        for group in range(parquet.num_row_groups):
            about = parquet.metadata.row_group(group)
            if spellings and _group_may_hold(about, spellings[0], run=run):
                yield _rows_of_run(scanner, parquet, group=group, spelling=spellings[0], run=run,
                                   rows_before=rows_before)
            rows_before += about.num_rows
    except (pa.ArrowException, OSError, ValueError) as error:
        raise InputError(name, f"is not a readable Parquet file: {error}") from None


def _comparable(type_: pa.DataType) -> bool:
    return pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_integer(type_)


def _group_may_hold(about: pq.RowGroupMetaData, spelling: str, *, run: str) -> bool:
    """False only when the group's statistics of the run column exclude ``run``."""
    for position in range(about.num_columns):
        column = about.column(position)
        if column.path_in_schema != spelling:
            continue
        statistics = column.statistics
        if statistics is None or not column.is_stats_set:
            return True
        if statistics.null_count == about.num_rows:
            return False
        if not statistics.has_min_max:
            return True
        try:
            return _within(statistics.min, statistics.max, run=run)
        except UnicodeDecodeError:  # bounds that are not UTF-8: a row of the group is unreadable
            return True
    return True


def _within(low: Any, high: Any, *, run: str) -> bool:
    if isinstance(low, str) and isinstance(high, str):
        return low <= run <= high  # code point order is UTF-8's byte order, Parquet's order
    if isinstance(low, int) and isinstance(high, int):
        number = _as_uid(run)
        return number is not None and low <= number <= high
    return True


def _rows_of_run(
    scanner: pq.ParquetFile, parquet: pq.ParquetFile, *, group: int, spelling: str, run: str, rows_before: int
) -> RowChunk:
    """The group's rows of ``run``: its run column first, the whole group only when it holds the run."""
    runs = scanner.read_row_group(group, columns=[spelling]).column(0).combine_chunks()
    # A run that is not UTF-8 makes its record unreadable, which concerns every run's timeline.
    positions = pc.indices_nonzero(pc.or_(_equals_run(runs, run), jsontext.invalid_utf8_rows(runs)))
    if len(positions) == 0:
        return RowChunk([])
    rows = parquet.read_row_group(group).take(positions)
    raw_row = raw_row_of(rows)
    return RowChunk([(rows_before + position + 1, raw_row(index))
                     for index, position in enumerate(positions.to_pylist())])


# ---------------------------------------------------------------- JSON Lines


def json_lines_run_rows(stream: Iterable[bytes], name: str, *, run: str) -> Iterator[RowChunk]:
    """Lines that may hold ``run`` (its bytes, or an escape that may spell it), parsed; of the
    others, only those that cannot be read."""
    try:
        needle: bytes | None = run.encode("utf-8")
    except UnicodeEncodeError:
        needle = None  # no line's run can be a text UTF-8 cannot hold
    short_escapes = any(character in SHORT_ESCAPED or ord(character) < 0x20 for character in run)
    for first_line, lines in line_blocks(stream, name):
        yield RowChunk(_block_rows(lines, first_line, needle=needle, short_escapes=short_escapes))


def _block_rows(
    lines: list[bytes], first_line: int, *, needle: bytes | None, short_escapes: bool
) -> list[tuple[int, Any]]:
    data = b"".join(lines)
    escaped = b"\\u" in data or (short_escapes and b"\\" in data)
    if (needle is None or needle not in data) and not escaped:
        candidates: set[int] = set()
    else:
        candidates = {
            position for position, line in enumerate(lines)
            if (needle is not None and needle in line) or (escaped and b"\\" in line)
        }
    rest = [position for position, line in enumerate(lines) if position not in candidates and line.strip()]
    rows = [(first_line + position, parse_json_line(lines[position].strip())) for position in sorted(candidates)]
    rows += _unreadable_lines(lines, rest, first_line=first_line)
    return sorted(rows, key=lambda row: row[0])


def _unreadable_lines(lines: list[bytes], positions: Sequence[int], *, first_line: int) -> list[tuple[int, Any]]:
    """Of the lines at ``positions``, those that are not one JSON object, as the row reader reads them.

    Most blocks are whole objects in valid UTF-8, which Arrow's reader confirms in one
    go; only a block it does not vouch for is parsed line by line.
    """
    if not positions or _all_objects([lines[position] for position in positions]):
        return []
    rows = [(first_line + position, parse_json_line(lines[position].strip())) for position in positions]
    return [(number, raw) for number, raw in rows if not isinstance(raw, dict)]


def _all_objects(lines: list[bytes]) -> bool:
    """Whether every line is one JSON object in valid UTF-8, that Arrow reads as the row reader does:
    none that the JSON Lines reader would leave to the row checker, and Arrow reads them all."""
    texts = pa.array([line.strip() for line in lines], pa.binary())
    if pc.any(left_to_rows(texts)).as_py():
        return False
    table, failed = jsontext.read_json_lines(texts, pa.schema([]), use_threads=True)
    return table is not None and not failed

