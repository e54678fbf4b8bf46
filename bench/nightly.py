"""The nightly build with an archive (issue 12), against a full build of the same runs.

    python bench/nightly.py                      # 90 days of archive, 30 + 1 days of export; about 8 minutes
    python bench/nightly.py --rate 100 --repeat 1

At the 50,000-run benchmark's rate of runs a day (its export spreads 50,000 runs over
the generator's span), it generates a history of ``days + 1`` days, then:

- setup (not measured): a build of the first ``days`` days with ``--archive``, which
  leaves the previous site, the archive of 90 days and the input cache as a nightly
  build finds them;
- **nightly**: a build of the export of the last ``export_days`` days of the archive plus
  one new day, with the archive; the site, the archive and the cache are restored
  (hard links) before each repeat;
- **full**: a build of the whole history in one export into a new folder, cold cache.

The target: nightly wall at most 40 % of the full build's, with no more peak memory.
"""

from __future__ import annotations

import argparse
import filecmp
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import generate_export  # noqa: E402

# The seeded exports, made once and kept; NRLLM_BENCH_DATA puts them elsewhere (the tests: a temporary folder).
DATA = Path(os.environ.get("NRLLM_BENCH_DATA") or ROOT / "bench" / "data")
DAY = 86_400
BENCH_RUNS = 50_000
RATE = BENCH_RUNS * DAY / generate_export.RUN_SPREAD  # runs a day in the 50,000-run benchmark's export
SEED = 193
TARGET = 0.40

Measure = Callable[[list[str]], dict[str, float]]


def history(days: int, rate: float) -> Path:
    """``days`` days of runs at ``rate`` a day, generated once and kept in bench/data/."""
    runs = round(rate * days)
    path = DATA / f"history-{days}d-{runs}-seed{SEED}.parquet"
    if path.exists():
        return path
    print(f"generating {path.name} ...", file=sys.stderr)
    saved = generate_export.START, generate_export.RUN_SPREAD
    generate_export.RUN_SPREAD = days * DAY - 4 * 3600  # the generator's own margin for a run's last steps
    try:
        generate_export.write_export(path, runs, SEED)
    finally:
        generate_export.START, generate_export.RUN_SPREAD = saved
    return path


def runs_started(table: pa.Table, first_day: int, stop_day: int) -> pa.Table:
    """The rows of the runs whose first step falls on days ``first_day`` to ``stop_day`` (exclusive)."""
    starts = table.group_by("run").aggregate([("crdate", "min")])
    day = pc.divide(pc.subtract(starts.column("crdate_min"), generate_export.START), DAY)
    chosen = starts.filter(pc.and_(pc.greater_equal(day, first_day), pc.less(day, stop_day))).column("run")
    return table.filter(pc.is_in(table.column("run"), value_set=chosen))


def split(whole: Path, days: int, export_days: int, folder: Path) -> tuple[Path, Path]:
    """The archive's source (days 0 to ``days``) and the export (the last ``export_days`` and a new day)."""
    table = pq.read_table(whole)
    archived, export = folder / "archived-days.parquet", folder / "export.parquet"
    pq.write_table(runs_started(table, 0, days), archived)
    pq.write_table(runs_started(table, days - export_days, days + 1), export)
    return archived, export


def command(inputs: list[Path], out: Path, jobs: int, cache: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "nrllm_report", "build", *map(str, inputs), "--out", str(out), "--jobs", str(jobs),
            "--timings", "--cache-dir", str(cache), *extra]


def hard_link_copy(source: Path, destination: Path) -> None:
    subprocess.run(["cp", "-al", str(source), str(destination)], check=True)


def restore(saved: Path, folder: Path) -> None:
    """The site, archive and cache as the setup left them (hard links: the same inodes and times)."""
    for name in ("site", "cache", "history.parquet"):
        target = folder / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        if (saved / name).is_dir():
            hard_link_copy(saved / name, target)
        else:
            os.link(saved / name, target)


def same_runs_and_summary(nightly: Path, full: Path) -> bool:
    """Every run page and summary.json byte for byte. (The problems pages name other input
    files, and only the nightly's index and servers pages say which runs the archive gave.)"""
    def compared(site: Path) -> list[str]:
        return sorted(str(path.relative_to(site)) for path in site.rglob("*")
                      if path.is_file() and ("/runs/" in str(path) or path.name == "summary.json"))

    files = compared(full)
    return files == compared(nightly) and all(filecmp.cmp(nightly / name, full / name, shallow=False)
                                              for name in files)


def in_child(work: Callable[..., Any], *args: Any) -> Any:
    """``work`` in a forked process, so that the memory it takes is not in every build this
    process starts later (a forked child's peak RSS counts its parent's pages)."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(work, args)


def bench_nightly(measure: Measure, settle: Callable[[], None], work: Path, jobs: int, repeat: int,
                  days: int = 90, export_days: int = 30, rate: float = RATE) -> dict[str, Any]:
    """The nightly build's medians against the full build's, and whether the sites agree."""
    whole = in_child(history, days + 1, rate)
    folder = work / "nightly"
    folder.mkdir()
    archived, export = in_child(split, whole, days, export_days, folder)
    site, cache, archive = folder / "site", folder / "cache", folder / "history.parquet"
    measure(command([archived], site, jobs, cache, "--archive", str(archive)))
    saved = folder / "saved"
    saved.mkdir()
    for name in ("site", "cache"):
        hard_link_copy(folder / name, saved / name)
    os.link(archive, saved / "history.parquet")
    nightlies, fulls = [], []
    agree = True
    for attempt in range(repeat):
        if attempt:
            restore(saved, folder)
        settle()
        nightlies.append(measure(command([export], site, jobs, cache, "--archive", str(archive))))
        full = folder / f"full-{attempt}"
        settle()
        fulls.append(measure(command([whole], full, jobs, folder / f"cache-full-{attempt}")))
        agree = agree and same_runs_and_summary(site, full)
        shutil.rmtree(full)
    nightly = {key: statistics.median(run[key] for run in nightlies) for key in nightlies[0]}
    full_build = {key: statistics.median(run[key] for run in fulls) for key in fulls[0]}
    return {
        "runs": in_child(run_count, whole), "archive runs": in_child(run_count, archived),
        "export runs": in_child(run_count, export),
        "nightly": nightly, "full": full_build, "ratio": nightly["wall"] / full_build["wall"],
        "same site": agree, "repeat": repeat, "jobs": jobs,
    }


def run_count(path: Path) -> int:
    return int(pc.count_distinct(pq.read_table(path, columns=["run"]).column("run")).as_py())


NIGHTLY_ROWS = [
    ("wall", "wall (s)"), ("cpu", "CPU (s, all processes)"), ("rss_mb", "peak RSS (MB, largest process)"),
    ("stage read", "· read (s)"), ("stage check", "· normalize + validate (s)"),
    ("stage aggregate", "· merge, sweep, figures (s)"), ("stage health", "· server health (s)"),
    ("stage run pages", "· run pages (s)"), ("stage overview pages", "· index, server and problem pages (s)"),
    ("stage archive", "· write the archive (s)"), ("stage swap", "· swap in (s)"),
]


def nightly_table(result: dict[str, Any]) -> str:
    lines = [f"| | nightly: export + archive | full build of the same {result['runs']:,} runs |", "|---|---:|---:|"]
    for key, label in NIGHTLY_ROWS:
        cells = []
        for side in ("nightly", "full"):
            value = result[side].get(key)
            cells.append("–" if value is None else (f"{value:,.0f}" if key == "rss_mb" else f"{value:.2f}"))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    mark = "met" if result["ratio"] <= TARGET else "**not met**"
    lines.append(f"| **nightly / full** | **{result['ratio']:.2f}** (target ≤ {TARGET:.2f}: {mark}) | |")
    lines.append(f"| run pages and summary.json = the full build's, byte for byte | "
                 f"{'yes' if result['same site'] else '**no**'} | |")
    lines.append("")
    lines.append(f"Archive: {result['archive runs']:,} runs; export: {result['export runs']:,} runs (its last 30 "
                 f"days and one new day). Medians of {result['repeat']} runs; both languages; `--jobs "
                 f"{result['jobs']}`; {os.cpu_count()} cores; Python {sys.version.split()[0]}.")
    return "\n".join(lines)


def main() -> int:
    import run  # the measurement itself is the benchmark's

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=RATE, help="runs a day (default: the 50,000-run export's)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--settle", type=float, default=run.SETTLE_SECONDS)
    parser.add_argument("--results", type=Path, default=run.RESULTS)
    options = parser.parse_args()
    run.SETTLE_SECONDS = options.settle
    DATA.mkdir(parents=True, exist_ok=True)
    options.results.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nrllm-nightly-") as folder:
        result = bench_nightly(run.measure, run.settle, Path(folder), options.jobs, options.repeat,
                               rate=options.rate)
    run.publish(nightly_table(result), result, options.results, "nightly")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
