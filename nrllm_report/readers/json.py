"""JSON arrays and JSON Lines, plain or gzip-compressed, and JSON Lines on stdin.

phpMyAdmin's JSON export is an array too; its own reader (``phpmyadmin``) reads it.

JSON Lines are read as a stream, a line at a time, so a bad line costs only itself;
a JSON array's records are read one by one, so a bad record costs only itself too.
Every line and record is JSON as ``core.jsontext`` defines it, whichever path reads it.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from ..core import jsontext
from ..core.errors import InputError
from ..core.jsontext import JsonTextError, Reason
from ..core.lists import with_positions
from ..core.model import N_, Unreadable
from ..core.schema import (
    CANONICAL_FACTS,
    COLUMN_SPELLINGS,
    DECIMAL_COLUMNS,
    INTEGER_COLUMNS,
    OUTCOME_STATED,
    PAYLOAD_FIELDS,
)
from .chunks import ArrowChunk, Chunk, RowChunk
from .inputs import open_binary

BYTE_ORDER_MARK = b"\xef\xbb\xbf"
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)
BLOCK_LINES = 65_536
BLOCK_BYTES = 64 << 20
SCHEMA_LINES = 64  # lines tried for the types of ``run`` and ``payload`` in a block

# Top-level columns Arrow's JSON reader is told about; the rest of a line is ignored by it.
# The Arrow type of each column the fast path reads; ``run`` and ``payload`` are typed per
# block from its first lines, and so are the number columns (a number, or a string holding
# one). Every spelling in COLUMN_SPELLINGS is declared: the reader ignores undeclared keys,
# so a spelling missing here would be silently dropped. So are a canonical record's facts.
COLUMN_TYPES: dict[str, pa.DataType] = {
    "uid": pa.int64(),
    "sequence": pa.int64(),
    "round": pa.int64(),
    "crdate": pa.int64(),
    "durationMs": pa.float64(),
    "kind": pa.string(),
    "toolName": pa.string(),
    "toolOutcome": pa.string(),
    "server": pa.string(),
    "toolIsError": pa.bool_(),
}
TOP_LEVEL_TYPES: dict[str, pa.DataType] = {
    **{
        spelling: COLUMN_TYPES[name]
        for name, spellings in COLUMN_SPELLINGS.items()
        if name not in ("run", "payload")
        for spelling in spellings
    },
    **CANONICAL_FACTS,
    OUTCOME_STATED: pa.bool_(),
}
NUMBER_SPELLINGS = frozenset(
    spelling for name in INTEGER_COLUMNS + DECIMAL_COLUMNS for spelling in COLUMN_SPELLINGS[name]
)
PAYLOAD_STRUCT = pa.struct(list(PAYLOAD_FIELDS.items()))


# Why a line or a record is unreadable, and the name of the message's one parameter (the offset).
Messages = dict[Reason, tuple[str, str]]
LINE_MESSAGES: Messages = {
    Reason.NOT_UTF8: (N_("the line is not valid UTF-8 (byte %(offset)s)"), "offset"),
    Reason.TOO_DEEP: (N_("the line nests JSON too deeply to be read"), ""),
    Reason.NOT_JSON: (N_("the line is not valid JSON (column %(column)s)"), "column"),
    Reason.NUMBER_TOO_LONG: (N_("the line holds a number too large to be read"), ""),
}
RECORD_MESSAGES: Messages = {
    Reason.NOT_UTF8: (N_("the record is not valid UTF-8 (byte %(offset)s)"), "offset"),
    Reason.TOO_DEEP: (N_("the record nests JSON too deeply to be read"), ""),
    Reason.NOT_JSON: (N_("the record is not valid JSON (character %(offset)s)"), "offset"),
    Reason.NUMBER_TOO_LONG: (N_("the record holds a number too large to be read"), ""),
}


def parse_json_line(line: bytes, messages: Messages = LINE_MESSAGES) -> Any:
    """One line's (or record's) JSON value, or an Unreadable saying why it has none."""
    try:
        return jsontext.loads(line)
    except JsonTextError as error:
        message, parameter = messages[error.reason]
        return Unreadable(message, ((parameter, str(error.offset)),) if parameter else ())


def json_lines_chunks(stream: Iterable[bytes], name: str) -> Iterator[Chunk]:
    """Blocks of lines, read by Arrow in one go; each line it might read otherwise than the
    row reader (see ``jsontext``) is left to the row checker, and costs only itself."""
    for first_line, block in line_blocks(stream, name):
        yield _chunk(block, first_line)


def line_blocks(stream: Iterable[bytes], name: str) -> Iterator[tuple[int, list[bytes]]]:
    """The stream's lines (byte order mark dropped) in blocks of at most BLOCK_LINES lines or
    BLOCK_BYTES bytes, each with its first line's number; a read error is an InputError."""
    line_number = 0
    block: list[bytes] = []
    block_bytes = 0
    try:
        for line_number, line in enumerate(stream, 1):
            if line_number == 1 and line.startswith(BYTE_ORDER_MARK):
                line = line[len(BYTE_ORDER_MARK):]
            block.append(line)
            block_bytes += len(line)
            if len(block) >= BLOCK_LINES or block_bytes >= BLOCK_BYTES:
                yield line_number - len(block) + 1, block
                block, block_bytes = [], 0
        if block:
            yield line_number - len(block) + 1, block
    except GZIP_ERRORS as error:
        raise InputError(
            name, f"the gzip data is truncated or corrupt after line {line_number} ({error})"
        ) from None
    except OSError as error:
        raise InputError(name, f"cannot be read after line {line_number}: {error.strerror or error}") from None


def _chunk(lines: list[bytes], first_line: int) -> Chunk:
    """A block's non-blank lines as an ArrowChunk, or row by row when Arrow can read none of them."""
    numbered = [(first_line + position, line.strip()) for position, line in enumerate(lines)]
    numbered = [(number, text) for number, text in numbered if text]
    texts = [text for _number, text in numbered]
    table: pa.Table | None = None
    unread: pa.Array | None = None
    if texts:
        lines = pa.array(texts, pa.binary())
        table, unread = _arrow_table(texts, lines, unread=left_to_rows(lines))
    if table is None:
        return RowChunk([(number, parse_json_line(text)) for number, text in numbered])
    return ArrowChunk(
        table, numbered[0][0], lambda position: parse_json_line(texts[position]),
        row_numbers=pa.array([number for number, _text in numbered], pa.int64()), unread=unread,
    )


def left_to_rows(lines: pa.Array) -> pa.Array:
    """Lines Arrow must not read: not one object (Arrow reads ``{}{}`` as two rows and ``null``
    as an empty one), not UTF-8, or one it might read otherwise than ``jsontext.loads``."""
    one_object = pc.and_(pc.starts_with(lines, "{"), pc.ends_with(lines, "}"))
    unread = pc.or_(pc.invert(one_object), jsontext.invalid_utf8_rows(lines.view(pa.string())))
    candidates = pc.invert(unread)
    if pc.any(candidates).as_py():
        unread = pc.or_(unread, pc.and_(candidates, jsontext.arrow_may_differ(lines)))
    return unread


def _arrow_table(texts: list[bytes], lines: pa.Array, *, unread: pa.Array) -> tuple[pa.Table | None, pa.Array]:
    """The block as a table of one row a line, and ``unread`` with the lines Arrow cannot read."""
    first_readable = pc.indices_nonzero(pc.invert(unread)).slice(0, SCHEMA_LINES).to_pylist()
    schema = _schema_of([texts[position] for position in first_readable])
    if schema is None:
        return None, unread
    if pc.any(unread).as_py():
        lines = pc.if_else(unread, pa.scalar(b"{}", pa.binary()), lines)
    table, failed = jsontext.read_json_lines(lines, schema)
    return table, with_positions(unread, failed, value=True)


def _schema_of(lines: list[bytes]) -> pa.Schema | None:
    """The Arrow schema for a block: ``run``, ``payload`` and the number columns (a number, or
    a string holding one) typed as the first of its lines that has each."""
    if not lines:
        return None
    found: dict[str, pa.DataType] = {}
    for line in lines:
        try:
            row = jsontext.loads(line)
        except JsonTextError:
            continue
        if isinstance(row, dict):
            _type_from(row, found)
        if len(found) == 2 + len(NUMBER_SPELLINGS):
            break
    fields = [("run", found.get("run", pa.string())), ("payload", found.get("payload", pa.string()))]
    top_level = [(spelling, found.get(spelling, type_)) for spelling, type_ in TOP_LEVEL_TYPES.items()]
    return pa.schema(fields + top_level)


def _type_from(row: dict[str, Any], found: dict[str, pa.DataType]) -> None:
    """The types one row shows for the columns typed per block, where no earlier row showed one."""
    run, payload = row.get("run"), row.get("payload")
    if "run" not in found and isinstance(run, (str, int)) and not isinstance(run, bool):
        found["run"] = pa.int64() if isinstance(run, int) else pa.string()
    if "payload" not in found and isinstance(payload, (dict, str)):
        found["payload"] = PAYLOAD_STRUCT if isinstance(payload, dict) else pa.string()
    for spelling in NUMBER_SPELLINGS:
        value = row.get(spelling)
        if spelling not in found and value is not None:
            found[spelling] = pa.string() if isinstance(value, str) else TOP_LEVEL_TYPES[spelling]


def json_file_chunks(path: Path, name: str) -> Iterator[Chunk]:
    """A JSON array of records; a ``.json`` file holding JSON Lines is read as such."""
    data = json_file_bytes(path, name)
    if not is_array(data):
        yield from json_lines_chunks(data_lines(data), name)
        return
    yield from record_chunks(list(array_records(data, name)))


def is_array(data: bytes) -> bool:
    """Whether a JSON file's bytes are an array (else they are read as JSON Lines)."""
    return data.lstrip().startswith(b"[")


def record_chunks(records: list[ArrayRecord]) -> Iterator[RowChunk]:
    """A JSON array's records, row by row, in blocks."""
    for start in range(0, len(records), BLOCK_LINES):
        block = records[start : start + BLOCK_LINES]
        yield RowChunk([(start + offset + 1, record.value) for offset, record in enumerate(block)])


def json_file_bytes(path: Path, name: str) -> bytes:
    """A JSON file's bytes, unpacked, without a byte order mark."""
    with open_binary(path, name) as stream:
        try:
            data = stream.read()
        except GZIP_ERRORS as error:
            raise InputError(name, f"the gzip data is truncated or corrupt ({error})") from None
    return data[len(BYTE_ORDER_MARK):] if data.startswith(BYTE_ORDER_MARK) else data


RECORD_NOT_UTF8 = Unreadable(N_("the record is not valid UTF-8"))


@dataclass(frozen=True)
class ArrayRecord:
    """A record of a JSON array: its value as the row reader reads it (``value``: an Unreadable
    where it breaks a rule of ``jsontext``), and as Python's json read it in place (``lenient``:
    bytes that are not UTF-8 kept as surrogate escapes), for a container that looks inside it."""

    value: Any
    lenient: Any


def array_records(data: bytes, name: str) -> Iterator[ArrayRecord]:
    """Each record of a JSON array, read as a JSON line would be.

    A record that is not JSON as this tool reads it (see ``jsontext``) is an
    ``Unreadable`` that costs only itself, wherever its extent can be told; an
    array whose structure is broken (cut off, a missing comma) cannot be read at all.
    """
    text, escaped = _decoded(data)
    array = _Array(text, escaped, name=name)
    position = array.skip(array.skip(0) + 1)  # past the "[" the caller has seen
    if text.startswith("]", position):
        array.expect_end(position + 1)
        return
    while True:
        record, position = array.record(position)
        yield record
        position = array.skip(position)
        if text.startswith(",", position):
            position = array.skip(position + 1)
        elif text.startswith("]", position):
            array.expect_end(position + 1)
            return
        else:
            raise array.broken("expecting ',' or ']' after a record", position)


def _decoded(data: bytes) -> tuple[str, bool]:
    """The file as text, and whether it held bytes that are not UTF-8 (kept as surrogate escapes)."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape"), True


WHITESPACE = re.compile(r"[ \t\n\r]*")
STRING_OR_BRACKET = re.compile(jsontext.STRING.pattern + r'|"|[\[\]{}]', re.DOTALL)
BARE_TOKEN = re.compile(r'[^,\[\]{}"\s]+')


class _Array:
    """The text of a JSON array, read a record at a time."""

    def __init__(self, text: str, escaped: bool, *, name: str) -> None:
        self.text, self.escaped, self.name = text, escaped, name
        self.decoder = json.JSONDecoder()

    def skip(self, position: int) -> int:
        """The position of the next character that is not JSON whitespace."""
        match = WHITESPACE.match(self.text, position)
        return match.end() if match else position

    def record(self, start: int) -> tuple[ArrayRecord, int]:
        """The record at ``start`` and where it ends; Python's json reads it in place, and
        only a record it fails on, or one that may break a limit, is read again alone."""
        try:
            value, end = self.decoder.raw_decode(self.text, start)
        except (ValueError, RecursionError) as error:
            extent = self.extent(start)
            if extent is None:
                raise self.broken(getattr(error, "msg", "a record cannot be read"), start) from None
            alone = self.alone(start, extent)
            return ArrayRecord(alone, alone), extent
        text = self.text
        if (self.escaped and jsontext.ESCAPED_BYTE.search(text, start, end)) or (
            text.count("[", start, end) + text.count("{", start, end) > jsontext.MAX_NESTING
        ):
            return ArrayRecord(self.alone(start, end), value), end
        return ArrayRecord(value, value), end

    def alone(self, start: int, end: int) -> Any:
        """The record read exactly as the same text on a line of its own would be."""
        return parse_json_line(self.text[start:end].encode("utf-8", "surrogateescape"), RECORD_MESSAGES)

    def extent(self, start: int) -> int | None:
        """Where the value at ``start`` ends, by its brackets and strings, or None when it does not."""
        text = self.text
        if text.startswith(("[", "{"), start):
            depth = 0
            for match in STRING_OR_BRACKET.finditer(text, start):
                token = match.group()
                if token == '"':
                    return None  # a string that never ends
                if token[0] != '"':
                    depth += 1 if token in "[{" else -1
                    if depth == 0:
                        return match.end()
            return None
        token_match = (jsontext.STRING if text.startswith('"', start) else BARE_TOKEN).match(text, start)
        return token_match.end() if token_match else None

    def expect_end(self, position: int) -> None:
        if self.skip(position) != len(self.text):
            raise self.broken("extra data after the array", self.skip(position))

    def broken(self, reason: str, position: int) -> InputError:
        line = self.text.count("\n", 0, position) + 1
        column = position - self.text.rfind("\n", 0, position)
        return InputError(self.name, f"is not a valid JSON array: {reason} at line {line}, column {column}")


def data_lines(data: bytes) -> Iterator[bytes]:
    """A file's bytes a line at a time, each with its line break."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        yield data[start : end + 1]
        start = end + 1


# ---------------------------------------------------------------- the tables besides the events

FIRST_LINES = 16  # lines of JSON Lines looked at for a first object


def json_lines_table_chunks(path: Path, name: str) -> Iterator[Chunk]:
    """A JSON Lines file of a table: read by Arrow whole, each column typed as its values show,
    where every line is one object and a column's values share a type; else line by line (the
    events' reader, whose Arrow path reads only the events' columns)."""
    data = json_file_bytes(path, name)
    lines = data.splitlines()
    if all(line.strip().startswith(b"{") for line in lines):
        try:
            table = pajson.read_json(pa.BufferReader(data))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            table = None
        if table is not None and table.num_rows == len(lines):
            yield ArrowChunk(table, 1, lambda position: parse_json_line(lines[position].strip()))
            return
    numbered = [(number, line.strip()) for number, line in enumerate(lines, 1) if line.strip()]
    yield RowChunk([(number, parse_json_line(text)) for number, text in numbered])


def first_record(path: Path, name: str, *, array: bool) -> Any:
    """The first readable record of a JSON array or JSON Lines file (None if there is none)."""
    if array:
        data = json_file_bytes(path, name)
        if is_array(data):
            try:
                for record in array_records(data, name):
                    if isinstance(record.lenient, dict):
                        return record.lenient
            except InputError:
                return None
            return None
        lines: Iterator[bytes] = iter(data.splitlines())
        return _first_object(lines)
    try:
        with open_binary(path, name) as stream:
            return _first_object(iter(stream))
    except (OSError, EOFError, ValueError):
        return None  # the events' reader says what is wrong with the file


def _first_object(lines: Iterator[bytes]) -> Any:
    """The first line that holds a JSON object, within the first few lines that hold anything."""
    looked = 0
    for line in lines:
        if line.strip():
            value = parse_json_line(line.strip().removeprefix(BYTE_ORDER_MARK))
            if isinstance(value, dict):
                return value
            looked += 1
            if looked >= FIRST_LINES:
                return None
    return None
