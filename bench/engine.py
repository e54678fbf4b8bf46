"""The build against its floor, alternated, on tmpfs and on disk: issue 19's targets.

    python bench/engine.py                                # 50,000 runs, 3 rounds, /dev/shm and bench/
    python bench/engine.py --runs 5000 --rounds 1 --where /dev/shm
    python bench/engine.py --tool /path/to/other/checkout  # the same measurement of another version

Each round measures, one after the other in the same folder: a full bilingual build
(``build --timings --jobs 2``, a fresh input cache) and the floor, which does the same
work the same way at its least: one process reads the Parquet export, sorts it by run
and sequence and turns each run into Python lists, then two processes (as the build's
two workers) write the site's files with their sizes, each a half of them. The ratio is
taken per round (build over the floor measured next to it), so a slower disk in one
round slows both. Printed: medians with the lowest and highest of the rounds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402  (the benchmark's exports, measurement and floor scripts)

STAGES = ("read", "check", "sweep", "health", "site data", "run pages", "overview pages", "swap")


def floor_write(sizes_file: Path, root: Path) -> dict[str, float]:
    """The site's files written by two processes at once, each every other file (by language
    folder order, as the build's workers split them); the wall of both together."""
    script = [sys.executable, "-c", run.FLOOR_WRITE, str(sizes_file), str(root)]
    halves = [_quoted(script + [str(half), "2"]) for half in (0, 1)]
    return run.measure(["/bin/sh", "-c", f"{halves[0]} & {halves[1]} & wait"])


def _quoted(command: list[str]) -> str:
    return " ".join("'" + part.replace("'", "'\\''") + "'" for part in command)


def build_command(tool: Path, export: Path, out: Path) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tool)!r}); "
            "from nrllm_report.cli import main; main()",
            "build", str(export), "--out", str(out), "--jobs", "2", "--timings", "--force",
            "--cache-dir", str(out.parent / "cache")]


def one_round(tool: Path, export: Path, work: Path) -> dict[str, float]:
    """A build and its floor, next to each other in ``work``."""
    site = work / "site"
    built = run.measure(build_command(tool, export, site))
    sizes_file = work / "sizes.json"
    sizes = run.site_file_sizes(site)
    sizes.sort(key=lambda pair: pair[0].split("/", 1)[0])  # by language folder, as the workers split
    sizes_file.write_text(json.dumps(sizes))
    run.remove(site)
    shutil.rmtree(work / "cache", ignore_errors=True)
    read = run.measure([sys.executable, "-c", run.FLOOR_READ, str(export)])
    floor_site = work / "floor"
    written = floor_write(sizes_file, floor_site)
    run.remove(floor_site)
    floor = read["wall"] + written["wall"]
    stages = {key.removeprefix("stage "): value for key, value in built.items() if key.startswith("stage ")}
    return {"build": built["wall"], "cpu": built["cpu"], "rss_mb": built["rss_mb"], "floor read": read["wall"],
            "floor write": written["wall"], "floor": floor, "ratio": built["wall"] / floor,
            "check + sweep": stages.get("check", 0.0) + stages.get("sweep", stages.get("aggregate", 0.0)),
            **stages}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def table(results: dict[str, list[dict[str, float]]]) -> str:
    places = list(results)
    keys = ["build", "cpu", "rss_mb", "floor read", "floor write", "floor", "ratio", "check + sweep",
            *[stage for stage in STAGES if any(stage in r for rounds in results.values() for r in rounds)],
            *sorted({key for rounds in results.values() for r in rounds for key in r
                     if key.startswith("sweep:") or "worker seconds" in key})]
    lines = ["| | " + " | ".join(places) + " |", "|---|" + "---:|" * len(places)]
    for key in keys:
        cells = [spread([r[key] for r in rounds if key in r]) if any(key in r for r in rounds) else "–"
                 for rounds in results.values()]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--where", action="append", help="folders to measure in (default: /dev/shm and bench/)")
    parser.add_argument("--tool", type=Path, default=run.ROOT, help="the checkout whose nrllm_report is measured")
    parser.add_argument("--export", type=Path, help="the export to build (default: the seeded one of --runs)")
    args = parser.parse_args()
    export = args.export or run.export(args.runs, run.SEED)
    places = [Path(place) for place in (args.where or ["/dev/shm", str(run.ROOT / "bench")])]
    results: dict[str, list[dict[str, float]]] = {str(place): [] for place in places}
    for _round in range(args.rounds):
        for place in places:
            with tempfile.TemporaryDirectory(prefix="nrllm-engine-", dir=place) as work:
                results[str(place)].append(one_round(args.tool.resolve(), export, Path(work)))
    print(f"{export.name}, tool {args.tool}, {args.rounds} rounds: median (lowest–highest)\n")
    print(table(results))


if __name__ == "__main__":
    main()
