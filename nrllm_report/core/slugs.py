"""File names for run and server pages: safe, short, unique and stable for any id.

An id that is already a plain lower-case name keeps it (``runs/42.html`` for run 42,
a uuid stays a uuid). Any other id gets a readable prefix plus a hash of its exact
text, so ids differing only in case or Unicode normalization never share a file,
not even on a case-insensitive file system.
"""

from __future__ import annotations

import hashlib
import re

PLAIN_ID = re.compile(r"[a-z0-9](?:[a-z0-9_-]{0,99})")
HASHED_TAIL = re.compile(r"(?:.*-)?h[0-9a-f]{20}")
UNSAFE = re.compile(r"[^a-z0-9]+")
PREFIX_LENGTH = 40
# Device names and our own page names, which a plain id must not take.
RESERVED = frozenset(
    {"con", "prn", "aux", "nul", "index", "problems", "servers", "runs", "assets"}
    | {f"com{digit}" for digit in range(10)}
    | {f"lpt{digit}" for digit in range(10)}
)


def slug(identifier: str) -> str:
    """The file stem for a page about ``identifier``: at most 64 bytes of ``[a-z0-9_-]``."""
    if PLAIN_ID.fullmatch(identifier) and identifier not in RESERVED and not HASHED_TAIL.fullmatch(identifier):
        return identifier
    digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    readable = UNSAFE.sub("-", identifier.lower()).strip("-")[:PREFIX_LENGTH].strip("-")
    return f"{readable}-h{digest}" if readable else f"h{digest}"
