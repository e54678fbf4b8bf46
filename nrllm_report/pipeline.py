"""The one place that knows every stage: read → normalize and validate → aggregate → render → write."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

from . import writer
from .model import Problem, Severity, Step
from .readers import Input, resolve_inputs
from .validate import RowChecker


@dataclass
class CheckedRows:
    """Counts and problems of a pass over the inputs; steps go to whoever consumes them."""

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


def checked_steps(
    inputs: Iterable[Input], checker: RowChecker, tally: CheckedRows, stdin: BinaryIO | None
) -> Iterator[Step]:
    """Every kept step of every input, in input order; problems and counts go to ``tally``."""
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


def validate(names: list[str], known_servers: list[str], stdin: BinaryIO | None) -> CheckedRows:
    """Read and check every row of the inputs; keep nothing but the tally."""
    inputs = resolve_inputs(names)
    tally = CheckedRows()
    for _step in checked_steps(inputs, RowChecker(known_servers), tally, stdin):
        pass
    return tally


def normalize(
    names: list[str], out: Path, known_servers: list[str], stdin: BinaryIO | None
) -> CheckedRows:
    """Write every row without an error as a canonical record to ``out`` (.jsonl or .parquet)."""
    inputs = resolve_inputs(names)
    record_writer = writer.record_writer_for(out)
    tally = CheckedRows()
    steps = checked_steps(inputs, RowChecker(known_servers), tally, stdin)
    record_writer(out, steps)
    return tally


def error_count(problems: Iterable[Problem]) -> int:
    return sum(1 for problem in problems if problem.severity is Severity.ERROR)
