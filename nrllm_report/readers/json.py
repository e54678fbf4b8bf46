"""JSON arrays and JSON Lines, plain or gzip-compressed, and JSON Lines on stdin.

JSON Lines are read as a stream, a line at a time, so a bad line costs only itself.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Iterator

import pyarrow as pa
import pyarrow.json as pajson

from ..core.errors import InputError
from ..core.schema import (
    CANONICAL_FACTS, COLUMN_SPELLINGS, DECIMAL_COLUMNS, INTEGER_COLUMNS, OUTCOME_STATED, PAYLOAD_FIELDS,
)
from ..core.model import N_, Unreadable
from .chunks import ArrowChunk, Chunk, RowChunk
from .phpmyadmin import event_rows, string_chunks

BYTE_ORDER_MARK = b"\xef\xbb\xbf"
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)
BLOCK_LINES = 65_536
BLOCK_BYTES = 64 << 20

# Top-level columns Arrow's JSON reader is told about; the rest of a line is ignored by it.
# The Arrow type of each column the fast path reads; ``run`` and ``payload`` are typed per
# block from its first line, and so are the number columns (a number, or a string holding
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


def parse_json_line(line: bytes) -> Any:
    """One line's JSON value, or an Unreadable saying why it is none."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as error:
        return Unreadable(
            N_("the line is not valid UTF-8 (byte %(offset)s)"),
            (("offset", str(error.start + 1)),),
        )
    try:
        return json.loads(text)
    except RecursionError:
        return Unreadable(N_("the line nests JSON too deeply to be read"))
    except json.JSONDecodeError as error:
        return Unreadable(
            N_("the line is not valid JSON (column %(column)s)"),
            (("column", str(error.colno)),),
        )
    except ValueError:
        return Unreadable(N_("the line holds a number too large to be read"))


def json_lines_chunks(stream: Iterable[bytes], name: str) -> Iterator[Chunk]:
    """Blocks of lines: parsed by Arrow in one go where every line allows it, else line by line."""
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
                yield _chunk(block, line_number - len(block) + 1)
                block, block_bytes = [], 0
        if block:
            yield _chunk(block, line_number - len(block) + 1)
    except GZIP_ERRORS as error:
        raise InputError(
            name, f"the gzip data is truncated or corrupt after line {line_number} ({error})"
        ) from None
    except OSError as error:
        raise InputError(name, f"cannot be read after line {line_number}: {error.strerror or error}") from None


def _chunk(lines: list[bytes], first_line: int) -> Chunk:
    table = _arrow_table(lines)
    if table is not None:
        return ArrowChunk(table, first_line, lambda position: parse_json_line(lines[position].strip()))
    rows = []
    for position, line in enumerate(lines):
        stripped = line.strip()
        if stripped:
            rows.append((first_line + position, parse_json_line(stripped)))
    return RowChunk(rows)


def _arrow_table(lines: list[bytes]) -> pa.Table | None:
    """The block as a table with one row per line, or None where Arrow might read it differently.

    Arrow's reader skips blank lines, reads ``{}{}`` as two rows and ``null`` as an
    empty one (or crashes on it), so only blocks whose every line is one object go to it.
    """
    for line in lines:
        stripped = line.strip()
        if not (stripped.startswith(b"{") and stripped.endswith(b"}")):
            return None
    schema = _schema_of(lines[0])
    if schema is None:
        return None
    data = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
    if not _is_utf8(data):  # Arrow would skip bad bytes in keys it is not told about
        return None
    try:
        table = pajson.read_json(
            io.BytesIO(data),
            read_options=pajson.ReadOptions(block_size=max(len(data) + 1, 1 << 20), use_threads=False),
            parse_options=pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == len(lines) else None


def _is_utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _schema_of(first_line: bytes) -> pa.Schema | None:
    """The Arrow schema for a block: ``run``, ``payload`` and the numbers typed as its first line has them."""
    try:
        first = json.loads(first_line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(first, dict):
        return None
    run, payload = first.get("run"), first.get("payload")
    if isinstance(run, bool) or not isinstance(run, (str, int, type(None))):
        return None
    fields = [("run", pa.int64() if isinstance(run, int) else pa.string())]
    if isinstance(payload, dict):
        fields.append(("payload", PAYLOAD_STRUCT))
    elif payload is None or isinstance(payload, str):
        fields.append(("payload", pa.string()))
    else:
        return None
    top_level = [
        (spelling, pa.string() if spelling in NUMBER_SPELLINGS and isinstance(first.get(spelling), str) else type_)
        for spelling, type_ in TOP_LEVEL_TYPES.items()
    ]
    return pa.schema(fields + top_level)


def _open(path: Path, name: str) -> BinaryIO:
    try:
        if path.name.lower().endswith(".gz"):
            return gzip.open(path, "rb")  # type: ignore[return-value]
        return open(path, "rb")
    except OSError as error:
        raise InputError(name, f"cannot be read: {error.strerror or error}") from None


def json_lines_file_chunks(path: Path, name: str) -> Iterator[Chunk]:
    with _open(path, name) as stream:
        yield from json_lines_chunks(stream, name)


def json_file_chunks(path: Path, name: str) -> Iterator[Chunk]:
    """A JSON array of records (phpMyAdmin's export among them); a ``.json`` file holding
    JSON Lines is read as such."""
    with _open(path, name) as stream:
        try:
            data = stream.read()
        except GZIP_ERRORS as error:
            raise InputError(name, f"the gzip data is truncated or corrupt ({error})") from None
    if data.startswith(BYTE_ORDER_MARK):
        data = data[len(BYTE_ORDER_MARK):]
    if not data.lstrip().startswith(b"["):
        yield from json_lines_chunks(_lines(data), name)
        return
    records, bad_bytes = _json_array(data, name)
    exported = event_rows(records, name)  # phpMyAdmin's export: the table's rows, every value a string
    rows = records if exported is None else exported
    if bad_bytes:
        rows = [row if _encodable(row) else NOT_UTF8 for row in rows]
    if exported is not None:
        yield from string_chunks(rows, BLOCK_LINES)
        return
    for start in range(0, len(rows), BLOCK_LINES):
        block = rows[start : start + BLOCK_LINES]
        yield RowChunk([(start + offset + 1, row) for offset, row in enumerate(block)])


NOT_UTF8 = Unreadable(N_("the record is not valid UTF-8"))


def _json_array(data: bytes, name: str) -> tuple[list[Any], bool]:
    """The records of a JSON array, and whether it holds bytes that are not UTF-8.

    Such bytes are decoded as lone surrogates (``surrogateescape``), so that only the
    records holding them are lost (``_encodable``); where they break the array itself, the file is.
    """
    try:
        text, bad_byte = data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        text, bad_byte = data.decode("utf-8", "surrogateescape"), error.start + 1
    try:
        records = json.loads(text)
    except RecursionError:
        raise InputError(name, "nests JSON too deeply to be read") from None
    except json.JSONDecodeError as error:
        if bad_byte is not None:
            raise InputError(name, f"is not valid UTF-8 (byte {bad_byte})") from None
        raise InputError(
            name, f"is not a valid JSON array: {error.msg} at line {error.lineno}, column {error.colno}"
        ) from None
    except ValueError as error:
        raise InputError(name, f"is not a readable JSON array: {error}") from None
    if not isinstance(records, list):
        raise InputError(name, "is not a JSON array")
    return records, bad_byte is not None


def _encodable(record: Any) -> bool:
    """A record holds no bad byte (a lone surrogate of ``surrogateescape``) in any key or value."""
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lines(data: bytes) -> Iterator[bytes]:
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        yield data[start : end + 1]
        start = end + 1
