"""The build with every table against the events-only build of the same runs: issue 20's target.

    python bench/whole_run.py                          # 50,000 runs, 3 rounds, in /dev/shm
    python bench/whole_run.py --runs 5000 --rounds 1 --where /tmp

The seeded export (``scripts/generate_export.py --tables``) is written once as Parquet:
the events and, beside them, the runs, provider calls, governance decisions and the
MCP catalogue. Each round builds, one after the other in the same folder, the events
alone and the events with every table (``build --jobs 2 --timings``, a fresh input
cache each), and takes the ratio of the two walls. Printed: medians with the lowest
and highest of the rounds, and the build's stages of each. Issue 20 asks for at most
1.2 times the events-only build.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import generate_export  # noqa: E402  (scripts/, on the path above)
import run  # noqa: E402  (measurement)

STAGES = ("check", "sweep", "latency", "health", "site data", "run pages", "overview pages", "swap")


def exports(runs: int, seed: int) -> tuple[Path, list[Path]]:
    """The events file and the other tables' files of the seeded export (made once)."""
    folder = run.DATA / f"whole-run-{runs}-seed{seed}"
    events = folder / "tx_nrllm_agentrun_event.parquet"
    if not events.exists():
        print(f"generating {folder.name} ...", file=sys.stderr)
        folder.mkdir(parents=True, exist_ok=True)
        generate_export.write_export(events, runs, seed, tables=True)
    return events, list(generate_export.table_paths(events).values())


def build_command(inputs: list[Path], out: Path) -> list[str]:
    return [sys.executable, "-m", "nrllm_report", "build", *map(str, inputs), "--out", str(out), "--jobs", "2",
            "--timings", "--force", "--cache-dir", str(out.parent / "cache")]


def one_round(events: Path, tables: list[Path], work: Path) -> dict[str, dict[str, float]]:
    measured = {}
    for name, inputs in (("events only", [events]), ("every table", [events, *tables])):
        shutil.rmtree(work / "cache", ignore_errors=True)
        measured[name] = run.measure(build_command(inputs, work / "site"))
        run.remove(work / "site")
    return measured


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=191)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--where", type=Path, default=Path("/dev/shm"))
    options = parser.parse_args()
    events, tables = exports(options.runs, options.seed)
    rounds = []
    with tempfile.TemporaryDirectory(dir=options.where) as folder:
        for number in range(options.rounds):
            rounds.append(one_round(events, tables, Path(folder)))
            print(f"round {number + 1}: " + ", ".join(f"{name} {result['wall']:.2f} s"
                                                      for name, result in rounds[-1].items()), file=sys.stderr)
    ratios = [measured["every table"]["wall"] / measured["events only"]["wall"] for measured in rounds]
    print(f"{options.runs:,} runs, {options.rounds} rounds, in {options.where}")
    print("| measure | events only | every table |")
    print("|---|---:|---:|")
    for key in ("wall", "cpu", "rss_mb", *(f"stage {stage}" for stage in STAGES)):
        cells = [
            spread([measured[name].get(key, 0.0) for measured in rounds]) for name in ("events only", "every table")
        ]
        print(f"| {key} | {cells[0]} | {cells[1]} |")
    print(f"\nevery table / events only: {spread(ratios)} (issue 20: at most 1.20)")


if __name__ == "__main__":
    main()
