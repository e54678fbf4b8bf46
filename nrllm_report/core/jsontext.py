"""JSON text as this tool reads it: the one definition for lines, records and payload texts.

The row checker reads JSON with Python's ``json``, within these limits:

- the bytes are UTF-8, strictly (no encoded surrogates, no overlong forms);
- arrays and objects nest at most ``MAX_NESTING`` deep. Python's own limit depends
  on how deep the stack already is; this one does not (PHP's ``json_encode``, which
  wrote nr-llm's payloads, stops at 512 too);
- an integer has at most 4,300 digits (Python's limit on reading an int from text);
- ``NaN``, ``Infinity`` and ``-Infinity`` are numbers, as Python reads them, so a
  field that must be a finite number refuses them (``bad-type``) and a key nobody
  reads may hold them; ``Inf``, ``-Inf``, ``-NaN`` and other spellings are not JSON.

Arrow's JSON reader, which the fast path uses, accepts more than that wherever it
does not keep a value: invalid UTF-8, any depth, any number of digits, ``Inf`` and
``-NaN``. ``arrow_may_differ`` marks each text for which that can matter, cheaply
and conservatively (a mark costs only speed), so that such a text is read row by
row; ``read_json_lines`` finds the lines Arrow cannot read at all.
"""

from __future__ import annotations

import enum
import functools
import json
import re
import struct
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

MAX_NESTING = 512
MAX_INTEGER_DIGITS = 4_300
# An integer past the digit limit holds a run of 1,000 digits (RE2 repeats at most 1,000 times).
DIGIT_RUN = "[0-9]{1000}"
# A number token Python and Arrow may read differently: Inf, -Inf, -NaN (NaN and Infinity too).
NON_FINITE_TOKEN = r"[:,\[][ \t\r\n]*[-+]?(?:Inf|NaN)"
NON_FINITE_WORDS = (b"Inf", b"NaN")  # a text holding neither cannot match NON_FINITE_TOKEN
# Halving a block to find the lines Arrow cannot read may parse this many times its bytes.
ISOLATION_BUDGET = 4

STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# What surrogateescape makes of a byte that is not UTF-8.
ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


class Reason(str, enum.Enum):
    """Why a text is not JSON as this tool reads it."""

    NOT_UTF8 = "not-utf8"
    TOO_DEEP = "too-deep"
    NOT_JSON = "not-json"
    NUMBER_TOO_LONG = "number-too-long"


class JsonTextError(ValueError):
    """A text that is not JSON as this tool reads it; ``offset`` is 1-based (a byte for
    ``NOT_UTF8``, a character for ``NOT_JSON``), 0 where there is none."""

    def __init__(self, reason: Reason, offset: int = 0) -> None:
        super().__init__(reason.value)
        self.reason = reason
        self.offset = offset


def loads(text: str | bytes) -> Any:
    """The JSON value of ``text``, or ``JsonTextError`` saying why it has none."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as error:
            raise JsonTextError(Reason.NOT_UTF8, error.start + 1) from None
    if nests_too_deeply(text):
        raise JsonTextError(Reason.TOO_DEEP)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise JsonTextError(Reason.NOT_JSON, error.pos + 1) from None
    except RecursionError:  # within MAX_NESTING only on an already very deep stack
        raise JsonTextError(Reason.TOO_DEEP) from None
    except ValueError:  # int() past MAX_INTEGER_DIGITS
        raise JsonTextError(Reason.NUMBER_TOO_LONG) from None


def nests_too_deeply(text: str) -> bool:
    """Whether arrays and objects in ``text`` open more than ``MAX_NESTING`` deep.

    Brackets inside strings do not count. Most texts have fewer brackets than the
    limit in all and are answered by counting them.
    """
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return False
    brackets = _NOT_BRACKET.sub("", STRING.sub("", text))
    return max(accumulate(1 if bracket in "[{" else -1 for bracket in brackets)) > MAX_NESTING


# ---------------------------------------------------------------- texts Arrow may read differently


def arrow_may_differ(texts: pa.Array) -> pa.Array:
    """For each text (UTF-8, as binary or string), whether Arrow's reader might read it
    otherwise than ``loads``: an ``Inf``/``NaN`` token, deep nesting, a long digit run.

    One regular expression pass over all texts; the other tests run only on the texts
    long enough to fail them. Nulls are False.
    """
    if any_text_holds(texts, *NON_FINITE_WORDS):
        marks = pc.fill_null(pc.match_substring_regex(texts, NON_FINITE_TOKEN), False)
    else:  # no row can match: one search of all the bytes, not a regular expression a row
        marks = _none_of(texts)
    lengths = pc.fill_null(pc.binary_length(texts), 0)
    for minimum, test in ((MAX_NESTING, _many_brackets), (1_000, _long_digit_run)):
        candidates = pc.greater_equal(lengths, minimum)
        if pc.any(candidates).as_py():
            marks = pc.or_(marks, _where(candidates, texts, test=test))
    return marks


def any_text_holds(texts: pa.Array, *needles: bytes) -> bool:
    """Whether any text of ``texts`` (string or binary) holds one of ``needles``: one search of
    the bytes of all its values, seen in place (a copy of a chunk's 15 MB of payloads, two a
    chunk in flight, showed in the build's peak memory)."""
    buffers = texts.buffers()
    if len(texts) == 0 or buffers[2] is None:
        return False
    large = pa.types.is_large_string(texts.type) or pa.types.is_large_binary(texts.type)
    width, form = (8, "<q") if large else (4, "<i")
    first = struct.unpack_from(form, buffers[1], width * texts.offset)[0]
    stop = struct.unpack_from(form, buffers[1], width * (texts.offset + len(texts)))[0]
    values = memoryview(buffers[2])[first:stop]
    return any(_literal(needle).search(values) is not None for needle in needles)


@functools.cache
def _literal(needle: bytes) -> re.Pattern[bytes]:
    return re.compile(re.escape(needle))


def _none_of(texts: pa.Array) -> pa.Array:
    """False for every row of ``texts``."""
    return pc.fill_null(pa.nulls(len(texts), pa.bool_()), False)


def _where(candidates: pa.Array, texts: pa.Array, *, test: Callable[[pa.Array], pa.Array]) -> pa.Array:
    """``test`` run on the candidate texts only, spread back as a mask over all of them."""
    subset = pc.fill_null(test(texts.filter(candidates)), False)
    return pc.replace_with_mask(pa.array([False] * len(texts), pa.bool_()), candidates, subset)


def _many_brackets(texts: pa.Array) -> pa.Array:
    opened = pc.add(pc.count_substring(texts, "["), pc.count_substring(texts, "{"))
    return pc.greater(opened, MAX_NESTING)


def _long_digit_run(texts: pa.Array) -> pa.Array:
    return pc.match_substring_regex(texts, DIGIT_RUN)


# ---------------------------------------------------------------- UTF-8


def invalid_utf8_rows(values: pa.Array) -> pa.Array:
    """Which rows of ``values`` (any type, nested ones included) hold text that is not UTF-8.

    Arrow validates a whole array at once; only an array that fails is halved until
    the rows that fail are found.
    """
    found: list[int] = []
    if not _utf8_valid(values):
        _find_invalid(values, 0, stop=len(values), found=found)
    mask = [False] * len(values)
    for position in found:
        mask[position] = True
    return pa.array(mask, pa.bool_())


def _utf8_valid(values: pa.Array) -> bool:
    try:
        values.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def _find_invalid(values: pa.Array, start: int, *, stop: int, found: list[int]) -> None:
    if stop - start == 1:
        found.append(start)
        return
    middle = (start + stop) // 2
    for first, last in ((start, middle), (middle, stop)):
        if not _utf8_valid(values.slice(first, last - first)):
            _find_invalid(values, first, stop=last, found=found)


# ---------------------------------------------------------------- Arrow's reading of many lines


def read_json_lines(
    lines: pa.Array, schema: pa.Schema, *, block_bytes: int | None = None, use_threads: bool = False
) -> tuple[pa.Table | None, list[int]]:
    """Arrow's reading of ``lines`` (binary or string, no nulls, each one JSON object without
    a newline), one row a line, and the positions of the lines it cannot read, which stand
    in the table as ``{}``.

    Arrow parses blocks of ``block_bytes`` (all at once when None), each at least as
    long as the longest line. Lines that fail are found by halving, parsing at most
    ``ISOLATION_BUDGET`` times the lines' bytes; past that, the rest of a failing part
    is given up whole. Returns no table when no line could be read.
    """
    reader = _LineReader(schema, block_bytes=block_bytes, use_threads=use_threads)
    table = reader.read_array(lines)
    if table is not None:
        return table, []
    texts: list[bytes] = lines.cast(pa.binary()).to_pylist()
    budget = [ISOLATION_BUDGET * sum(len(text) + 1 for text in texts)]
    failed: list[int] = []
    reader.find_unreadable(texts, start=0, stop=len(texts), budget=budget, failed=failed)
    if len(failed) == len(texts):
        return None, failed
    unreadable = set(failed)
    table = reader.read([b"{}" if position in unreadable else text for position, text in enumerate(texts)])
    return (table, failed) if table is not None else (None, list(range(len(texts))))


class _LineReader:
    """Arrow's JSON reader with one schema, reading lines."""

    def __init__(self, schema: pa.Schema, *, block_bytes: int | None, use_threads: bool) -> None:
        self.parse_options = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        self.block_bytes = block_bytes
        self.use_threads = use_threads

    def read_array(self, lines: pa.Array) -> pa.Table | None:
        """The lines of an Arrow array, joined in Arrow's memory without a copy per line."""
        length = len(lines)
        if length == 0:
            return None
        joined = pc.binary_join_element_wise(lines.cast(pa.binary()), b"", b"\n")
        _validity, offset_buffer, data = joined.buffers()
        offsets = pa.Array.from_buffers(pa.int32(), length + 1, [None, offset_buffer], offset=joined.offset)
        start, stop = offsets[0].as_py(), offsets[length].as_py()
        longest = pc.max(pc.binary_length(lines)).as_py() or 0
        return self._parse(pa.BufferReader(data.slice(start, stop - start)), stop - start, longest=longest,
                           count=length)

    def read(self, lines: Sequence[bytes]) -> pa.Table | None:
        """Lines given as bytes, or None when Arrow fails on them or reads them otherwise."""
        data = b"\n".join(lines) + b"\n"
        longest = max((len(line) for line in lines), default=0)
        return self._parse(pa.BufferReader(data), len(data), longest=longest, count=len(lines))

    def _parse(self, source: pa.BufferReader, size: int, *, longest: int, count: int) -> pa.Table | None:
        block = max(longest + 2, self.block_bytes or size + 1)
        try:
            table = pajson.read_json(
                source, read_options=pajson.ReadOptions(block_size=block, use_threads=self.use_threads),
                parse_options=self.parse_options,
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        return table if table.num_rows == count else None

    def find_unreadable(
        self, lines: Sequence[bytes], *, start: int, stop: int, budget: list[int], failed: list[int]
    ) -> None:
        """The positions in ``start..stop`` (which failed as a whole) that Arrow cannot read."""
        if stop - start == 1 or budget[0] <= 0:
            failed.extend(range(start, stop))
            return
        middle = (start + stop) // 2
        for first, last in ((start, middle), (middle, stop)):
            part = lines[first:last]
            budget[0] -= sum(len(line) + 1 for line in part)
            if self.read(part) is None:
                self.find_unreadable(lines, start=first, stop=last, budget=budget, failed=failed)
