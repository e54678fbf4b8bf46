"""CSV and TSV exports, plain or gzip-compressed: a header row, then one record a row.

Every column is read as text (the checker reads numbers written as text), the
``payload`` column holds the JSON text. CSV follows RFC 4180 (phpMyAdmin, DBeaver,
``psql \\copy ... CSV HEADER``, ``SELECT ... INTO OUTFILE`` with ``ENCLOSED BY '"'``);
TSV follows ``mysql --batch``: no quoting, backslash escapes (``\\t``, ``\\n``,
``\\\\``, ``\\0``) and the word ``NULL``. An empty field and ``\\N`` are null in both.

Arrow reads the file in record batches (the fast path's shape). A file Arrow
refuses (a record with too few or too many fields, bytes that are not UTF-8) is read
again from where Arrow stopped with Python's ``csv`` module, record by record, so
that only the bad records are unreadable. ``row`` is the 1-based data record.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, TextIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ..core.errors import InputError
from ..core.jsontext import ESCAPED_BYTE
from ..core.lists import relisted
from ..core.model import N_, Unreadable
from .chunks import ArrowChunk, Chunk, RowChunk
from .json import RECORD_NOT_UTF8

BLOCK_BYTES = 32 << 20
FALLBACK_BLOCK_ROWS = 65_536
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, OSError)
# mysql --batch's escapes; any other escaped character stands for itself.
TSV_ESCAPES = {"t": "\t", "n": "\n", "0": "\0", "\\": "\\", "r": "\r", "b": "\b", "Z": "\x1a"}


@dataclass(frozen=True)
class Dialect:
    delimiter: str
    quoted: bool  # RFC 4180 quoting; else none, and backslash escapes
    nulls: tuple[str, ...]


CSV_DIALECT = Dialect(",", True, ("", "\\N"))
TSV_DIALECT = Dialect("\t", False, ("", "\\N", "NULL"))


def csv_file_chunks(path: Path, name: str) -> Iterator[Chunk]:
    yield from _chunks(path, name, CSV_DIALECT)


def tsv_file_chunks(path: Path, name: str) -> Iterator[Chunk]:
    yield from _chunks(path, name, TSV_DIALECT)


def _chunks(path: Path, name: str, dialect: Dialect) -> Iterator[Chunk]:
    columns = _header(path, name, dialect)
    if columns is None:
        return
    records_read = 0
    try:
        for table in _arrow_tables(path, columns, dialect):
            yield ArrowChunk(table, records_read + 1, _raw_rows(table))
            records_read += table.num_rows
    except (pa.ArrowInvalid, UnicodeDecodeError):
        yield from _python_chunks(path, name, columns, dialect, records_read)
    except (pa.ArrowException, OSError) as error:
        raise InputError(name, f"cannot be read after row {records_read}: {error}") from None


def _open_text(path: Path, name: str) -> TextIO:
    """The file as text; bytes that are not UTF-8 kept as lone surrogates, found per record."""
    try:
        raw = gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")
    except OSError as error:
        raise InputError(name, f"cannot be read: {error.strerror or error}") from None
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="")


def _header(path: Path, name: str, dialect: Dialect) -> list[str] | None:
    """The column names of the header row; None for an empty file."""
    with _open_text(path, name) as stream:
        try:
            first = next(_records(stream, dialect), None)
        except GZIP_ERRORS as error:
            raise InputError(name, f"the gzip data is truncated or corrupt ({error})") from None
    if first is None:
        return None
    if any(ESCAPED_BYTE.search(column) for column in first):
        raise InputError(name, "has a header row that is not valid UTF-8")
    columns = [column.strip() for column in first]
    repeated = sorted({column for column in columns if columns.count(column) > 1})
    if repeated:
        raise InputError(name, f"names the column {repeated[0]!r} twice in its header row")
    return columns


def _records(stream: TextIO, dialect: Dialect) -> Iterator[list[str]]:
    """Each non-empty record as its raw fields (for TSV still escaped)."""
    if dialect.quoted:
        for record in csv.reader(stream, delimiter=dialect.delimiter, strict=False):
            if record:
                yield record
        return
    for line in stream:
        line = line.rstrip("\n").removesuffix("\r")
        if line:
            yield line.split(dialect.delimiter)


# ---------------------------------------------------------------- Arrow: the fast path's shape


def _arrow_tables(path: Path, columns: list[str], dialect: Dialect) -> Iterator[pa.Table]:
    compression = "gzip" if path.name.lower().endswith(".gz") else None
    with pa.input_stream(str(path), compression=compression) as stream:
        reader = pacsv.open_csv(
            stream,
            read_options=pacsv.ReadOptions(column_names=columns, skip_rows=1, block_size=BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(
                delimiter=dialect.delimiter, quote_char='"' if dialect.quoted else False, double_quote=True,
                escape_char=False, newlines_in_values=dialect.quoted, ignore_empty_lines=True,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={column: pa.string() for column in columns}, null_values=list(dialect.nulls),
                strings_can_be_null=True, quoted_strings_can_be_null=True, check_utf8=True,
            ),
        )
        for batch in reader:
            table = pa.Table.from_batches([batch])
            yield table if dialect.quoted else _unescaped(table)


def _unescaped(table: pa.Table) -> pa.Table:
    """mysql --batch's backslash escapes undone in every text column that has one."""
    for index, column in enumerate(table.columns):
        if pc.any(pc.match_substring(column, "\\")).as_py():
            table = table.set_column(index, table.field(index), _unescape_column(column))
    return table


def _unescape_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    r"""Read left to right, ``\\`` is one backslash: split at those first (leftmost pairs, as
    a left-to-right reader pairs them), undo the other escapes in each piece, join with ``\``."""
    pieces = pc.split_pattern(column, "\\\\")
    flat = pc.list_flatten(pieces)
    for escaped, meaning in TSV_ESCAPES.items():
        if escaped != "\\":
            flat = pc.replace_substring(flat, "\\" + escaped, meaning)
    flat = pc.replace_substring_regex(flat, r"\\(.)", r"\1")
    return pc.binary_join(relisted(pieces, flat), "\\")


def _raw_rows(table: pa.Table) -> Any:
    """A record as the row checker reads it: only the records it is asked for are made."""
    return lambda position: table.slice(position, 1).to_pylist()[0]


# ---------------------------------------------------------------- Python: record by record


def _python_chunks(path: Path, name: str, columns: list[str], dialect: Dialect, skip: int) -> Iterator[Chunk]:
    """Records after the first ``skip`` read one by one: a record with another number of fields
    than the header, or with bytes that are not UTF-8, is unreadable; the others are read."""
    rows: list[tuple[int, Any]] = []
    number = 0
    with _open_text(path, name) as stream:
        try:
            records = _records(stream, dialect)
            next(records, None)  # the header
            for number, record in enumerate(records, 1):
                if number > skip:
                    rows.append((number, _row_of(record, columns, dialect)))
                if len(rows) >= FALLBACK_BLOCK_ROWS:
                    yield RowChunk(rows)
                    rows = []
        except GZIP_ERRORS as error:
            raise InputError(name, f"the gzip data is truncated or corrupt after row {number} ({error})") from None
        except csv.Error as error:
            raise InputError(name, f"is not valid CSV after row {number}: {error}") from None
    if rows:
        yield RowChunk(rows)


def _row_of(record: list[str], columns: list[str], dialect: Dialect) -> Any:
    if any(ESCAPED_BYTE.search(field) for field in record):
        return RECORD_NOT_UTF8
    if len(record) != len(columns):
        return Unreadable(
            N_("the record has %(fields)s fields, the header %(columns)s"),
            (("fields", str(len(record))), ("columns", str(len(columns)))),
        )
    return {column: _value(field, dialect) for column, field in zip(columns, record)}


def _value(field: str, dialect: Dialect) -> str | None:
    if field in dialect.nulls:
        return None
    if dialect.quoted or "\\" not in field:
        return field
    return re.sub(r"\\(.)", lambda match: TSV_ESCAPES.get(match.group(1), match.group(1)), field, flags=re.S)
