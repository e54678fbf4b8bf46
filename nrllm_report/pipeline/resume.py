"""A nightly build straight from the database: the reads resumed where the archive's marks say,
and the events' problems of the rows not read again said as a whole read says them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from ..check.checked import CheckedRows
from ..core.model import Problem, Severity
from ..core.tables import EVENTS_TABLE
from ..readers import Input
from ..readers.archive import archived_database_marks
from ..readers.database import DatabaseSession
from ..readers.resume import marks_of, marks_record
from ..store.records import problem_of, problem_record
from .sweep import Swept

ROWS_FETCHED = "rows fetched: "  # in ``timings``, before a table's name: the rows its SELECT returned
DATABASE_SECONDS = "database"  # in ``timings``: the seconds spent asking the databases and converting their rows


def resumed_sessions(inputs: Iterable[Input], archive: Path | None) -> list[DatabaseSession]:
    """The inputs' database sessions, each told where its last read ended as the archive (when there
    is one) keeps it; a session the archive knows nothing of reads whole."""
    sessions = [source.database for source in inputs if source.database is not None]
    marks = marks_of(archived_database_marks(archive)) if archive is not None and sessions else {}
    for session in sessions:
        session.resume = marks.get(session.url.identity)
    return sessions


def with_resumed_problems(swept: Swept, sessions: list[DatabaseSession], *, names: list[str]) -> Swept:
    """The sweep's tally with the problems of the events' rows not read again (each rejected row
    counted as read and rejected, as a whole read counts it)."""
    carried = [problem for session in sessions for problem in _carried(session)]
    if not carried:
        return swept
    tally = swept.tally
    rejected = sum(1 for problem in carried if problem.severity is Severity.ERROR)
    resumed = CheckedRows(tally.rows_read + rejected, tally.rows_rejected + rejected,
                          list(tally.problems) + carried, tally.rows_fast)
    resumed.settle(names)
    return replace(swept, tally=resumed)


def _carried(session: DatabaseSession) -> list[Problem]:
    mark = session.resumed_reads.get(EVENTS_TABLE)
    if mark is None or session.resume is None:
        return []
    name = session.name_of(EVENTS_TABLE)
    return [problem_of(record, name) for record in session.resume.problems
            if record["row"] < mark.since and (record["run"] is None or record["run"] not in session.fetched_runs)]


def rows_fetched(sessions: list[DatabaseSession]) -> dict[str, float]:
    """The rows each table's ``SELECT`` returned, by table, and the seconds the databases took, for ``--timings``."""
    counts: dict[str, float] = {DATABASE_SECONDS: sum(session.seconds for session in sessions)} if sessions else {}
    for session in sessions:
        for key, rows in session.fetched.items():
            label = ROWS_FETCHED + session.url.table(key)
            counts[label] = counts.get(label, 0) + rows
    return counts


def next_marks(sessions: list[DatabaseSession], problems: Iterable[Problem]) -> bytes | None:
    """Where the next build's reads resume, with the events' problems of this one, for the archive."""
    said = list(problems)
    marks = {}
    for session in sessions:
        if EVENTS_TABLE not in session.marks.tables:
            continue
        name = session.name_of(EVENTS_TABLE)
        session.marks.problems = [problem_record(problem) for problem in said if problem.input == name]
        marks[session.url.identity] = session.marks
    return marks_record(marks)
