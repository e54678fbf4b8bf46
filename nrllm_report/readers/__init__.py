"""Readers for every export shape, chosen by one registry (``registry.READERS``).

Each reader yields chunks (see ``chunks``); row by row they are ``(row_number, value)``:
the 1-based line or record number in its input (a CSV's header not counted) and the
parsed value (usually a dict), or an ``Unreadable`` for a line or record that cannot
be read (not JSON, not UTF-8, the wrong number of fields). A file that cannot be read
at all raises ``InputError``. An input (``Input``) is a file, a folder, standard input
or a database, and knows its reader (see ``inputs``).
"""

from __future__ import annotations

from .chunks import ArrowChunk, Chunk, RowChunk
from .inputs import STDIN, Input, Reader
from .registry import READERS, Readers, resolve_input, resolve_inputs

__all__ = [
    "ArrowChunk", "Chunk", "Input", "READERS", "RowChunk", "Reader", "Readers", "STDIN", "resolve_input",
    "resolve_inputs",
]
