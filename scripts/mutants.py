"""Does the suite still catch the mutants of the last audit? Each is a small fault put into a copy
of the checkout; the suite must fail on every one.

    python scripts/mutants.py                    # each mutant against the tests that should catch it
    python scripts/mutants.py --tests tests/     # each against the whole suite

The mutants (issue 24: regrouping the tests must not lose what they assert):

- ``content-leak``: the fast path alone (the row checker unchanged) puts a step's content into
  its finish reason, a field the timeline shows. The privacy tests build through the fast path
  and must find the content on a page.
- ``one-token-sign``: the fast path checks the sign of the prompt tokens only, so a row with
  negative completion or total tokens passes it while the row checker refuses it. The tests
  holding both paths to the same verdict must tell them apart.

A copy of the checkout (the files git knows, as they are in the working tree) is made in a
temporary folder, the mutant applied to it, and pytest run there with the copy first on the
path, so that the CLI the tests start as subprocesses is the mutated one too. Exits 1 when a
mutant survives.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    original: str
    mutated: str
    tests: tuple[str, ...]  # where the suite should catch it


MUTANTS = (
    Mutant(
        "content-leak", "nrllm_report/check/fastpath.py",
        '        facts[name] = payload[name]\n',
        '        facts[name] = payload[name]\n'
        '    facts["finishReason"] = pc.coalesce(payload["content"], payload["finishReason"])\n',
        ("tests/safety/test_privacy.py", "tests/readers/test_allow_list.py", "tests/fast_path/test_fast_path.py"),
    ),
    Mutant(
        "one-token-sign", "nrllm_report/check/fastpath.py",
        "    for key in PAYLOAD_COUNTS:\n",
        '    for key in (key for key in PAYLOAD_COUNTS if key not in ("completionTokens", "totalTokens")):\n',
        ("tests/fast_path/test_fast_path.py", "tests/fast_path/test_fast_path_coverage.py",
         "tests/safety/test_fuzz.py"),
    ),
)


def copy_of_checkout(folder: Path) -> Path:
    """The files git knows (tracked and new, not ignored), as they are in the working tree."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return folder


def mutate(copy: Path, mutant: Mutant) -> None:
    path = copy / mutant.path
    text = path.read_text(encoding="utf-8")
    if text.count(mutant.original) != 1:
        raise SystemExit(f"{mutant.name}: {mutant.path} no longer holds the line the mutant changes; update it")
    path.write_text(text.replace(mutant.original, mutant.mutated), encoding="utf-8")


def caught(copy: Path, tests: tuple[str, ...]) -> tuple[bool, str]:
    """Whether pytest fails on the mutated copy, and its last lines. In one process (``-n 0``):
    under xdist, ``-x`` ends the run as interrupted (exit 2), which says nothing of a test failing."""
    environment = {**os.environ, "PYTHONPATH": str(copy)}
    completed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider",
                                *tests],
                               cwd=copy, env=environment, capture_output=True, text=True)
    tail = "\n".join(completed.stdout.strip().splitlines()[-3:])
    return completed.returncode == 1, tail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", nargs="+", help="the tests to run against every mutant (default: its own)")
    parser.add_argument("--only", nargs="+", choices=[mutant.name for mutant in MUTANTS], help="these mutants")
    options = parser.parse_args()
    survivors = []
    for mutant in MUTANTS:
        if options.only and mutant.name not in options.only:
            continue
        with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as folder:
            copy = copy_of_checkout(Path(folder))
            mutate(copy, mutant)
            failed, tail = caught(copy, tuple(options.tests or mutant.tests))
        print(f"{mutant.name}: {'caught' if failed else 'SURVIVED'}\n{tail}\n")
        if not failed:
            survivors.append(mutant.name)
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
