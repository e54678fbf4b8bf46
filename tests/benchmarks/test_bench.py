"""The benchmarks run from a checkout with one command and print the tables the docs quote.

Each runs on a tiny input, with its seeded exports made in a temporary folder
(``NRLLM_BENCH_DATA``), so that the tests leave ``bench/data/`` as it was."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
Bench = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def bench_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-data")


@pytest.fixture
def bench(bench_data: Path) -> Iterator[Bench]:
    """Runs ``bench/SCRIPT ARGS`` from the checkout, its exports in ``bench_data``; after the test,
    ``bench/data/`` holds what it held before."""
    before = sorted(path.name for path in (REPO / "bench" / "data").glob("*"))

    def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, f"bench/{script}", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "NRLLM_BENCH_DATA": str(bench_data)})

    yield run
    assert sorted(path.name for path in (REPO / "bench" / "data").glob("*")) == before


def bench_run(bench: Bench, results: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], str, dict]:
    """bench/run.py on a 30-run export with ``options``: the process, its table and its figures."""
    completed = bench("run.py", "--runs", "30", "--settle", "0", "--results", str(results), *options)
    assert completed.returncode == 0, completed.stderr
    return (completed, (results / "latest.md").read_text(encoding="utf-8"),
            json.loads((results / "latest.json").read_text(encoding="utf-8")))


@pytest.mark.slow
def test_the_benchmark_runs_end_to_end_on_a_small_export(bench: Bench, tmp_path: Path) -> None:
    completed, table, results = bench_run(bench, tmp_path, "--repeat", "1", "--memory-runs", "120",
                                          "--command-runs", "30,120", "--nightly-rate", "2")
    assert completed.stdout.strip() == table.strip()
    for row in ("| build wall (s) |", "| **build / floor** |", "| **incremental / full** |",
                "| peak RSS (MB, largest process) |"):
        assert row in table
    assert "| incremental site = full site, byte for byte | yes |" in table
    assert "120 runs: one full build only" in table
    for row in ("| validate: peak RSS (MB) |", "| normalize: wall (s) |", "| timeline: peak RSS (MB) |",
                "| timeline: beyond the interpreter's start (s) |"):
        assert row in table
    assert "| command | 30 runs | 120 runs | 120 / 30 |" in table
    assert "| **nightly / full** |" in table
    assert "| run pages and summary.json = the full build's, byte for byte | yes |" in table
    assert results["30"]["ratio to floor"] > 0 and results["120"]["rss_mb"] > 0
    assert results["commands 120"]["validate rss_mb"] > 0
    low, high = results["30"]["spread"]["wall"]
    assert low == high == results["30"]["wall"]  # one run: no range to show
    assert "| build wall (s) | " + f"{results['30']['wall']:.2f} |" in table


@pytest.mark.slow
def test_the_benchmark_gives_each_median_with_its_lowest_and_highest_run(bench: Bench, tmp_path: Path) -> None:
    _completed, table, results = bench_run(bench, tmp_path, "--repeat", "3", "--memory-runs", "",
                                           "--command-runs", "", "--nightly-rate", "0")
    figures = results["30"]
    for key, label, form in (("wall", "build wall (s)", "{:.2f}"), ("floor", "floor total (s)", "{:.2f}"),
                             ("ratio to floor", "**build / floor**", "{:.2f}")):
        low, high = figures["spread"][key]
        assert low <= figures[key] <= high or key == "ratio to floor"  # a ratio of medians may lie outside
        shown = f"({form.format(low)}–{form.format(high)})" if low != high else ""
        row = next(line for line in table.splitlines() if line.startswith(f"| {label} |"))
        assert shown in row, row
    assert "Medians of 3 runs (lowest–highest" in table


@pytest.mark.slow
def test_the_csv_benchmark_builds_the_same_rows_from_csv_and_json_lines(bench: Bench, bench_data: Path) -> None:
    completed = bench("csv_vs_jsonl.py", "--runs", "30", "--repeat", "1", "--settle", "0")
    assert completed.returncode == 0, completed.stderr
    assert "| build wall (s) |" in completed.stdout and "CSV / JSON Lines" in completed.stdout
    csv, jsonl = (bench_data / f"runs-30-seed191.{suffix}" for suffix in ("csv", "jsonl"))
    assert len(csv.read_text(encoding="utf-8").splitlines()) == len(jsonl.read_text(encoding="utf-8").splitlines()) + 1


@pytest.mark.slow
def test_the_change_point_benchmark_prints_its_tables_with_the_reach_of_each_step(bench: Bench) -> None:
    completed = bench("changepoints.py", "--series", "20")
    assert completed.returncode == 0, completed.stderr
    assert "| 30–90 days, 5–200 calls/day, rate 0–30 % (the target) | 20 |" in completed.stdout
    assert "| reach | target |" in completed.stdout
    assert "| what the threshold trades (the default is 0.80) |" in completed.stdout


@pytest.mark.slow
def test_the_latency_benchmark_prints_its_tables_with_the_reach_and_the_exact_coverage(bench: Bench) -> None:
    completed = bench("latency.py", "--series", "8")
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "| the issue's slowdown, p90 2.0 s → 8.0 s, over 4.84 s: 2.0 % → 20.0 % | 8 |" in out
    assert "| reach | target |" in out and "| steady series | series | median calls |" in out
    # The target is judged on the exact coverage at 200 calls: the same for every continuous distribution.
    assert "| exact, any continuous distribution | – | 96.0 % | 96.7 % | 97.6 % | target: pass |" in out
    assert "| 35 | 95.9 % | no interval | no interval |" in out
    assert "| build-sized load | calls | seconds |" in out


@pytest.mark.slow
def test_the_same_site_check_builds_two_revisions_and_compares_them(bench: Bench) -> None:
    completed = bench("same_site.py", "HEAD", "HEAD", "--runs", "30", "--jobs", "1")
    assert completed.returncode == 0, completed.stderr
    assert "| the bundled sample | 1 | 0 |" in completed.stdout
    assert "| 30 generated runs | 1 | 0 |" in completed.stdout
    assert "| the bundled sample, whole run | 1 | 0 |" in completed.stdout
    assert "| 30 generated runs, whole run | 1 | 0 |" in completed.stdout


def test_the_waterfall_benchmark_builds_with_and_without_the_waterfall(bench: Bench) -> None:
    completed = bench("waterfall.py", "sample_data/runs.parquet")
    assert completed.returncode == 0, completed.stderr
    without, with_it = (int(figure.replace(",", "")) for figure in
                        re.findall(r"([\d,]+) bytes without the waterfall, ([\d,]+) with it", completed.stdout)[0])
    assert with_it > without
    spent = dict(re.findall(r"(\w+) (\d+\.\d+)", completed.stdout.splitlines()[-1]))
    assert set(spent) == {"columns", "run_page", "waterfall"} and float(spent["run_page"]) > 0


@pytest.mark.slow
def test_the_engine_benchmark_alternates_the_build_with_its_floor_and_gives_the_spread(bench: Bench,
                                                                                      tmp_path: Path) -> None:
    completed = bench("engine.py", "--runs", "30", "--rounds", "2", "--where", str(tmp_path))
    assert completed.returncode == 0, completed.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in completed.stdout.splitlines()
            if line.startswith("| ") and line.count("|") == 3}
    for key in ("build", "floor", "ratio", "check + sweep", "sweep", "sweep: figures (worker seconds)"):
        median, _, bounds = rows[key].partition(" (")
        lowest, highest = (float(value) for value in bounds.rstrip(")").split("–"))
        assert lowest <= float(median) <= highest
    assert list(tmp_path.iterdir()) == []  # every site, floor and cache removed
