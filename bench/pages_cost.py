"""What pages cost a build: the same export built by two checkouts in turn, medians with their spread.

    git worktree add --detach /tmp/without HEAD
    git -C /tmp/without apply "$PWD/bench/without_find_any_run.patch"
    python bench/pages_cost.py /tmp/without . --input bench/data/runs-50000-seed191.parquet --repeat 3

Each checkout runs as ``python -m nrllm_report`` from its folder (its package first on the path),
a full build with ``--no-cache --timings`` into a fresh folder under ``--work``, removed after it.
The builds alternate (A B A B ...), so load from other work on the machine falls on both alike.
``without_find_any_run.patch`` leaves out what issue 22 added to a build: the lists of runs (by day,
outcome, status, configuration, server and tool), the filter's files and the runs' tools and
per-tool runs the sweep gathers for them.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

STAGES = ("sweep", "run pages", "overview pages")


def build(tool: Path, source: Path, out: Path, jobs: int) -> dict[str, float]:
    """One full build by the checkout at ``tool``: its wall and CPU seconds (all its processes), its
    stages' seconds, its files and their bytes."""
    command = [sys.executable, "-m", "nrllm_report", "build", str(source.resolve()), "--out", str(out), "--jobs",
               str(jobs), "--no-cache", "--timings", "--force"]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=tool, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if completed.returncode != 0:
        raise SystemExit(f"{tool}: {' '.join(command)} failed:\n{completed.stderr}")
    timings = json.loads(completed.stderr[completed.stderr.index("{"):completed.stderr.rindex("}") + 1])
    files = [path for path in out.rglob("*") if path.is_file()]
    return {"wall": wall, "cpu": cpu, **{stage: float(timings.get(stage, 0.0)) for stage in STAGES},
            "files": float(len(files)), "MB": sum(path.stat().st_size for path in files) / 1e6}


def spread(values: list[float]) -> str:
    """The median and the range, as ``12.3 (11.9 to 13.0)``."""
    return f"{statistics.median(values):.2f} ({min(values):.2f} to {max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="the checkout built first in each round (without the pages)")
    parser.add_argument("b", type=Path, help="the checkout built second (with them)")
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/dev/shm"))
    options = parser.parse_args()
    found: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for round_number in range(options.repeat):
        for side in ("a", "b"):
            out = options.work / f"pages-cost-{side}" / "site"
            out.parent.mkdir(parents=True, exist_ok=True)
            try:
                found[side].append(build(getattr(options, side), options.input, out, options.jobs))
            finally:
                shutil.rmtree(out.parent, ignore_errors=True)
            print(f"round {round_number + 1} {side}: {found[side][-1]['wall']:.2f} s", file=sys.stderr, flush=True)
    print(f"| {options.input.name}, `--jobs {options.jobs}`, medians of {options.repeat} (range) | A: {options.a} "
          f"| B: {options.b} | B / A |")
    print("|---|---:|---:|---:|")
    for name in ("wall", "cpu", *STAGES, "files", "MB"):
        a_values, b_values = [run[name] for run in found["a"]], [run[name] for run in found["b"]]
        ratio = statistics.median(b_values) / statistics.median(a_values) if statistics.median(a_values) else 0.0
        print(f"| {name} | {spread(a_values)} | {spread(b_values)} | {ratio:.3f} |")
    for name in ("wall", "cpu"):
        ratios = [b[name] / a[name] for a, b in zip(found["a"], found["b"])]
        print(f"\nB / A {name}, round by round: {', '.join(f'{ratio:.3f}' for ratio in ratios)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
