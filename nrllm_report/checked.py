"""Read and check every input into one Arrow table of canonical steps.

Batches go through the columnar fast path; the rows it does not vouch for, and
inputs it cannot take, go through ``RowChecker`` one by one. Duplicates and
warnings are found at the end, on the whole table, so both paths share them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from . import columnar
from .model import KNOWN_KINDS, TOOL_KIND, Problem, Rule, Step
from .normalize import known_server_order
from .readers import ArrowChunk, Input
from .validate import RowChecker, duplicate_problem, step_warnings
from .writer import InputCache

SLOW_BATCH_ROWS = 65_536
RULE_ORDER = {rule: position for position, rule in enumerate(Rule)}
KNOWN_KIND_VALUES = pa.array(sorted(KNOWN_KINDS))


@dataclass
class CheckedRows:
    """Counts and problems of a pass over the inputs."""

    rows_read: int = 0
    rows_rejected: int = 0
    problems: list[Problem] = field(default_factory=list)

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
    """Every kept step (``columnar.CHECKED_SCHEMA``), sorted by run and sequence, and the tally."""

    steps: pa.Table
    tally: CheckedRows


class _SlowSteps:
    """Steps kept by the row checker, turned into Arrow batches as they accumulate."""

    def __init__(self) -> None:
        self.columns: list[list[Any]] = [[] for _ in columnar.CHECKED_SCHEMA]
        self.batches: list[pa.RecordBatch] = []

    def add(self, step: Step, input_index: int, row_number: int) -> None:
        for column, value in zip(self.columns, step.values()):
            column.append(value)
        self.columns[-2].append(input_index)
        self.columns[-1].append(row_number)
        if len(self.columns[0]) >= SLOW_BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.columns[0]:
            self.batches.append(pa.RecordBatch.from_arrays(self.columns, schema=columnar.CHECKED_SCHEMA))
            self.columns = [[] for _ in columnar.CHECKED_SCHEMA]


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


@dataclass
class InputResult:
    """One input checked: its kept steps (before duplicates are found), its errors, its rows."""

    table: pa.Table
    problems: list[Problem]
    rows_read: int

    def about(self) -> dict[str, Any]:
        """What the input cache keeps beside the table."""
        return {"rows_read": self.rows_read, "problems": [_problem_record(problem) for problem in self.problems]}

    @classmethod
    def cached(cls, table: pa.Table, about: dict[str, Any], input_index: int, name: str) -> "InputResult":
        position = table.schema.get_field_index("input_index")
        table = table.set_column(position, "input_index", pa.array([input_index] * table.num_rows, pa.int32()))
        problems = [_problem_of(record, name) for record in about["problems"]]
        return cls(table, problems, int(about["rows_read"]))


def _problem_record(problem: Problem) -> dict[str, Any]:
    return {"row": problem.row, "rule": problem.rule.value, "message": problem.message,
            "params": [list(pair) for pair in problem.params], "run": problem.run, "sequence": problem.sequence}


def _problem_of(record: dict[str, Any], name: str) -> Problem:
    params = tuple((str(key), str(value)) for key, value in record["params"])
    return Problem(name, record["row"], Rule(record["rule"]), record["message"], params, record["run"], record["sequence"])


def check_input(
    source: Input, input_index: int, known: Sequence[str], stdin: BinaryIO | None, timings: dict[str, float]
) -> InputResult:
    """Every row of one input: Arrow batches through the fast path, the rest row by row."""
    checker = RowChecker(known, track_duplicates=False)
    batches: list[pa.RecordBatch] = []
    slow = _SlowSteps()
    problems: list[Problem] = []
    rows_read = 0
    for chunk in _timed(iter(source.chunks(stdin)), timings):
        rows = chunk.rows if not isinstance(chunk, ArrowChunk) else _fast(chunk, input_index, known, batches)
        rows_read += chunk.table.num_rows if isinstance(chunk, ArrowChunk) else len(rows)
        for row_number, raw in rows:
            result = checker.check(source.name, row_number, raw)
            if result.step is None:
                problems.extend(result.problems)
            else:
                slow.add(result.step, input_index, row_number)
    slow.flush()
    table = pa.Table.from_batches(batches + slow.batches, schema=columnar.CHECKED_SCHEMA)
    return InputResult(table, problems, rows_read)


def check_inputs(
    inputs: Sequence[Input], known_servers: Iterable[str], stdin: BinaryIO | None,
    timings: dict[str, float] | None = None, cache: InputCache | None = None,
) -> CheckedTable:
    """Every row of every input, kept as a canonical step or listed as a problem.

    ``timings`` gets the seconds spent reading (``read``) and checking (``check``);
    ``cache`` gives the checked rows of input files unchanged since the last build.
    """
    began = time.perf_counter()
    timings = {} if timings is None else timings
    read_before = timings.get("read", 0.0)
    known = known_server_order(list(known_servers))
    tally = CheckedRows()
    tables: list[pa.Table] = []
    for input_index, source in enumerate(inputs):
        key = cache.key(source.path) if cache is not None and source.path is not None else None
        cached = cache.load(key) if cache is not None and key is not None else None
        if cached is not None:
            result = InputResult.cached(*cached, input_index, source.name)
        else:
            result = check_input(source, input_index, known, stdin, timings)
            if cache is not None and key is not None:
                cache.store(key, result.table, result.about())
        tables.append(result.table)
        tally.rows_read += result.rows_read
        tally.rows_rejected += len(result.problems)
        tally.problems.extend(result.problems)
    table = pa.concat_tables(tables) if tables else columnar.CHECKED_SCHEMA.empty_table()
    names = [source.name for source in inputs]
    table, duplicates = _without_duplicates(table, names)
    tally.rows_rejected += len(duplicates)
    problems = tally.problems + duplicates + _warnings(table, names)
    order = {name: position for position, name in reversed(list(enumerate(names)))}
    problems.sort(key=lambda problem: (order[problem.input], problem.row, RULE_ORDER[problem.rule]))
    tally.problems = problems
    timings["check"] = time.perf_counter() - began - (timings.get("read", 0.0) - read_before)
    return CheckedTable(table, tally)


def _fast(
    chunk: ArrowChunk, input_index: int, known: Sequence[str], batches: list[pa.RecordBatch]
) -> list[tuple[int, Any]]:
    """Run the fast path on a chunk; return the rows it leaves to the row checker."""
    try:
        result = columnar.check_batch(chunk.table, input_index, chunk.first_row, known)
    except columnar.NotFast:
        return chunk.rows
    if result.clean.num_rows:
        batches.append(result.clean)
    return [(chunk.first_row + position, chunk.raw_row(position)) for position in result.unclean]


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
        duplicate_problem(names[row["input_index"]], row["row"], row["run"], row["sequence"])
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
        problems.extend(step_warnings(names[row["input_index"]], row["row"], row["run"], row["sequence"],
                                      row["kind"], row["toolIsError"]))
    return problems


def checked_steps(
    inputs: Iterable[Input], checker: RowChecker, tally: CheckedRows, stdin: BinaryIO | None
) -> Iterator[Step]:
    """Row by row, the reference: every kept step in reading order, problems into ``tally``.

    ``check_inputs`` must give the same steps and problems; tests hold it to this.
    """
    for source in inputs:
        for row_number, raw in source.rows(stdin):
            result = checker.check(source.name, row_number, raw)
            tally.rows_read += 1
            if result.step is None:
                tally.rows_rejected += 1
            else:
                yield result.step
            if result.problems:
                tally.problems.extend(result.problems)
