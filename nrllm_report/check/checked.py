"""Read and check every input into Arrow batches of canonical steps.

Batches go through the columnar fast path; the rows it does not vouch for, and
inputs it cannot take, go through ``RowChecker`` one by one. Duplicates and
warnings are found afterwards on whole runs (``kept_steps``), so both paths share
them: here on one table in memory, in a build partition by partition (``spill``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..core.model import KNOWN_KINDS, TOOL_KIND, Problem, Rule, Severity
from ..core.schema import CHECKED_SCHEMA, Step
from ..readers import ArrowChunk, Input
from . import fastpath
from .normalize import known_server_order
from .rows import RowChecker, duplicate_problem, step_warnings

SLOW_BATCH_ROWS = 65_536
RULE_ORDER = {rule: position for position, rule in enumerate(Rule)}
KNOWN_KIND_VALUES = pa.array(sorted(KNOWN_KINDS))


@dataclass
class CheckedRows:
    """Counts and problems of a pass over the inputs."""

    rows_read: int = 0
    rows_rejected: int = 0
    problems: list[Problem] = field(default_factory=list)
    rows_fast: int = 0  # rows the columnar fast path vouched for (the rest were checked row by row)

    def add_input(self, problems: list[Problem], *, rows_read: int, rows_fast: int = 0) -> None:
        """An input's rows, the errors found checking its rows one at a time, and how
        many of its rows the fast path vouched for."""
        self.rows_read += rows_read
        self.rows_rejected += len(problems)
        self.rows_fast += rows_fast
        self.problems.extend(problems)

    def add_checked(self, problems: list[Problem]) -> None:
        """Problems found on the whole: duplicates (each a rejected row) and warnings."""
        self.rows_rejected += sum(1 for problem in problems if problem.severity is Severity.ERROR)
        self.problems.extend(problems)

    def settle(self, names: list[str]) -> None:
        """Problems in reading order: by input, row, and rule."""
        order = {name: position for position, name in reversed(list(enumerate(names)))}
        self.problems.sort(key=lambda problem: (order[problem.input], problem.row, RULE_ORDER[problem.rule]))

    @property
    def rows_valid(self) -> int:
        return self.rows_read - self.rows_rejected

    @property
    def has_errors(self) -> bool:
        return self.rows_rejected > 0

    def to_json(self) -> dict[str, object]:
        return {
            "rows_read": self.rows_read,
            "rows_valid": self.rows_valid,
            "rows_rejected": self.rows_rejected,
            "problems": [problem.to_json() for problem in self.problems],
        }


@dataclass
class CheckedTable:
    """Every kept step (``CHECKED_SCHEMA``), sorted by run and sequence, and the tally."""

    steps: pa.Table
    tally: CheckedRows


class _SlowSteps:
    """Steps kept by the row checker, passed on as Arrow batches as they accumulate."""

    def __init__(self, sink: BatchSink) -> None:
        self.columns: list[list[Any]] = [[] for _ in CHECKED_SCHEMA]
        self.sink = sink

    def add(self, step: Step, *, input_index: int, row_number: int) -> None:
        for column, value in zip(self.columns, step.values()):
            column.append(value)
        self.columns[-2].append(input_index)
        self.columns[-1].append(row_number)
        if len(self.columns[0]) >= SLOW_BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.columns[0]:
            self.sink(pa.RecordBatch.from_arrays(self.columns, schema=CHECKED_SCHEMA))
            self.columns = [[] for _ in CHECKED_SCHEMA]


def _timed(chunks: Iterator[Any], timings: dict[str, float]) -> Iterator[Any]:
    """The chunks of a reader, adding the seconds spent making them to ``timings["read"]``."""
    while True:
        began = time.perf_counter()
        try:
            chunk = next(chunks)
        except StopIteration:
            timings["read"] = timings.get("read", 0.0) + time.perf_counter() - began
            return
        timings["read"] = timings.get("read", 0.0) + time.perf_counter() - began
        yield chunk


BatchSink = Callable[[pa.RecordBatch], None]


@dataclass
class InputChecked:
    """One input's errors found row by row, its rows, and how many the fast path vouched for."""

    problems: list[Problem]
    rows_read: int
    rows_fast: int


def check_input(
    source: Input, input_index: int, *, known: Sequence[str], timings: dict[str, float], sink: BatchSink,
) -> InputChecked:
    """Every row of one input: Arrow batches through the fast path, the rest row by row.

    Kept steps go to ``sink`` in batches of ``CHECKED_SCHEMA`` as they are checked.
    """
    checker = RowChecker(known, track_duplicates=False)
    slow = _SlowSteps(sink)
    checked = InputChecked([], 0, 0)
    for chunk, fast in _fast_ahead(_timed(iter(source.chunks()), timings), input_index=input_index, known=known):
        if fast is not None:
            clean, rows = fast
            if clean is not None and clean.num_rows:
                sink(clean)
            checked.rows_read += chunk.table.num_rows
            checked.rows_fast += 0 if clean is None else clean.num_rows
        else:
            rows = chunk.rows
            checked.rows_read += len(rows)
        for row_number, raw in rows:
            result = checker.check(source.name, row_number, raw=raw)
            if result.step is None:
                checked.problems.extend(result.problems)
            else:
                slow.add(result.step, input_index=input_index, row_number=row_number)
    slow.flush()
    return checked


def check_inputs(
    inputs: Sequence[Input], known_servers: Iterable[str], *, timings: dict[str, float] | None = None,
) -> CheckedTable:
    """Every row of every input, kept as a canonical step or listed as a problem, in memory.

    ``timings`` gets the seconds spent reading (``read``) and checking (``check``).
    A build does the same a partition at a time (``spill``).
    """
    began = time.perf_counter()
    timings = {} if timings is None else timings
    read_before = timings.get("read", 0.0)
    known = known_server_order(list(known_servers))
    tally = CheckedRows()
    batches: list[pa.RecordBatch] = []
    for input_index, source in enumerate(inputs):
        checked = check_input(source, input_index, known=known, timings=timings, sink=batches.append)
        tally.add_input(checked.problems, rows_read=checked.rows_read, rows_fast=checked.rows_fast)
    table = pa.Table.from_batches(batches, schema=CHECKED_SCHEMA)
    names = [source.name for source in inputs]
    table, later = kept_steps(table, names)
    tally.add_checked(later)
    tally.settle(names)
    timings["check"] = time.perf_counter() - began - (timings.get("read", 0.0) - read_before)
    return CheckedTable(table, tally)


def kept_steps(table: pa.Table, names: list[str]) -> tuple[pa.Table, list[Problem]]:
    """The steps without the later row of each duplicate pair, sorted by run and sequence,
    and the problems found on the whole: the duplicates (errors) and the warnings."""
    table, duplicates = _without_duplicates(table, names)
    return table, duplicates + _warnings(table, names)


FAST_AHEAD = 1  # chunks checked by the fast path in a thread while the one before is passed on


def _fast_ahead(
    chunks: Iterator[Any], *, input_index: int, known: Sequence[str]
) -> Iterator[tuple[Any, FastResult | None]]:
    """Each chunk with its fast-path result (None for a chunk of rows), in order.

    Arrow's kernels let go of the interpreter while they work, so the fast path of the
    next chunks runs in threads while this one's kept rows are written and its other
    rows checked one by one: the check uses both cores, not only while JSON is parsed.
    """
    with ThreadPoolExecutor(max_workers=FAST_AHEAD) as pool:
        pending: deque[tuple[Any, Future[FastResult] | None]] = deque()
        for chunk in chunks:
            fast = pool.submit(_fast, chunk, input_index=input_index, known=known) if isinstance(chunk,
                                                                                                 ArrowChunk) else None
            pending.append((chunk, fast))
            if len(pending) > FAST_AHEAD:
                yield _settled(pending.popleft())
        while pending:
            yield _settled(pending.popleft())


def _settled(entry: tuple[Any, Future[FastResult] | None]) -> tuple[Any, FastResult | None]:
    chunk, fast = entry
    return chunk, None if fast is None else fast.result()


# The fast path's kept rows (None when it took none) and the rows it leaves to the row checker.
FastResult = tuple["pa.RecordBatch | None", list[tuple[int, Any]]]


def _fast(chunk: ArrowChunk, *, input_index: int, known: Sequence[str]) -> FastResult:
    """Run the fast path on a chunk's readable rows; return what it kept and the rows it
    leaves to the row checker (its unread rows among them)."""
    whole = chunk.unread is None or not pc.any(chunk.unread).as_py()
    readable = None if whole else pc.indices_nonzero(pc.invert(chunk.unread))
    numbers = chunk.numbers()
    try:
        result = fastpath.check_batch(chunk.table if readable is None else chunk.table.take(readable),
                                      input_index=input_index,
                                      rows=numbers if readable is None else numbers.take(readable), known_servers=known)
    except fastpath.NotFast:
        return None, chunk.rows
    left = set(result.unclean)
    if readable is not None:
        left = set(readable.take(pa.array(result.unclean, pa.int64())).to_pylist()) if left else set()
        left.update(pc.indices_nonzero(chunk.unread).to_pylist())
    if not left:
        return result.clean, []
    positions = sorted(left)
    row_numbers = numbers.take(pa.array(positions, pa.int64())).to_pylist()
    return result.clean, [(number, chunk.raw_row(position)) for number, position in zip(row_numbers, positions)]


def _without_duplicates(table: pa.Table, names: list[str]) -> tuple[pa.Table, list[Problem]]:
    """Sort by (run, sequence) in reading order; every later row of a pair is rejected."""
    table = table.sort_by([("run", "ascending"), ("sequence", "ascending"),
                           ("input_index", "ascending"), ("row", "ascending")])
    if table.num_rows < 2:
        return table, []
    run, sequence = table.column("run"), table.column("sequence")
    same = pc.and_(
        pc.equal(run.slice(1), run.slice(0, table.num_rows - 1)),
        pc.equal(sequence.slice(1), sequence.slice(0, table.num_rows - 1)),
    )
    repeated = pa.chunked_array([pa.array([False]), *same.chunks], pa.bool_())
    positions = pc.indices_nonzero(repeated).to_pylist()
    if not positions:
        return table, []
    located = table.take(positions).select(["run", "sequence", "input_index", "row"]).to_pylist()
    problems = [
        duplicate_problem(names[row["input_index"]], row["row"], run=row["run"], sequence=row["sequence"])
        for row in located
    ]
    return table.filter(pc.invert(repeated)), problems


def _warnings(table: pa.Table, names: list[str]) -> list[Problem]:
    kind, flag = table.column("kind"), table.column("toolIsError")
    flagless_tool = pc.and_(pc.equal(kind, TOOL_KIND), pc.is_null(flag))
    unknown_kind = pc.invert(pc.is_in(kind, value_set=KNOWN_KIND_VALUES))
    positions = pc.indices_nonzero(pc.or_(flagless_tool, unknown_kind)).to_pylist()
    columns = ["run", "sequence", "kind", "toolIsError", "input_index", "row"]
    problems: list[Problem] = []
    for row in table.take(positions).select(columns).to_pylist() if positions else []:
        problems.extend(step_warnings(names[row["input_index"]], row["row"], run=row["run"], sequence=row["sequence"],
                                      kind=row["kind"], tool_is_error=row["toolIsError"]))
    return problems


def checked_steps(
    inputs: Iterable[Input], checker: RowChecker, *, tally: CheckedRows
) -> Iterator[Step]:
    """Row by row, the reference: every kept step in reading order, problems into ``tally``.

    ``check_inputs`` must give the same steps and problems; tests hold it to this.
    """
    for source in inputs:
        for row_number, raw in source.rows():
            result = checker.check(source.name, row_number, raw=raw)
            tally.rows_read += 1
            if result.step is None:
                tally.rows_rejected += 1
            else:
                yield result.step
            if result.problems:
                tally.problems.extend(result.problems)
