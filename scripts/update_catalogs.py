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
        [*babel, "extract", "-F", "pyproject.toml", "-k", "_", "-k", "N_", "--no-location",
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
