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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import nightly  # noqa: E402  (bench/ is on the path as this script's folder)
from generate_export import write_export  # noqa: E402

DATA = nightly.DATA
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
first, step = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (0, 1)  # one of several writers
made = set()
for relative, size in sizes[first::step]:
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
    settle()


def settle() -> None:
    """Flush dirty pages and let the file system settle before the next measurement."""
    os.sync()
    time.sleep(SETTLE_SECONDS)


def wait_for_background_removal(work: Path) -> None:
    """A rebuild leaves its retired site to a detached remover: let it finish (and the
    file system settle), so that it does not slow the next measurement down."""
    while any(".nrllm-retired-" in entry.name for site in work.iterdir() if site.is_dir()
              for entry in site.iterdir()):  # the previous site, removed from inside the new one
        time.sleep(0.1)
    settle()


def measure(command: list[str], exit_codes: tuple[int, ...] = (0,)) -> dict[str, float]:
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
    if os.waitstatus_to_exitcode(status) not in exit_codes:
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
    """A build with its input cache beside the measured sites (one entry per site), removed with them."""
    return [sys.executable, "-m", "nrllm_report", "build", *map(str, inputs), "--out", str(out),
            "--jobs", str(jobs), "--timings", "--force", "--cache-dir", str(out.parent / "cache")]


def bench_memory(runs: int, jobs: int, work: Path) -> dict[str, float]:
    """One full build of a larger export: its wall time, stages and peak RSS."""
    site = work / f"site-{runs}-memory"
    result = measure(build_command([export(runs, SEED)], site, jobs))
    remove(site)
    shutil.rmtree(work / "cache", ignore_errors=True)
    return result


def bench_size(runs: int, repeat: int, jobs: int, work: Path) -> dict[str, Any]:
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
    floors = [read["wall"] + write["wall"] for read, write in zip(floors_read, floors_write, strict=True)]
    rounds = {
        **{key: [run[key] for run in builds] for key in build},
        "floor read+sort+slice": [run["wall"] for run in floors_read],
        "floor write files": [run["wall"] for run in floors_write],
        "floor": floors,
        "ratio to floor": [run["wall"] / each for run, each in zip(builds, floors, strict=True)],
        "incremental wall": [run["wall"] for run in incrementals],
        "full build of the grown input": [run["wall"] for run in fulls_grown],
        "incremental / full": [run["wall"] / full["wall"] for run, full in zip(incrementals, fulls_grown, strict=True)],
    }
    return {
        "spread": {key: [min(values), max(values)] for key, values in rounds.items()},
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
    ("stage sweep", "· sweep: duplicates and warnings, figures, kept steps (s)"),
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


def _spread(low: float | None, high: float | None, form: str) -> str:
    """`` (lowest–highest)`` where the runs differed, else nothing (one run, or a figure without rounds)."""
    if low is None or high is None or low == high:
        return ""
    return f" ({form.format(low)}–{form.format(high)})"


def table(results: dict[int, dict[str, Any]], repeat: int, jobs: int, memory_sizes: list[int]) -> str:
    sizes = sorted(results)
    header = "| | " + " | ".join(f"{size:,} runs" for size in sizes) + " |"
    lines = [header, "|---|" + "---:|" * len(sizes)]
    for key, label in ROWS:
        cells = []
        for size in sizes:
            value = results[size].get(key)
            low, high = results[size].get("spread", {}).get(key, (value, value))
            if value is None:
                cells.append("–")
            elif key == "incremental = full (bytes)":
                cells.append("yes" if value else "**no**")
            elif key in ("ratio to floor", "incremental / full"):
                cells.append(f"**{value:.2f}**" + _spread(low, high, "{:.2f}"))
            elif key == "health share":
                cells.append(f"{value:.2%}")
            elif key == "rss_mb":
                cells.append(f"{value:,.0f}" + _spread(low, high, "{:,.0f}"))
            else:
                cells.append(f"{value:.2f}" + _spread(low, high, "{:.2f}"))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Medians of {repeat} runs (lowest–highest; a ratio's are those of each run's own); both languages; "
                 f"`--jobs {jobs}`; {os.cpu_count()} cores; Python {sys.version.split()[0]}.")
    full_sizes = [size for size in sizes if size not in memory_sizes]
    if memory_sizes and full_sizes:
        largest = max(full_sizes)
        for size in memory_sizes:
            growth = results[size]["rss_mb"] / results[largest]["rss_mb"] - 1
            lines.append(f"{size:,} runs: one full build only (wall, CPU, stages, peak RSS); its peak RSS is "
                         f"**{growth:+.0%}** over {largest:,} runs'.")
    return "\n".join(lines)


# ---------------------------------------------------------------- the other commands


def available_commands() -> set[str]:
    """The commands this version has (``gate`` and ``diff`` may not be there yet)."""
    listing = subprocess.run([sys.executable, "-m", "nrllm_report", "--help"], capture_output=True, text=True,
                             cwd=ROOT, check=True).stdout
    return {line.split()[0] for line in listing.split("Commands:", 1)[-1].splitlines() if line.strip()}


def middle_run(path: Path) -> str:
    """The run of the export's middle row: neither the first nor the last row group."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    group = parquet.num_row_groups // 2
    return str(parquet.read_row_group(group, columns=["run"]).column(0)[0].as_py())


def command_lines(export_path: Path, work: Path) -> dict[str, list[str]]:
    """Each command as a user runs it on the export (exit 1, rows rejected, counts as done)."""
    tool = [sys.executable, "-m", "nrllm_report"]
    lines = {
        "validate": [*tool, "validate", str(export_path), "--format", "json"],
        "normalize": [*tool, "normalize", str(export_path), "--out", str(work / "normalized.parquet")],
        "timeline": [*tool, "timeline", middle_run(export_path), str(export_path), "--out", str(work / "run.html")],
        "gate": [*tool, "gate", str(export_path)],
        "diff": [*tool, "diff", "--baseline", str(export_path), "--current", str(export_path)],
    }
    present = available_commands()
    return {name: line for name, line in lines.items() if name in present}


def bench_commands(runs: int, repeat: int, work: Path) -> dict[str, float]:
    """Wall time and peak RSS of every command but ``build`` on the export, medians of ``repeat``;
    and the interpreter's start alone, which ``timeline``'s own work is counted beyond."""
    results: dict[str, float] = {}
    started = [measure([sys.executable, "-c", "pass"]) for _ in range(repeat)]
    results["interpreter start"] = median_of(started)["wall"]
    timeline_cpu = 0.0
    for name, line in command_lines(export(runs, SEED), work).items():
        measured = median_of([measure(line, exit_codes=(0, 1)) for _ in range(repeat)])
        results[f"{name} wall"] = measured["wall"]
        results[f"{name} rss_mb"] = measured["rss_mb"]
        timeline_cpu = measured["cpu"] if name == "timeline" else timeline_cpu
    if "timeline wall" in results:
        results["timeline own work"] = results["timeline wall"] - results["interpreter start"]
        results["timeline cpu"] = timeline_cpu
    return results


COMMAND_ROWS = [
    (f"{name} {measure_key}", f"{name}: {label}")
    for name in ("validate", "normalize", "timeline", "gate", "diff")
    for measure_key, label in (("wall", "wall (s)"), ("rss_mb", "peak RSS (MB)"))
] + [("timeline own work", "timeline: beyond the interpreter's start (s)"),
      ("timeline cpu", "timeline: CPU, user + system (s)")]


def command_table(results: dict[int, dict[str, float]], repeat: int) -> str:
    """One row per command and measure, a column per size, and how much the larger grew."""
    sizes = sorted(results)
    growth = len(sizes) > 1
    header = "| command | " + " | ".join(f"{size:,} runs" for size in sizes) + (
        f" | {sizes[-1]:,} / {sizes[0]:,} |" if growth else " |")
    lines = [header, "|---|" + "---:|" * (len(sizes) + growth)]
    for key, label in COMMAND_ROWS:
        values = [results[size].get(key) for size in sizes]
        if all(value is None for value in values):
            continue
        shown = "{:,.0f}" if key.endswith("rss_mb") else "{:.2f}"
        cells = ["–" if value is None else shown.format(value) for value in values]
        if growth:
            first, last = values[0], values[-1]
            cells.append(f"**×{last / first:.2f}**" if key.endswith("rss_mb") and first and last else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Medians of {repeat} runs each; the export in Parquet; `timeline` of the run in the "
                 "middle row group.")
    return "\n".join(lines)


def main() -> int:
    global SETTLE_SECONDS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="5000,50000", help="sizes in runs, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--memory-runs", default="200000",
                        help="sizes for one full build each, for peak RSS only; comma-separated, or empty")
    parser.add_argument("--command-runs", default="50000,200000",
                        help="sizes for validate, normalize, timeline (gate, diff): time and peak RSS; or empty")
    parser.add_argument("--settle", type=float, default=SETTLE_SECONDS,
                        help="seconds to let the file system settle between measurements")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder for latest.md and latest.json")
    parser.add_argument("--nightly-rate", type=float, default=nightly.RATE,
                        help="runs a day of the nightly scenario (bench/nightly.py); 0 leaves it out")
    options = parser.parse_args()
    SETTLE_SECONDS = options.settle
    DATA.mkdir(parents=True, exist_ok=True)
    options.results.mkdir(parents=True, exist_ok=True)
    results: dict[int | str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="nrllm-bench-") as folder:
        for runs in (int(size) for size in options.runs.split(",") if size.strip()):
            results[runs] = bench_size(runs, options.repeat, options.jobs, Path(folder))
            print(f"{runs} runs done: {results[runs]['wall']:.1f} s", file=sys.stderr)
        memory_sizes = [int(size) for size in options.memory_runs.split(",") if size.strip()]
        for runs in memory_sizes:
            results[runs] = bench_memory(runs, options.jobs, Path(folder))
            print(f"{runs} runs (memory) done: {results[runs]['wall']:.1f} s", file=sys.stderr)
        commands: dict[int, dict[str, float]] = {}
        for runs in (int(size) for size in options.command_runs.split(",") if size.strip()):
            commands[runs] = bench_commands(runs, options.repeat, Path(folder))
            print(f"{runs} runs (commands) done", file=sys.stderr)
        night = None
        if options.nightly_rate > 0:
            night = nightly.bench_nightly(measure, settle, Path(folder), options.jobs, options.repeat,
                                          rate=options.nightly_rate)
    text = table(results, options.repeat, options.jobs, memory_sizes) if results else ""  # type: ignore[arg-type]
    if night is not None:
        text += "\n\nThe nightly build with an archive (bench/nightly.py):\n\n" + nightly.nightly_table(night)
        results["nightly"] = night  # type: ignore[assignment]
    if commands:
        text += "\n\n" + command_table(commands, options.repeat)
        results.update({f"commands {runs}": measured for runs, measured in commands.items()})
    publish(text, results, options.results, "latest")
    return 0


def publish(text: str, results: Any, folder: Path, stem: str) -> None:
    """Print the table and keep it, with the figures behind it, as ``stem``.md and ``stem``.json."""
    print(text)
    (folder / f"{stem}.md").write_text(text + "\n", encoding="utf-8")
    (folder / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
