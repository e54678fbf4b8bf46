"""Build the same rows from a CSV export and from JSON Lines, and compare the times (issue 10).

    python bench/csv_vs_jsonl.py --runs 50000 --repeat 3

Both files hold the rows of the benchmark's Parquet export (``bench/run.py``'s, kept in
bench/data/). The CSV is written as phpMyAdmin and ``mysql`` clients write the table: a
header row, every value text (``duration_ms`` with its two decimals), the payload as JSON
text, RFC 4180 quoting; the JSON Lines as the generator writes them. Each build runs in its
own process (``bench/run.py``'s ``measure``), the two interleaved; the medians and their
ratio are printed, with the target (at most 1.5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402
from run import DATA, SEED, build_command, export, measure, remove  # noqa: E402

TARGET = 1.5


def as_database_text(parquet: Path, out: Path) -> Path:
    """The export as a CSV of text columns, the way the database tools write the table."""
    table = pq.read_table(parquet)
    columns = []
    for name in table.column_names:
        column = table.column(name)
        if name == "duration_ms":
            column = pc.cast(pc.cast(column, pa.decimal128(10, 2)), pa.string())
        columns.append(pc.cast(column, pa.string()))
    pacsv.write_csv(pa.table(columns, names=table.column_names), out)
    return out


def as_json_lines(parquet: Path, out: Path) -> Path:
    """The same export as JSON Lines, one object a row as the generator writes them."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    with out.open("w", encoding="utf-8", newline="\n") as stream:
        for batch in pq.ParquetFile(parquet).iter_batches(batch_size=65_536):
            stream.write("".join(encode(row) + "\n" for row in batch.to_pylist()))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--settle", type=float, default=run.SETTLE_SECONDS,
                        help="seconds to let the file system settle between measurements")
    options = parser.parse_args()
    run.SETTLE_SECONDS = options.settle
    DATA.mkdir(parents=True, exist_ok=True)
    jsonl = DATA / f"runs-{options.runs}-seed{SEED}.jsonl"
    csv = DATA / f"runs-{options.runs}-seed{SEED}.csv"
    parquet = export(options.runs, SEED)
    if not jsonl.exists():
        as_json_lines(parquet, jsonl)
    if not csv.exists():
        as_database_text(parquet, csv)
    walls: dict[str, list[float]] = {"jsonl": [], "csv": []}
    with tempfile.TemporaryDirectory(prefix="nrllm-csv-") as folder:
        for attempt in range(options.repeat):
            for name, source in (("jsonl", jsonl), ("csv", csv)):  # interleaved: the machine's load hits both
                site = Path(folder) / f"{name}-{attempt}"
                # A fresh site name each time: no input cache beside it, every build a full one.
                walls[name].append(measure(build_command([source], site, options.jobs))["wall"])
                remove(site)
    medians = {name: statistics.median(times) for name, times in walls.items()}
    ratio = medians["csv"] / medians["jsonl"]
    print(f"| {options.runs:,} runs, medians of {options.repeat} | JSON Lines | CSV | CSV / JSON Lines |")
    print("|---|---:|---:|---:|")
    verdict = "met" if ratio <= TARGET else "not met"
    print(
        f"| build wall (s) | {medians['jsonl']:.2f} | {medians['csv']:.2f} | "
        f"**{ratio:.2f}** (target ≤ {TARGET}: {verdict}) |"
    )
    print(f"all runs: {walls}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
