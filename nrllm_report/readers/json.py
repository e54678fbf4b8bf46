"""JSON arrays and JSON Lines, plain or gzip-compressed, and JSON Lines on stdin.

JSON Lines are read as a stream, a line at a time, so a bad line costs only itself.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from ..errors import InputError
from ..model import N_, Unreadable

BYTE_ORDER_MARK = b"\xef\xbb\xbf"
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


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


def read_json_lines_stream(stream: BinaryIO, name: str) -> Iterator[tuple[int, Any]]:
    """Rows of a JSON Lines stream; blank lines are skipped but still counted as lines."""
    line_number = 0
    try:
        for line_number, line in enumerate(stream, 1):
            if line_number == 1 and line.startswith(BYTE_ORDER_MARK):
                line = line[len(BYTE_ORDER_MARK):]
            stripped = line.strip()
            if stripped:
                yield line_number, parse_json_line(stripped)
    except GZIP_ERRORS as error:
        raise InputError(
            name, f"the gzip data is truncated or corrupt after line {line_number} ({error})"
        ) from None
    except OSError as error:
        raise InputError(name, f"cannot be read after line {line_number}: {error.strerror or error}") from None


def _open(path: Path, name: str) -> BinaryIO:
    try:
        if path.name.lower().endswith(".gz"):
            return gzip.open(path, "rb")  # type: ignore[return-value]
        return open(path, "rb")
    except OSError as error:
        raise InputError(name, f"cannot be read: {error.strerror or error}") from None


def read_json_lines_file(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    with _open(path, name) as stream:
        yield from read_json_lines_stream(stream, name)


def read_json_file(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    """A JSON array of records; a ``.json`` file holding JSON Lines is read as such."""
    with _open(path, name) as stream:
        try:
            data = stream.read()
        except GZIP_ERRORS as error:
            raise InputError(name, f"the gzip data is truncated or corrupt ({error})") from None
    if data.startswith(BYTE_ORDER_MARK):
        data = data[len(BYTE_ORDER_MARK):]
    if not data.lstrip().startswith(b"["):
        yield from read_json_lines_stream(_lines(data), name)
        return
    try:
        records = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise InputError(name, f"is not valid UTF-8 (byte {error.start + 1})") from None
    except RecursionError:
        raise InputError(name, "nests JSON too deeply to be read") from None
    except json.JSONDecodeError as error:
        raise InputError(
            name, f"is not a valid JSON array: {error.msg} at line {error.lineno}, column {error.colno}"
        ) from None
    except ValueError as error:
        raise InputError(name, f"is not a readable JSON array: {error}") from None
    if not isinstance(records, list):
        raise InputError(name, "is not a JSON array")
    for record_number, record in enumerate(records, 1):
        yield record_number, record


def _lines(data: bytes) -> Iterator[bytes]:
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        yield data[start : end + 1]
        start = end + 1
