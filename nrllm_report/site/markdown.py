"""Markdown for CI step summaries, merge-request comments and tickets: escaped, and bounded in size.

Every value from the data goes through ``escape_cell``: each ASCII punctuation
character gets a backslash (CommonMark allows it before any of them), so a ``|``
cannot end a table cell, a backtick cannot open code, ``<`` cannot open HTML and
``@`` cannot mention anyone; line breaks become spaces. Labels and numbers we
make ourselves are written as they are.

A document never reaches ``MARKDOWN_LIMIT`` bytes (GitHub and GitLab cut comments
and step summaries at about 64 KB): a table takes rows only while the document
stays under the limit less a reserve for what follows, and ends with a line saying
how many rows were left out.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Sequence

MARKDOWN_LIMIT = 64 * 1024  # bytes, UTF-8
CELL_CHARACTERS = 200  # a data value longer than this is cut, with an ellipsis
TABLE_RESERVE = 6 * 1024  # bytes kept free after each table for the sections that follow
NOTE_RESERVE = 512  # bytes for a table's "left out" line

_SPECIALS = frozenset(string.punctuation)
_ESCAPES = {ord(character): "\\" + character for character in _SPECIALS}
_ESCAPES.update({ord(character): " " for character in "\r\n\t\v\f\x85\u2028\u2029"})


def escape_cell(value: object, limit: int = CELL_CHARACTERS) -> str:
    """A value from the data as Markdown text that stays inside one table cell."""
    text = "" if value is None else str(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    text = "".join(character if character.isprintable() or character == " " else " " for character in text)
    return text.translate(_ESCAPES)


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


class MarkdownDocument:
    """A Markdown text built section by section, never reaching ``limit`` bytes."""

    def __init__(self, limit: int = MARKDOWN_LIMIT) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    def _add(self, text: str) -> bool:
        """Append ``text`` if it fits; a block that does not fit is left out whole."""
        size = utf8_size(text)
        if self.size + size >= self.limit:
            return False
        self.parts.append(text)
        self.size += size
        return True

    def heading(self, level: int, text: str) -> None:
        self._add(f"{'#' * level} {text}\n\n")

    def paragraph(self, text: str) -> None:
        self._add(f"{text}\n\n")

    def bullets(self, items: Iterable[str]) -> None:
        lines = "".join(f"- {item}\n" for item in items)
        if lines:
            self._add(lines + "\n")

    def table(
        self, headers: Sequence[str], rows: Iterable[Sequence[str]], *, total: int,
        left_out: Callable[[int], str], max_rows: int | None = None, reserve: int = TABLE_RESERVE,
    ) -> int:
        """A table of ``total`` rows, as many as fit (at most ``max_rows``); returns the rows written.

        ``left_out(count)`` says, in the document's language, how many rows were left out.
        """
        head = "| " + " | ".join(headers) + " |\n" + "|" + "---|" * len(headers) + "\n"
        budget = self.limit - self.size - max(reserve, NOTE_RESERVE) - utf8_size(head)
        lines: list[str] = []
        used = 0
        for row in rows:
            if max_rows is not None and len(lines) >= max_rows:
                break
            line = "| " + " | ".join(row) + " |\n"
            if used + utf8_size(line) > budget:
                break
            lines.append(line)
            used += utf8_size(line)
        if lines:
            self._add(head + "".join(lines) + "\n")
        if total > len(lines):
            self._add(f"{left_out(total - len(lines))}\n\n")
        return len(lines)

    def text(self) -> str:
        return "".join(self.parts).rstrip("\n") + "\n"
