"""Pure helpers that read one raw row: spellings, payload, server, the ADR-191 outcome.

Nothing here raises for bad data and nothing decides whether a row is kept:
``validate`` applies the rules in their order and uses these to read values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from ..core import jsontext
from ..core.model import MCP_PREFIX, Outcome
from ..core.schema import COLUMN_SPELLINGS

MAX_INT64 = 2**63 - 1
# A table column's number written as text: plain ASCII digits, a decimal point for decimals.
# (Python's int() would also take " 3", "1_000" and other scripts' digits.)
INTEGER_TEXT = re.compile(r"[0-9]{1,19}")
DECIMAL_TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)?")

class Absent:
    """Marks a key that is missing or null: nr-llm drops null keys, so both mean absent."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = Absent()


def same_value(left: Any, right: Any) -> bool:
    """Equality that does not let ``True == 1`` or ``1 == 1.0`` pass for agreement."""
    return type(left) is type(right) and left == right


def column(row: Mapping[str, Any], name: str) -> tuple[Any, str | None]:
    """The value of a column under any spelling, and a spelling conflict if two disagree."""
    found: Any = ABSENT
    for spelling in COLUMN_SPELLINGS[name]:
        value = row.get(spelling)
        if value is None:
            continue
        if found is ABSENT:
            found = value
        elif not same_value(found, value):
            return found, spelling
    return found, None


def parse_payload(value: Any) -> dict[str, Any] | None:
    """The payload as an object: from an object, from JSON text, or None if it is neither."""
    if value is ABSENT:
        return {}
    if isinstance(value, dict):
        return value
    if isinstance(value, (str, bytes)):
        try:
            parsed = jsontext.loads(value)
        except jsontext.JsonTextError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def payload_value(payload: Mapping[str, Any], key: str) -> Any:
    value = payload.get(key)
    return ABSENT if value is None else value


def is_plain_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def as_count(value: Any) -> int | None:
    """An integer in 0..2**63-1, or None when the value is not one."""
    if is_plain_int(value) and 0 <= value <= MAX_INT64:
        return int(value)
    return None


def as_column_integer(value: Any) -> int | None:
    """A table column's integer (``sequence``, ``crdate``...): a JSON integer or a string
    holding one in plain digits (``"12"``), in 0..2**63-1; None for anything else."""
    if isinstance(value, str):
        return as_count(int(value)) if INTEGER_TEXT.fullmatch(value) else None
    return as_count(value)


def as_column_decimal(value: Any) -> float | None:
    """``duration_ms``, a decimal(10,2): a JSON number or a string holding a plain decimal
    (``"4.00"``, ``"4"``), finite and non-negative; None for anything else."""
    if isinstance(value, str):
        return as_duration(float(value)) if DECIMAL_TEXT.fullmatch(value) else None
    return as_duration(value)


def as_duration(value: Any) -> float | None:
    """A finite, non-negative number of milliseconds, or None.

    A decimal is read as its exact value, correctly rounded; ``-0`` is 0.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float, Decimal)):
        try:
            number = float(value)
        except (OverflowError, ValueError):
            return None
        if math.isfinite(number) and number >= 0:
            return number + 0.0  # -0.0 + 0.0 is 0.0: a negative zero is no different from zero
    return None


def is_text(value: Any) -> bool:
    """A string that UTF-8 can hold: JSON's ``\\ud800`` escapes make ones no output can write."""
    if not isinstance(value, str):
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def as_run_id(value: Any) -> str | None:
    """The run as a string: a uid becomes its decimal text, a uuid stays as it is."""
    if isinstance(value, str):
        return value if value != "" and is_text(value) else None
    if is_plain_int(value):
        return str(value)
    return None


def read_outcome(tool_is_error: Any, tool_outcome: Any) -> Outcome | None:
    """ADR-191 decision 5: the boolean says WHETHER a step states an outcome, the outcome WHICH.

    The arguments must already have passed validation (a real boolean, a known outcome).
    """
    if tool_is_error is ABSENT:
        return None
    if tool_outcome is ABSENT:
        return Outcome.FAILED if tool_is_error else Outcome.OK
    return Outcome(tool_outcome)


def server_of(tool_name: str | None, known_servers: Sequence[str] = ()) -> str | None:
    """The MCP server of a tool named ``mcp_<server>_<tool>``; None for local tools.

    Server ids may contain ``_``: the longest known id that fits wins, and without
    one the name is split at its first ``_`` after the prefix.
    """
    if tool_name is None or not tool_name.startswith(MCP_PREFIX):
        return None
    rest = tool_name[len(MCP_PREFIX):]
    for server in known_servers:  # sorted longest first by the caller
        if rest.startswith(server + "_") and len(rest) > len(server) + 1:
            return server
    server, separator, remote_name = rest.partition("_")
    if not separator or not server or not remote_name:
        return None
    return server


def known_server_order(servers: Sequence[str]) -> tuple[str, ...]:
    """Known server ids in the order ``server_of`` must try them: longest first, then by name."""
    unique = {server for server in servers if server}
    return tuple(sorted(unique, key=lambda server: (-len(server), server)))


def count_of(value: Any) -> int | None:
    """How many items a list-valued payload key holds (its items are content)."""
    if isinstance(value, (list, tuple)):
        return len(value)
    if isinstance(value, dict):
        return len(value)
    return None


def as_texts(value: Any) -> tuple[str, ...] | None:
    """A list of strings (names, types, sources) as a tuple; None when it is not one."""
    if isinstance(value, list) and all(is_text(item) for item in value):
        return tuple(value)
    return None


def named_items(items: list[Any], key: str) -> tuple[str, ...]:
    """The ``key`` of each item that is an object with a string there, as nr-llm's privacy
    filter takes the names of requested calls (and the types of artifacts): others are skipped."""
    return tuple(item[key] for item in items if isinstance(item, dict) and is_text(item.get(key)))


def text_length(value: Any) -> int | None:
    """A string's length in characters (code points, as PHP's ``mb_strlen``); None for a non-string."""
    return len(value) if isinstance(value, str) else None


def short_repr(value: Any, limit: int = 60) -> str:
    """A bounded ``repr`` for messages: a hostile value must not make a message huge.

    JSON's own literals are spelled as in JSON (``true``, ``false``, ``null``), since
    that is what the user's file says.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    try:
        text = repr(value)
    except ValueError:  # ints past the digit limit
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
