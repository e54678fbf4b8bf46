"""CSV and TSV exports, plain or gzip-compressed: a header row, then one record a row.

Every column is read as text (the checker reads numbers written as text), the
``payload`` column holds the JSON text. CSV follows RFC 4180 (phpMyAdmin, DBeaver,
``psql \\copy ... CSV HEADER``), or MySQL's own dialect where the file shows it
(``SELECT ... INTO OUTFILE ... OPTIONALLY ENCLOSED BY '"'``: a quote inside a field
escaped as ``\\"``, backslash escapes, ``\\N`` for null). TSV follows ``mysql --batch``
(and ``INTO OUTFILE``'s and PostgreSQL's ``COPY``'s text form): no quoting, backslash
escapes (``\\t``, ``\\n``, ``\\\\``, ``\\0``) and the word ``NULL``. An empty field and
``\\N`` are null in both. ``mysql --batch --raw`` writes no escapes at all; a file that
shows it (a ``\\u``, ``\\/`` or ``\\"``, which batch-escaped output never holds) is read
as it stands, and refused when it shows it only past the part read to tell.

The header row must name ``run``, ``sequence`` and ``kind``: a file without one (what
``INTO OUTFILE``, ``COPY ... TO STDOUT`` and ``mysqldump --tab`` write by default) is
refused, saying how each tool writes one, rather than losing its first record.

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO, cast

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
SNIFF_BYTES = 1 << 20  # how much of a file is read to tell its dialect
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, OSError)
# mysql --batch's escapes, and those of INTO OUTFILE and PostgreSQL's COPY text form;
# any other escaped character stands for itself.
TSV_ESCAPES = {"t": "\t", "n": "\n", "0": "\0", "\\": "\\", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "Z": "\x1a"}
# A backslash (after the pairs of them) before anything else: never written by the escaping
# tools, always by ``mysql --batch --raw`` for a JSON text's ``\u``, ``\/`` or ``\"``.
RAW_ESCAPE = r'(^|[^\\])(\\\\)*\\[^\\tn0rbfvZN\t\n\r]'  # for Arrow (RE2: no look-behind)
_RAW_ESCAPE_TEXT = re.compile(r"(?<![\\])(?:\\\\)*(\\[^\\tn0rbfvZN\t\n\r])")
_RAW_ESCAPE = re.compile(_RAW_ESCAPE_TEXT.pattern.encode())
# INTO OUTFILE ... ENCLOSED BY '"': a quote inside a field is \" (RFC 4180 doubles it: "").
_MYSQL_QUOTE = re.compile(rb'(?<![\\])(?:\\\\)*\\"(?!")')
REQUIRED_HEADER = ("run", "sequence", "kind")
_DATA_LIKE = re.compile(r"-?\d+(?:\.\d+)?|[{\[].*|NULL|\\N", re.S)
HEADER_HOW_TO = (
    "mysql --batch writes one (export without --raw); for SELECT ... INTO OUTFILE put a SELECT of the "
    "column names before it with UNION ALL, as the user guide's recipe does (docs/guide.md); psql writes one with "
    "\\copy ... CSV HEADER or COPY ... TO STDOUT (HEADER); phpMyAdmin and DBeaver with their option to put "
    "the column names in the first row; mysqldump --tab writes none (use mysql --batch instead)"
)
RAW_HOW_TO = (
    "this looks like the output of mysql --batch --raw, whose values cannot be told from escapes; "
    "export again without --raw"
)


@dataclass(frozen=True)
class Dialect:
    delimiter: str
    quoted: bool  # quoting; else none, and backslash escapes
    nulls: tuple[str, ...]
    escaped: bool = False  # quoted, with MySQL's backslash escapes instead of RFC 4180's doubled quotes
    raw: bool = False  # unquoted without escapes: mysql --batch --raw


CSV_DIALECT = Dialect(",", True, ("", "\\N"))
MYSQL_CSV_DIALECT = Dialect(",", True, ("",), escaped=True)  # \N is made an empty field (_MysqlEscapes)
TSV_DIALECT = Dialect("\t", False, ("", "\\N", "NULL"))
RAW_TSV_DIALECT = Dialect("\t", False, ("", "\\N", "NULL"), raw=True)


def csv_file_chunks(path: Path, name: str, *, required: tuple[str, ...] = REQUIRED_HEADER) -> Iterator[Chunk]:
    """A CSV file's records; its header row must name the ``required`` columns (the events' by default)."""
    yield from _chunks(path, name, dialect=csv_dialect(path, name), required=required)


def tsv_file_chunks(path: Path, name: str, *, required: tuple[str, ...] = REQUIRED_HEADER) -> Iterator[Chunk]:
    yield from _chunks(path, name, dialect=tsv_dialect(path, name), required=required)


def csv_dialect(path: Path, name: str) -> Dialect:
    return MYSQL_CSV_DIALECT if _MYSQL_QUOTE.search(_head(path, name)) is not None else CSV_DIALECT


def tsv_dialect(path: Path, name: str) -> Dialect:
    return RAW_TSV_DIALECT if _RAW_ESCAPE.search(_head(path, name)) is not None else TSV_DIALECT


def header_columns(path: Path, name: str, *, tab_separated: bool) -> list[str]:
    """The columns a CSV or TSV file's header row names (none for an empty file), for telling
    which table it holds; a first line that is data is refused as it is for the events."""
    dialect = tsv_dialect(path, name) if tab_separated else csv_dialect(path, name)
    return _header(path, name, dialect=dialect, required=()) or []


def _chunks(path: Path, name: str, *, dialect: Dialect, required: tuple[str, ...]) -> Iterator[Chunk]:
    columns = _header(path, name, dialect=dialect, required=required)
    if columns is None:
        return
    records_read = 0
    try:
        for table in _arrow_tables(path, columns, dialect=dialect):
            if not dialect.quoted and not dialect.raw:
                _refuse_raw_escapes(table, name, records_read=records_read)
                table = _unescaped(table)
            yield ArrowChunk(table, records_read + 1, _raw_rows(table))
            records_read += table.num_rows
    except (pa.ArrowInvalid, UnicodeDecodeError):
        yield from _python_chunks(path, name, columns=columns, dialect=dialect, skip=records_read)
    except (pa.ArrowException, OSError) as error:
        raise InputError(name, f"cannot be read after row {records_read}: {error}") from None


def _open_binary(path: Path, name: str, *, dialect: Dialect) -> BinaryIO:
    """The file's bytes, uncompressed, MySQL's escapes made ones Arrow and ``csv`` read."""
    try:
        raw = cast(BinaryIO, gzip.open(path, "rb")) if path.name.lower().endswith(".gz") else open(path, "rb")
    except OSError as error:
        raise InputError(name, f"cannot be read: {error.strerror or error}") from None
    return io.BufferedReader(_MysqlEscapes(raw)) if dialect.escaped else raw


def _open_text(path: Path, name: str, *, dialect: Dialect) -> TextIO:
    """The file as text; bytes that are not UTF-8 kept as lone surrogates, found per record."""
    return io.TextIOWrapper(_open_binary(path, name, dialect=dialect), encoding="utf-8-sig", errors="surrogateescape",
                            newline="")


def _head(path: Path, name: str) -> bytes:
    """The file's first bytes, enough to tell its dialect."""
    with _open_binary(path, name, dialect=CSV_DIALECT) as stream:
        try:
            return stream.read(SNIFF_BYTES)
        except GZIP_ERRORS as error:
            raise InputError(name, f"the gzip data is truncated or corrupt ({error})") from None


class _MysqlEscapes(io.RawIOBase):
    r"""MySQL's escapes (``LOAD DATA``'s reading of them) made ones Arrow and ``csv`` read with ``\``
    as their escape character: ``\N`` (null) an empty field, ``\0``, ``\b``, ``\n``, ``\r``,
    ``\t``, ``\Z`` the escaped character itself; ``\\``, ``\"`` and the rest are theirs already."""

    ESCAPE = re.compile(rb"\\(.)", re.S)
    MEANINGS = {b"0": b"\\\0", b"b": b"\\\b", b"n": b"\\\n", b"r": b"\\\r", b"t": b"\\\t", b"Z": b"\\\x1a", b"N": b""}

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__()
        self._raw = raw
        self._pending = b""
        self._held = b""  # a trailing backslash whose escaped character is in the next block

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._raw.close()
        super().close()

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            block = self._raw.read(1 << 20)
            if not block:
                self._pending, self._held = self._held, b""
                if not self._pending:
                    return 0
                break
            block = self._held + block
            trailing = len(block) - len(block.rstrip(b"\\"))
            cut = len(block) - trailing % 2
            self._held = block[cut:]
            self._pending = self.ESCAPE.sub(lambda match: self.MEANINGS.get(match.group(1), match.group(0)),
                                            block[:cut])
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def _header(path: Path, name: str, *, dialect: Dialect, required: tuple[str, ...]) -> list[str] | None:
    """The column names of the header row; None for an empty file."""
    with _open_text(path, name, dialect=dialect) as stream:
        try:
            first = next(_records(stream, dialect), None)
        except GZIP_ERRORS as error:
            raise InputError(name, f"the gzip data is truncated or corrupt ({error})") from None
    if first is None:
        return None
    if any(ESCAPED_BYTE.search(column) for column in first):
        raise InputError(name, "has a header row that is not valid UTF-8")
    columns = [column.strip() for column in first]
    _check_header(name, columns, required=required)
    repeated = sorted({column for column in columns if columns.count(column) > 1})
    if repeated:
        raise InputError(name, f"names the column {repeated[0]!r} twice in its header row")
    return columns


def _check_header(name: str, columns: list[str], *, required: tuple[str, ...]) -> None:
    """Refuse a header row without the ``required`` columns, and a first line that is data
    (where no column is required, only the latter: the columns then tell which table it is)."""
    missing = [column for column in required if column not in columns]
    if required and not missing:
        return
    if any(_DATA_LIKE.fullmatch(column) for column in columns):
        first_line = ", ".join(columns)
        first_line = first_line if len(first_line) <= 80 else first_line[:77] + "..."
        raise InputError(name, f"has no header row: its first line ({first_line!r}) looks like data, and a header "
                               "row naming the columns (at least 'run', 'sequence' and 'kind') is needed; "
                               f"{HEADER_HOW_TO}")
    if not missing:
        return
    named = ", ".join(repr(column) for column in columns[:12]) + (", ..." if len(columns) > 12 else "")
    lacking = ", ".join(repr(column) for column in missing)
    needed = ", ".join(repr(column) for column in required)
    raise InputError(name, f"has a header row without the column{'s' if len(missing) > 1 else ''} {lacking} "
                           f"(it names {named}); every row needs {needed}")


def _records(stream: TextIO, dialect: Dialect) -> Iterator[list[str]]:
    """Each non-empty record as its raw fields (for TSV still escaped)."""
    if dialect.quoted:
        escape = "\\" if dialect.escaped else None
        reader = csv.reader(stream, delimiter=dialect.delimiter, strict=False, escapechar=escape,
                            doublequote=not dialect.escaped)
        for record in reader:
            if record:
                yield record
        return
    pending = ""
    for line in stream:
        line = pending + line.rstrip("\n").removesuffix("\r")
        if not dialect.raw and _ends_escaped(line):
            pending = line + "\n"  # INTO OUTFILE's escaped line break: the record goes on
            continue
        pending = ""
        if line:
            yield _split_unquoted(line, dialect)
    if pending:
        yield _split_unquoted(pending[:-1], dialect)


def _ends_escaped(line: str) -> bool:
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split_unquoted(line: str, dialect: Dialect) -> list[str]:
    r"""The fields of a line; a delimiter after an odd run of backslashes (INTO OUTFILE's ``\<tab>``) is text."""
    if dialect.raw or "\\" not in line:
        return line.split(dialect.delimiter)
    pieces = re.split(r"(?<!\\)((?:\\\\)*)" + re.escape(dialect.delimiter), line)
    fields = [pieces[0]]
    for backslashes, piece in zip(pieces[1::2], pieces[2::2]):
        fields[-1] += backslashes
        fields.append(piece)
    return fields


def _refuse_raw_escapes(table: pa.Table, name: str, *, records_read: int) -> None:
    """A backslash escape no escaping tool writes, past the part read to tell the dialect: --raw output."""
    for column in table.columns:
        if not pc.any(pc.match_substring(column, "\\")).as_py():
            continue
        found = pc.match_substring_regex(column, RAW_ESCAPE)
        if pc.any(found).as_py():
            position = pc.index(found, True).as_py()
            _raise_raw(name, records_read + position + 1, field=column[position].as_py())


def _raise_raw(name: str, row: int, *, field: str) -> None:
    match = _RAW_ESCAPE_TEXT.search(field)
    shown = match.group(1) if match else field[:20]
    raise InputError(name, f"row {row} holds {shown!r}, an escape mysql --batch never writes: {RAW_HOW_TO}")


# ---------------------------------------------------------------- Arrow: the fast path's shape


def _arrow_tables(path: Path, columns: list[str], *, dialect: Dialect) -> Iterator[pa.Table]:
    compression = "gzip" if path.name.lower().endswith(".gz") else None
    opened = (_open_binary(path, path.name, dialect=dialect) if dialect.escaped
              else pa.input_stream(str(path), compression=compression))
    with opened as stream:
        reader = pacsv.open_csv(
            stream,
            read_options=pacsv.ReadOptions(column_names=columns, skip_rows=1, block_size=BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(
                delimiter=dialect.delimiter, quote_char='"' if dialect.quoted else False,
                double_quote=not dialect.escaped, escape_char="\\" if dialect.escaped else False,
                newlines_in_values=dialect.quoted, ignore_empty_lines=True,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types={column: pa.string() for column in columns}, null_values=list(dialect.nulls),
                strings_can_be_null=True, quoted_strings_can_be_null=True, check_utf8=True,
            ),
        )
        for batch in reader:
            yield pa.Table.from_batches([batch])


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


def _python_chunks(path: Path, name: str, *, columns: list[str], dialect: Dialect, skip: int) -> Iterator[Chunk]:
    """Records after the first ``skip`` read one by one: a record with another number of fields
    than the header, or with bytes that are not UTF-8, is unreadable; the others are read."""
    rows: list[tuple[int, Any]] = []
    number = 0
    with _open_text(path, name, dialect=dialect) as stream:
        try:
            records = _records(stream, dialect)
            next(records, None)  # the header
            for number, record in enumerate(records, 1):
                if number > skip:
                    rows.append((number, _row_of(record, columns, dialect=dialect, name=name, number=number)))
                if len(rows) >= FALLBACK_BLOCK_ROWS:
                    yield RowChunk(rows)
                    rows = []
        except GZIP_ERRORS as error:
            raise InputError(name, f"the gzip data is truncated or corrupt after row {number} ({error})") from None
        except csv.Error as error:
            raise InputError(name, f"is not valid CSV after row {number}: {error}") from None
    if rows:
        yield RowChunk(rows)


def _row_of(record: list[str], columns: list[str], *, dialect: Dialect, name: str, number: int) -> Any:
    if any(ESCAPED_BYTE.search(field) for field in record):
        return RECORD_NOT_UTF8
    if not dialect.quoted and not dialect.raw:
        for field in record:
            if "\\" in field and _RAW_ESCAPE.search(field.encode("utf-8")):
                _raise_raw(name, number, field=field)
    if len(record) != len(columns):
        return Unreadable(
            N_("the record has %(fields)s fields, the header %(columns)s"),
            (("fields", str(len(record))), ("columns", str(len(columns)))),
        )
    return {column: _value(field, dialect) for column, field in zip(columns, record)}


def _value(field: str, dialect: Dialect) -> str | None:
    if field in dialect.nulls:
        return None
    if dialect.quoted or dialect.raw or "\\" not in field:
        return field
    return re.sub(r"\\(.)", lambda match: TSV_ESCAPES.get(match.group(1), match.group(1)), field, flags=re.S)
