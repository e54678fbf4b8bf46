"""Benchmark the whole pipeline against the floor, at several sizes, and print a table.

    python bench/run.py                     # 5,000 and 50,000 runs, 3 repeats; 200,000 for memory
    python bench/run.py --runs 5000 --repeat 1 --memory-runs ""

Per size it generates a seeded export (kept in bench/data/), then measures, each in
its own process and as the median of the repeats:

- the floor: pyarrow reads the Parquet, sorts it by (run, sequence), slices it into
  runs and turns them into Python lists; plus writing as many files with the same
  total bytes as the site has, in one process;
- the full bilingual build (``nrllm-report build --timings``), with its stages;
- an incremental rebuild after 1 % more runs, and a full build of the same input,
  whose sites must be byte for byte the same;
- for the ``--memory-runs`` sizes (4x the largest by default), one full build only:
  how far the peak RSS grows with the export.

Wall and CPU come from the process's rusage (children included), peak RSS is the
largest process's. Results go to stdout and to bench/results/latest.md.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from generate_export import write_export  # noqa: E402

DATA = ROOT / "bench" / "data"
RESULTS = ROOT / "bench" / "results"
SEED = 191
EXTRA_SEED = 192
SETTLE_SECONDS = 3

FLOOR_READ = r"""
import sys
import pyarrow.compute as pc
import pyarrow.parquet as pq
table = pq.read_table(sys.argv[1]).sort_by([("run", "ascending"), ("sequence", "ascending")])
run = table.column("run")
changes = pc.not_equal(run.slice(1), run.slice(0, len(run) - 1))
starts = [0] + [p + 1 for p in pc.indices_nonzero(changes).to_pylist()] + [len(run)]
runs = 0
for first, stop in zip(starts, starts[1:]):
    piece = table.slice(first, stop - first)
    lists = {name: piece.column(name).to_pylist() for name in piece.column_names}
    runs += 1
print(runs)
"""

FLOOR_WRITE = r"""
import json, os, sys
sizes = json.load(open(sys.argv[1]))
root = sys.argv[2]
made = set()
for relative, size in sizes:
    path = os.path.join(root, relative)
    folder = os.path.dirname(path)
    if folder not in made:
        os.makedirs(folder, exist_ok=True)
        made.add(folder)
    with open(path, "wb") as stream:
        stream.write(b"x" * size)
"""


def remove(folder: Path) -> None:
    """Delete a measured site and let the file system settle before the next measurement."""
    shutil.rmtree(folder)
    os.sync()
    time.sleep(SETTLE_SECONDS)


def wait_for_background_removal(work: Path) -> None:
    """A rebuild leaves its retired site to a detached remover: let it finish (and the
    file system settle), so that it does not slow the next measurement down."""
    while any(".nrllm-retired-" in entry.name for entry in work.iterdir()):
        time.sleep(0.1)
    os.sync()
    time.sleep(SETTLE_SECONDS)


def measure(command: list[str]) -> dict[str, float]:
    """Run ``command``; its wall time, CPU seconds (with its children) and peak RSS.

    Dirty pages of the previous measurement are flushed first, so that its writeback
    does not slow this one down (writing a site leaves a gigabyte of them).
    """
    os.sync()
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    stderr = process.stderr.read() if process.stderr else b""
    _pid, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{stderr.decode(errors='replace')}")
    result = {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}
    for line in stderr.decode(errors="replace").splitlines():
        if line.startswith("{"):
            result.update({f"stage {key}": value for key, value in json.loads(line).items()})
    return result


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def export(runs: int, seed: int) -> Path:
    path = DATA / f"runs-{runs}-seed{seed}.parquet"
    if not path.exists():
        print(f"generating {path.name} ...", file=sys.stderr)
        write_export(path, runs, seed)
    return path


def site_file_sizes(site: Path) -> list[tuple[str, int]]:
    return sorted(
        (str(path.relative_to(site)), path.stat().st_size) for path in site.rglob("*") if path.is_file()
    )


def same_site(left: Path, right: Path) -> bool:
    files = [relative for relative, _size in site_file_sizes(left)]
    if files != [relative for relative, _size in site_file_sizes(right)]:
        return False
    return all(filecmp.cmp(left / relative, right / relative, shallow=False) for relative in files)


def build_command(inputs: list[Path], out: Path, jobs: int) -> list[str]:
    return [sys.executable, "-m", "nrllm_report", "build", *map(str, inputs), "--out", str(out),
            "--jobs", str(jobs), "--timings", "--force"]


def bench_memory(runs: int, jobs: int, work: Path) -> dict[str, float]:
    """One full build of a larger export: its wall time, stages and peak RSS."""
    site = work / f"site-{runs}-memory"
    result = measure(build_command([export(runs, SEED)], site, jobs))
    remove(site)
    shutil.rmtree(work / f".{site.name}.nrllm-cache", ignore_errors=True)
    return result


def bench_size(runs: int, repeat: int, jobs: int, work: Path) -> dict[str, float]:
    base = export(runs, SEED)
    extra = export(max(1, runs // 100), EXTRA_SEED)
    builds, floors_read, floors_write, incrementals, fulls_grown = [], [], [], [], []
    identical = True
    for attempt in range(repeat):
        site = work / f"site-{runs}-{attempt}"
        builds.append(measure(build_command([base], site, jobs)))
        floors_read.append(measure([sys.executable, "-c", FLOOR_READ, str(base)]))
        sizes_file = work / "sizes.json"
        sizes_file.write_text(json.dumps(site_file_sizes(site)))
        floor_site = work / f"floor-{runs}-{attempt}"
        floors_write.append(measure([sys.executable, "-c", FLOOR_WRITE, str(sizes_file), str(floor_site)]))
        remove(floor_site)
        incrementals.append(measure(build_command([base, extra], site, jobs)))
        wait_for_background_removal(work)
        fresh = work / f"fresh-{runs}-{attempt}"
        fulls_grown.append(measure(build_command([base, extra], fresh, jobs)))
        identical = identical and same_site(site, fresh)
        remove(site)
        remove(fresh)
    build, floor_read, floor_write = median_of(builds), median_of(floors_read), median_of(floors_write)
    incremental, full_grown = median_of(incrementals), median_of(fulls_grown)
    floor = floor_read["wall"] + floor_write["wall"]
    return {
        **build,
        "floor read+sort+slice": floor_read["wall"],
        "floor write files": floor_write["wall"],
        "floor": floor,
        "ratio to floor": build["wall"] / floor,
        "health share": build.get("stage health", 0.0) / build["wall"],
        "incremental wall": incremental["wall"],
        "full build of the grown input": full_grown["wall"],
        "incremental / full": incremental["wall"] / full_grown["wall"],
        "incremental = full (bytes)": float(identical),
    }


ROWS = [
    ("wall", "build wall (s)"),
    ("cpu", "build CPU (s, all processes)"),
    ("rss_mb", "peak RSS (MB, largest process)"),
    ("stage read", "· read (s)"),
    ("stage check", "· normalize + validate (s)"),
    ("stage aggregate", "· aggregate (s)"),
    ("stage health", "· server health: verdicts, change points (s)"),
    ("health share", "  · share of the build (target at most 5 %)"),
    ("stage run pages", "· run pages: render + write, wall (s)"),
    ("stage render (worker seconds)", "  · render, summed over the workers (s)"),
    ("stage write (worker seconds)", "  · write, summed over the workers (s)"),
    ("stage write", "  · write, in the main process (one language only) (s)"),
    ("stage overview pages", "· index, server and problem pages (s)"),
    ("stage swap", "· swap in, remove the old site (s)"),
    ("floor read+sort+slice", "floor: pyarrow read + sort + slice (s)"),
    ("floor write files", "floor: write the same files and bytes (s)"),
    ("floor", "floor total (s)"),
    ("ratio to floor", "**build / floor**"),
    ("incremental wall", "incremental rebuild, +1 % runs (s)"),
    ("full build of the grown input", "full build of the same input (s)"),
    ("incremental / full", "**incremental / full**"),
    ("incremental = full (bytes)", "incremental site = full site, byte for byte"),
]


def table(results: dict[int, dict[str, float]], repeat: int, jobs: int, memory_sizes: list[int]) -> str:
    sizes = sorted(results)
    header = "| | " + " | ".join(f"{size:,} runs" for size in sizes) + " |"
    lines = [header, "|---|" + "---:|" * len(sizes)]
    for key, label in ROWS:
        cells = []
        for size in sizes:
            value = results[size].get(key)
            if value is None:
                cells.append("–")
            elif key == "incremental = full (bytes)":
                cells.append("yes" if value else "**no**")
            elif key in ("ratio to floor", "incremental / full"):
                cells.append(f"**{value:.2f}**")
            elif key == "health share":
                cells.append(f"{value:.2%}")
            elif key == "rss_mb":
                cells.append(f"{value:,.0f}")
            else:
                cells.append(f"{value:.2f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Medians of {repeat} runs; both languages; `--jobs {jobs}`; "
                 f"{os.cpu_count()} cores; Python {sys.version.split()[0]}.")
    full_sizes = [size for size in sizes if size not in memory_sizes]
    if memory_sizes and full_sizes:
        largest = max(full_sizes)
        for size in memory_sizes:
            growth = results[size]["rss_mb"] / results[largest]["rss_mb"] - 1
            lines.append(f"{size:,} runs: one full build only (wall, CPU, stages, peak RSS); its peak RSS is "
                         f"**{growth:+.0%}** over {largest:,} runs'.")
    return "\n".join(lines)


def main() -> int:
    global SETTLE_SECONDS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="5000,50000", help="sizes in runs, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--memory-runs", default="200000",
                        help="sizes for one full build each, for peak RSS only; comma-separated, or empty")
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS,
                        help="seconds to let the file system settle between measurements")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder for latest.md and latest.json")
    options = parser.parse_args()
    SETTLE_SECONDS = options.settle
    DATA.mkdir(parents=True, exist_ok=True)
    options.results.mkdir(parents=True, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="nrllm-bench-") as folder:
        for runs in (int(size) for size in options.runs.split(",")):
            results[runs] = bench_size(runs, options.repeat, options.jobs, Path(folder))
            print(f"{runs} runs done: {results[runs]['wall']:.1f} s", file=sys.stderr)
        memory_sizes = [int(size) for size in options.memory_runs.split(",") if size.strip()]
        for runs in memory_sizes:
            results[runs] = bench_memory(runs, options.jobs, Path(folder))
            print(f"{runs} runs (memory) done: {results[runs]['wall']:.1f} s", file=sys.stderr)
    text = table(results, options.repeat, options.jobs, memory_sizes)
    print(text)
    (options.results / "latest.md").write_text(text + "\n", encoding="utf-8")
    (options.results / "latest.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
