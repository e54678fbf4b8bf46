"""The README's "Tests by feature" table: each feature folder of tests/, what it holds, how many tests.

    python scripts/test_counts.py          # print the table (paste it into the README)
    python scripts/test_counts.py --check  # exit 1 where the README's table says otherwise

What a folder holds is its ``__init__.py``'s docstring; the counts are pytest's own, every
collected test, a parametrized case one each.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
HEADER = "| folder | tests | what they hold |\n|---|---:|---|\n"


def collected_counts() -> Counter[str]:
    """Each feature folder's collected tests (``pytest --collect-only -q``, run from the checkout)."""
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", "tests"],
        cwd=REPO, capture_output=True, text=True, check=False, timeout=300,
    )
    if completed.returncode != 0:
        raise SystemExit(f"pytest could not collect the tests:\n{completed.stdout[-3000:]}{completed.stderr[-3000:]}")
    return Counter(line.split("/")[1] for line in completed.stdout.splitlines() if line.startswith("tests/"))


def folder_about(folder: str) -> str:
    docstring = ast.get_docstring(ast.parse((TESTS / folder / "__init__.py").read_text(encoding="utf-8")))
    return " ".join((docstring or "").split())


def table(counts: Counter[str]) -> str:
    rows = [f"| [`tests/{folder}/`](tests/{folder}) | {counts[folder]:,} | {folder_about(folder)} |\n"
            for folder in sorted(counts)]
    return HEADER + "".join(rows) + f"| all | {sum(counts.values()):,} | |\n"


def main(argv: list[str]) -> int:
    expected = table(collected_counts())
    if "--check" not in argv:
        sys.stdout.write(expected)
        return 0
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    if expected not in readme:
        sys.stdout.write(f"README.md's table of tests by feature is not what the tests are; it should be:\n{expected}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
