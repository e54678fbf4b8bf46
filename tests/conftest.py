"""Shared fixtures: rows written as every export shape, the CLI run in-process, and the browser."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chromium import Visit, chromium_path, guarded_context, launch, open_page, origin_of
from click.testing import Result
from command_line import invoke
from db_servers import MariaDB, PostgreSQL, skip_outside_ci, start_mariadb, start_postgresql
from playwright.sync_api import Browser, sync_playwright

from nrllm_report.check.rows import RowChecker, RowResult
from nrllm_report.core.model import Problem
from nrllm_report.core.schema import Step
from nrllm_report.pipeline import CheckedRows, checked_steps
from nrllm_report.readers import resolve_inputs

# A line given as bytes or str is written as it is; anything else is JSON-encoded.
Line = Any


def tool_row(**overrides: Any) -> dict[str, Any]:
    """A valid ADR-191 tool row; keyword arguments replace or (with None) null its columns."""
    row: dict[str, Any] = {
        "uid": 1,
        "run": 7,
        "sequence": 3,
        "kind": "tool",
        "round": 1,
        "duration_ms": 12.5,
        "crdate": 1_788_000_000,
        "payload": {"toolName": "mcp_github_create_issue", "toolIsError": False, "toolOutcome": "ok"},
    }
    row.update(overrides)
    return row


def step_row(kind: str = "llm", **overrides: Any) -> dict[str, Any]:
    """A valid row of a non-tool kind with an empty payload."""
    return tool_row(**{"kind": kind, "payload": {}, **overrides})


def tool_payload(**keys: Any) -> dict[str, Any]:
    """A tool payload; keys given as ``...`` are left out."""
    payload = {"toolName": "mcp_github_create_issue", **keys}
    return {key: value for key, value in payload.items() if value is not ...}


def _line_bytes(line: Line) -> bytes:
    if isinstance(line, bytes):
        return line
    if isinstance(line, str):
        return line.encode("utf-8")
    return json.dumps(line).encode("utf-8")


def jsonl_bytes(lines: Iterable[Line]) -> bytes:
    """JSON Lines: one line per item, each ending in a newline."""
    return b"".join(_line_bytes(line) + b"\n" for line in lines)


def parquet_table(rows: list[dict[str, Any]]) -> pa.Table:
    """A table as exports store it: the payload as JSON text unless it already is text."""
    stored = [
        {**row, "payload": json.dumps(row["payload"])} if isinstance(row.get("payload"), dict) else row
        for row in rows
    ]
    return pa.Table.from_pylist(stored)


@pytest.fixture
def write_rows(tmp_path: Path) -> Callable[..., Path]:
    """Write rows into ``tmp_path/name`` in the shape its suffix says; returns the path.

    ``.json`` is an array, ``.jsonl``/``.ndjson`` one line a row, ``.gz`` compresses
    either, ``.parquet`` accepts rows or a ready ``pa.Table``.
    """

    def write(name: str, rows: Any) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lower = name.lower()
        if lower.endswith((".parquet", ".pq")):
            table = rows if isinstance(rows, pa.Table) else parquet_table(rows)
            pq.write_table(table, path)
            return path
        base = lower[:-3] if lower.endswith(".gz") else lower
        data = json.dumps(rows).encode("utf-8") if base.endswith(".json") else jsonl_bytes(rows)
        path.write_bytes(gzip.compress(data, mtime=0) if lower.endswith(".gz") else data)
        return path

    return write


@pytest.fixture(autouse=True)
def cache_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's builds keep their input cache in a folder of the test's own, never in ~/.cache
    (real processes the test starts inherit the variable)."""
    home = tmp_path_factory.mktemp("cache-home")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "nrllm-report"


@pytest.fixture
def cli() -> Callable[..., Result]:
    """Run ``nrllm-report`` in-process (``command_line.invoke``); paths may be given as Path objects."""
    return invoke


def check_rows(*rows: Any, servers: Iterable[str] = ()) -> list[RowResult]:
    """Each raw row through one checker, in order, as if they were lines 1.. of ``rows.jsonl``."""
    checker = RowChecker(servers)
    return [checker.check("rows.jsonl", number, raw=row) for number, row in enumerate(rows, 1)]


def check_one(row: Any, servers: Iterable[str] = ()) -> RowResult:
    return check_rows(row, servers=servers)[0]


def rules_of(result: RowResult) -> list[str]:
    return [problem.rule.value for problem in result.problems]


def read_steps(*names: str | Path, stdin: Any = None, servers: Iterable[str] = ()) -> tuple[list[Step], CheckedRows]:
    """Every kept step of the inputs, read and checked as the commands do, and the tally."""
    tally = CheckedRows()
    inputs = resolve_inputs([str(name) for name in names], standard_input=stdin)
    steps = list(checked_steps(inputs, RowChecker(servers), tally=tally))
    return steps, tally


def problem_summary(problems: Iterable[Problem]) -> list[tuple[str, int, str]]:
    """(input, row, rule) of each problem: what a user greps for."""
    return [(problem.input, problem.row, problem.rule.value) for problem in problems]


# ---------------------------------------------------------------- the browser (tests/chromium.py)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """Debian's Chromium under Playwright, launched once. Skipped where it is missing, but
    failed in CI (the environment variable ``CI`` set), which must run the browser tests."""
    executable = chromium_path()
    if executable is None:
        skip_outside_ci("chromium is not installed: apt-get install chromium", "the browser tests")
    playwright = sync_playwright().start()
    try:
        launched = launch(playwright, executable)
        yield launched
        launched.close()
    finally:
        playwright.stop()


@pytest.fixture
def visit(browser: Browser) -> Iterator[Callable[..., Visit]]:
    """Open a URL in a fresh context: ``visit(url, color_scheme="dark")``. The contexts are
    closed after the test, which fails if any of its pages fetched from another host or
    logged an error (a stylesheet the page's policy blocked, say)."""
    opened: list[Visit] = []

    def open_url(url: str, color_scheme: str = "light", **options: Any) -> Visit:
        context, traffic = guarded_context(browser, origin_of(url), color_scheme=color_scheme, **options)
        opened.append(Visit(open_page(context, url), traffic))
        return opened[-1]

    yield open_url
    problems = [problem for one in opened for problem in one.traffic.problems()]
    for one in opened:
        one.page.context.close()
    assert problems == [], "\n".join(problems)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[MariaDB]:
    """A real MariaDB server for the session (skipped, and said why, when it is not installed; under CI a failure)."""
    server = start_mariadb()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgresql() -> Iterator[PostgreSQL]:
    """A real PostgreSQL server for the session (skipped, and said why, when it is not installed; under CI a
    failure)."""
    server = start_postgresql()
    yield server
    server.stop()


# Markers a test gets from what it uses, so that a new browser or database test is marked without
# anyone remembering to: ``pytest -m "not browser"`` on a machine without Chromium, ``-m "not db"``
# without the servers. ``slow`` is marked by hand, on the tests that take seconds each.
MARKER_OF_FIXTURE = {"browser": "browser", "visit": "browser", "mariadb": "db", "postgresql": "db"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker in sorted({MARKER_OF_FIXTURE[name] for name in used & MARKER_OF_FIXTURE.keys()}):
            item.add_marker(marker)
