"""Data strings made safe for a terminal and for XML: ids from the data may hold control characters."""

from __future__ import annotations

import re

# XML 1.0's Char production: everything else (most C0 controls, lone surrogates, U+FFFE/U+FFFF) is not allowed.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
REPLACEMENT = "\ufffd"


def printable(text: str) -> str:
    """``text`` with each character a terminal would act on written as an escape (``\\x1b``)."""
    if text.isprintable():
        return text
    return "".join(character if character.isprintable() else repr(character)[1:-1] for character in text)


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold replaced by U+FFFD."""
    return _NOT_XML.sub(REPLACEMENT, text)
