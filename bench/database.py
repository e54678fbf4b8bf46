"""Reading nr-llm's tables straight from MariaDB and PostgreSQL (issue 21), against Parquet.

    python bench/database.py                 # the 50,000-run benchmark, medians of 5; about 15 minutes
    python bench/database.py --repeat 3 --only postgresql

Setup (not measured): the six tables of the 50,000-run benchmark (``bench/data/whole-run-50000-seed191``,
made by ``bench/whole_run.py``'s generator when missing), the events' ``run`` as the run row's uid (as
nr-llm stores it), written as CSV by pyarrow and loaded with ``LOAD DATA LOCAL INFILE`` / ``\\copy``
into a MariaDB and a PostgreSQL server of their own (``tests/db_servers.py``: a temporary folder, a
free port, a SELECT-only user): every row but the last day's first, then a ``build --db URL
--archive`` of those (the archive of the first days, with its marks), then the last day. The same
rows, every column, are written as a Parquet export of each table.

Measured, each in a process of its own, the three taking turns:

- **full**: every table read as a build reads it (``DatabaseSession.chunks``: the ``SELECT``\\s,
  their rows as Arrow tables);
- **Parquet**: the export read by the readers of its files (``Input.chunks`` of each table).
  Target: the database within 1.5x of Parquet (wall of the read);
- **nightly**: the same read resumed from the archive's marks, as the nightly build reads it: the
  rows fetched, and the seconds spent asking the database and making Arrow tables of its rows (a
  build's ``--timings`` "database"). Target: at most 10 % of the full read's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import db_servers  # noqa: E402
import whole_run  # noqa: E402  (the benchmark's export, generated once)
from db_servers import EVENTS_TABLE, OTHER_TABLES, MariaDB, Server  # noqa: E402

RUNS, SEED = 50_000, 191
DAY = 86_400
PASSWORD = "bench reader"
NULL = "\x01NULL"  # what a NULL is written as in MariaDB's CSV (its LOAD DATA has no other way to tell)
READ_TARGET, NIGHTLY_TARGET = 1.5, 0.10
EVENT_TYPES = {column: mysql for column, mysql in (
    ("uid", db_servers.INT), ("pid", db_servers.INT), ("tstamp", db_servers.INT), ("crdate", db_servers.INT),
    ("run", db_servers.INT), ("sequence", db_servers.INT), ("kind", "varchar(32)"), ("round", db_servers.INT),
    ("duration_ms", "decimal(10,2)"), ("payload", "mediumtext"))}


def database_rows(data: Path) -> dict[str, pa.Table]:
    """Each table's rows as the database holds them: its columns, in its order; the events' run the run's uid."""
    tables = {table: pq.read_table(data / f"{table}.parquet") for table in (EVENTS_TABLE, *OTHER_TABLES)}
    runs = tables["tx_nrllm_agentrun"]
    events = tables[EVENTS_TABLE]
    uid_of = dict(zip(runs.column("uuid").to_pylist(), runs.column("uid").to_pylist()))
    unknown = {run: len(uid_of) + 1_000_000 + number for number, run in
               enumerate(sorted(set(events.column("run").to_pylist()) - set(uid_of)))}
    numbers = pa.array([uid_of.get(run) or unknown[run] for run in events.column("run").to_pylist()], pa.int64())
    events = events.set_column(events.column_names.index("run"), "run", numbers)
    events = events.append_column("pid", pa.array([0] * events.num_rows, pa.int64()))
    tables[EVENTS_TABLE] = events.append_column("tstamp", events.column("crdate"))
    ordered = {}
    for table, rows in tables.items():
        columns = list(EVENT_TYPES) if table == EVENTS_TABLE else [column for column, _t, _n in OTHER_TABLES[table]]
        ordered[table] = rows.select(columns).sort_by("uid")
    return ordered


def split_by_day(tables: dict[str, pa.Table]) -> tuple[dict[str, pa.Table], dict[str, pa.Table]]:
    """Every row but those of the last day, and the last day's (the catalogue is all in the first)."""
    cut = pc.max(tables[EVENTS_TABLE].column("crdate")).as_py() - DAY
    before, after = {}, {}
    for table, rows in tables.items():
        old = pc.less(rows.column("crdate"), cut) if "crdate" in rows.column_names and table in (
            EVENTS_TABLE, "tx_nrllm_agentrun", "tx_nrllm_telemetry", "tx_nrllm_governance_event") else None
        before[table] = rows if old is None else rows.filter(old)
        after[table] = rows.slice(0, 0) if old is None else rows.filter(pc.invert(old))
    return before, after


def write_csv(rows: pa.Table, path: Path, null: str | None) -> Path:
    """The rows as CSV with a header (decimals as text; ``null`` written for NULL where given)."""
    columns = []
    for name in rows.column_names:
        column = rows.column(name)
        if null is not None and column.null_count:
            column = pc.fill_null(column.cast(pa.string()), null)
        columns.append(column)
    pacsv.write_csv(pa.table(columns, names=rows.column_names), path)
    return path


def create_tables(server: Server) -> None:
    db_servers.create_events_table(server)
    kind = "mysql" if isinstance(server, MariaDB) else "postgresql"
    server.sql(
        "\n".join(f"DROP TABLE IF EXISTS {table};\n{db_servers.table_ddl(table, kind)};" for table in OTHER_TABLES)
    )


def load(server: Server, tables: dict[str, pa.Table], folder: Path) -> None:
    """Rows appended to the server's tables, by its own bulk load from CSV."""
    mysql = isinstance(server, MariaDB)
    for table, rows in tables.items():
        if not rows.num_rows:
            continue
        path = write_csv(rows, folder / f"{table}.csv", NULL if mysql else None)
        if mysql:
            variables = [f"@{column}" for column in rows.column_names]
            sets = ", ".join(f"`{column}` = NULLIF(@{column}, '{NULL}')" for column in rows.column_names)
            statement = (f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE {table} CHARACTER SET utf8mb4 FIELDS TERMINATED "
                         f"BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' LINES TERMINATED BY '\\n' IGNORE 1 LINES "
                         f"({', '.join(variables)}) SET {sets};")
            db_servers.run_checked(server.client("--local-infile=1", "--batch"), statement.encode(), "LOAD DATA")
        else:
            quoted = ", ".join(f'"{column}"' for column in rows.column_names)
            server.sql(f"\\copy {table} ({quoted}) FROM '{path}' WITH (FORMAT csv, HEADER)")
        path.unlink()
    if not mysql:
        server.sql("\n".join(f"SELECT setval(pg_get_serial_sequence('{table}', 'uid'), (SELECT MAX(uid) FROM {table}));"
                             for table in tables) + "\nVACUUM ANALYZE;")
    else:
        server.sql("\n".join(f"ANALYZE TABLE {table};" for table in tables))


def parquet_export(tables: dict[str, pa.Table], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for table, rows in tables.items():
        paths.append(folder / f"{table}.parquet")
        pq.write_table(rows, paths[-1])
    return paths


def cli(*args: Any) -> list[str]:
    return [sys.executable, "-m", "nrllm_report", *map(str, args)]


def run(command: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, env=env, check=False, cwd=ROOT)
    seconds = time.perf_counter() - started
    if completed.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {completed.returncode}: {completed.stderr[-2000:]}")
    return seconds, completed


READ_DATABASE = """
import sys, time
from pathlib import Path
from nrllm_report.core.tables import EVENTS_TABLE
from nrllm_report.readers.archive import archived_database_marks
from nrllm_report.readers.database import DatabaseSession, parse_database_url
from nrllm_report.readers.resume import marks_of
started = time.perf_counter()
session = DatabaseSession(parse_database_url(sys.argv[1]))
if len(sys.argv) > 2:
    session.resume = marks_of(archived_database_marks(Path(sys.argv[2]))).get(session.url.identity)
    assert session.resume is not None, "the archive holds no marks of this URL"
rows = sum(chunk.table.num_rows if hasattr(chunk, "table") else len(chunk.rows)
           for key in [*session.tables(), EVENTS_TABLE] for chunk in session.chunks(key))
print(time.perf_counter() - started, session.seconds, sum(session.fetched.values()), rows)
"""

READ_PARQUET = """
import sys, time
from nrllm_report.readers.tables import split_inputs
from nrllm_report.readers import resolve_inputs
started = time.perf_counter()
events, tables = split_inputs(resolve_inputs(sys.argv[1:]))
chunks = [chunk for source in [*events, *tables] for chunk in source.chunks()]
rows = sum(chunk.table.num_rows if hasattr(chunk, "table") else len(chunk.rows) for chunk in chunks)
seconds = time.perf_counter() - started
print(seconds, seconds, rows, rows)
"""


def alternate(sides: dict[str, Callable[[], dict[str, float]]], repeat: int) -> dict[str, dict[str, list[float]]]:
    """Each side measured ``repeat`` times, the sides taking turns."""
    found: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
    for _ in range(repeat):
        for side, measure in sides.items():
            measured = measure()
            print(f"  {side}: {measured}", file=sys.stderr, flush=True)
            for key, value in measured.items():
                found[side].setdefault(key, []).append(value)
    return found


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def bench_server(name: str, server: Server, tables: dict[str, pa.Table], work: Path, repeat: int,
                 jobs: int) -> dict[str, Any]:
    before, after = split_by_day(tables)
    create_tables(server)
    print(f"{name}: loading {sum(t.num_rows for t in before.values()):,} rows ...", file=sys.stderr)
    load(server, before, work)
    url = db_servers.create_reader(server, PASSWORD)
    env = {**os.environ, "NRLLM_REPORT_DB": PASSWORD}
    site, archive = work / "site", work / "history.parquet"
    print(f"{name}: the archive of the first days ...", file=sys.stderr)
    _seconds, completed = run(
        cli("build", "--db", url, "--out", site, "--archive", archive, "--no-cache", "--jobs", jobs), env
    )
    if not archive.exists():
        raise SystemExit(f"the first build wrote no archive: {completed.stderr[-3000:]}")
    shutil.rmtree(site)
    load(server, after, work)
    export = parquet_export(tables, work / "export")

    def timed(script: str, *args: Any) -> Callable[[], dict[str, float]]:
        def measure() -> dict[str, float]:
            _wall, completed = run([sys.executable, "-c", script, *map(str, args)], env)
            wall, database, fetched, rows = map(float, completed.stdout.split())
            return {"read (s)": wall, "database (s)": database, "rows fetched": fetched, "rows": rows}
        return measure

    print(f"{name}: measuring ...", file=sys.stderr)
    reads = alternate({"database": timed(READ_DATABASE, url), "parquet": timed(READ_PARQUET, *export),
                       "nightly": timed(READ_DATABASE, url, archive)}, repeat)
    return {"reads": reads, "rows": sum(t.num_rows for t in tables.values()),
            "new rows": sum(t.num_rows for t in after.values())}


def table(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    lines = ["| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(results[name]) for name in names) + " |")

    median = statistics.median

    def ratio(side: str, key: str, other: str, other_key: str) -> Callable[[dict[str, Any]], str]:
        return lambda r: f"**{median(r['reads'][side][key]) / median(r['reads'][other][other_key]):.3f}**"

    row("rows (all tables)", lambda r: f"{r['rows']:,}")
    row("read from the database, wall (s)", lambda r: spread(r["reads"]["database"]["read (s)"]))
    row(
        "· of which asking the database and making Arrow tables (s)",
        lambda r: spread(r["reads"]["database"]["database (s)"]),
    )
    row("read from the Parquet export, wall (s)", lambda r: spread(r["reads"]["parquet"]["read (s)"]))
    row(f"**read: database / Parquet** (target ≤ {READ_TARGET})", ratio("database", "read (s)", "parquet", "read (s)"))
    row("nightly read, one new day: rows fetched (new rows)",
        lambda r: f"{median(r['reads']['nightly']['rows fetched']):,.0f} ({r['new rows']:,})")
    row(
        "nightly read: asking the database and making Arrow tables (s)",
        lambda r: spread(r["reads"]["nightly"]["database (s)"]),
    )
    row(
        "nightly read, wall (the kept rows of the other tables merged in) (s)",
        lambda r: spread(r["reads"]["nightly"]["read (s)"]),
    )
    row(
        f"**nightly / full, database part** (target ≤ {NIGHTLY_TARGET})",
        ratio("nightly", "database (s)", "database", "database (s)"),
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", choices=("mariadb", "postgresql"), default=None)
    parser.add_argument("--data", type=Path, default=None,
                        help="a folder holding the six tables' Parquet files (default: the benchmark's, made once)")
    arguments = parser.parse_args()
    tables = database_rows(arguments.data or whole_run.exports(RUNS, SEED)[0].parent)
    starts: dict[str, Callable[[], Server]] = {
        "mariadb": lambda: db_servers.start_mariadb(("--innodb-buffer-pool-size=512M",)),
        "postgresql": lambda: db_servers.start_postgresql(("-c", "shared_buffers=256MB")),
    }
    results = {}
    for name, start in starts.items():
        if arguments.only not in (None, name):
            continue
        server = start()
        work = Path(tempfile.mkdtemp(prefix=f"db-bench-{name}-", dir="/tmp"))
        try:
            results[{"mariadb": "MariaDB", "postgresql": "PostgreSQL"}[name]] = bench_server(
                name, server, tables, work, arguments.repeat, arguments.jobs)
        finally:
            server.stop()
            shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    print(
        f"\nMedians of {arguments.repeat} (lowest–highest), each side alternating with the other; targets: "
        f"read within {READ_TARGET}x of Parquet, nightly database part at most {NIGHTLY_TARGET:.0%} of the full one's."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
