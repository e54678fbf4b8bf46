"""The problems the input cache keeps, written as JSON and read back (the figures are ``aggregate.records``)."""

from __future__ import annotations

from typing import Any

from ..core.model import Problem, Rule


def problem_record(problem: Problem) -> dict[str, Any]:
    """A problem as JSON; ``problem_of`` reads it back (the input's name is the reader's)."""
    return {"row": problem.row, "rule": problem.rule.value, "message": problem.message,
            "params": [list(pair) for pair in problem.params], "run": problem.run, "sequence": problem.sequence}


def problem_of(record: dict[str, Any], name: str) -> Problem:
    params = tuple((str(key), str(value)) for key, value in record["params"])
    return Problem(name, record["row"], Rule(record["rule"]), record["message"], params, record["run"],
                   record["sequence"])
