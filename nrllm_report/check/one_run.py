"""One run's steps, checked as a whole check would check them, from only the rows that may be its own.

``readers.one_run`` finds the rows that may belong to the run (and those that cannot
be read); each goes through the row checker, the definition of the rules, and the
run's kept steps then through the same duplicate and warning pass as every command's
(``kept_steps``). A run's rows never meet another run's in that pass, so the result is
what the whole check gives for the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..core.model import Problem, Rule
from ..core.schema import CHECKED_SCHEMA
from ..readers import Input
from ..readers.one_run import run_rows
from .checked import CheckedRows, kept_steps
from .normalize import known_server_order
from .rows import RowChecker


@dataclass
class RunChecked:
    """A run's kept steps (``CHECKED_SCHEMA``, by sequence) and the problems that concern it:
    its own rows' errors and warnings, and every row that cannot be read, in reading order."""

    steps: pa.Table
    problems: list[Problem]


def concerns_run(problem: Problem, run: str) -> bool:
    """A problem of the run's own rows, or of a row that cannot be read (whose run nobody knows)."""
    return problem.run == run or problem.rule is Rule.UNREADABLE_ROW


@dataclass
class RunPart:
    """One input's rows of the run: its checked steps (duplicates not yet found) and its row errors."""

    steps: pa.Table
    problems: list[Problem]


def check_input_for_run(
    run: str, source: Input, *, input_index: int, known_servers: Iterable[str]
) -> RunPart:
    """Every row of ``run`` in one input, checked row by row, and the rows that cannot be read."""
    checker = RowChecker(known_server_order(list(known_servers)), track_duplicates=False)
    columns: list[list[Any]] = [[] for _ in CHECKED_SCHEMA]
    problems: list[Problem] = []
    for chunk in run_rows(source, run):
        for row_number, raw in chunk.rows:
            result = checker.check(source.name, row_number, raw=raw)
            if result.step is None:
                problems.extend(result.problems)
            elif result.step.run == run:
                for column, value in zip(columns, (*result.step.values(), input_index, row_number)):
                    column.append(value)
    return RunPart(pa.table(columns, schema=CHECKED_SCHEMA), problems)


def settle_run(run: str, parts: Sequence[RunPart], *, names: list[str]) -> RunChecked:
    """The run's steps from every input, its duplicates and warnings found, its problems in reading order."""
    steps, later = kept_steps(pa.concat_tables([part.steps for part in parts]) if parts
                              else CHECKED_SCHEMA.empty_table(), names)
    problems = [problem for part in parts for problem in part.problems if concerns_run(problem, run)]
    tally = CheckedRows(problems=problems + later)
    tally.settle(names)
    return RunChecked(steps, tally.problems)


def check_run(
    run: str, inputs: Sequence[Input], *, known_servers: Iterable[str]
) -> RunChecked:
    """Every row of ``run`` in the inputs, checked, without checking (or mostly reading) the rest."""
    parts = [check_input_for_run(run, source, input_index=index, known_servers=known_servers)
             for index, source in enumerate(inputs)]
    return settle_run(run, parts, names=[source.name for source in inputs])
