"""Extract the messages into translations/messages.pot and merge them into every catalog.

Run after changing a message: ``python scripts/update_catalogs.py``. New messages
arrive untranslated (the catalog test then fails until someone translates them);
messages no longer used are dropped. Existing translations are kept.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "translations" / "messages.pot"
LANGUAGES = ("en", "de")


def main() -> int:
    babel = [sys.executable, "-m", "babel.messages.frontend"]
    subprocess.run(
        [*babel, "extract", "-F", "pyproject.toml", "-k", "_", "-k", "N_", "-k", "ngettext:1,2", "--no-location",
         "--sort-output", "--omit-header", "--no-wrap", "-o", str(TEMPLATE), "."],
        cwd=ROOT, check=True,
    )
    for language in LANGUAGES:
        catalog = ROOT / "translations" / language / "LC_MESSAGES" / "messages.po"
        command = "update" if catalog.exists() else "init"
        arguments = [*babel, command, "-i", str(TEMPLATE), "-l", language, "-o", str(catalog), "--no-wrap"]
        if command == "update":
            arguments += ["--no-fuzzy-matching", "--ignore-obsolete", "--omit-header"]
        subprocess.run(arguments, cwd=ROOT, check=True)
        settle(catalog, language)
    return 0


def is_label_key(message_id: str) -> bool:
    """Ids like ``outcome.cancelled``: looked up by a value, and translated in every language."""
    return " " not in message_id and "." in message_id.strip(".")


def settle(path: Path, language: str) -> None:
    """Clear the header's fuzzy flag; English messages are their own translation, keys excepted."""
    from babel.messages.pofile import read_po, write_po

    with path.open("rb") as stream:
        catalog = read_po(stream, locale=language)
    catalog.fuzzy = False
    if language == "en":
        for message in catalog:
            if message.id and not message.string and isinstance(message.id, str) and not is_label_key(message.id):
                message.string = message.id
            elif message.id and isinstance(message.id, tuple) and not any(message.string):
                message.string = message.id
    with path.open("wb") as stream:
        write_po(stream, catalog, width=0, no_location=True, omit_header=False)


if __name__ == "__main__":
    raise SystemExit(main())
