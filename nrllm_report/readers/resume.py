"""Where a nightly database read resumes: what the archive keeps of the last read of each URL.

A build with ``--archive`` and ``--db`` writes, beside the archive's runs, per database URL
and per table the highest ``uid`` and ``crdate`` it read and the first ``uid`` of the margin
(rows created less than ``MARGIN_SECONDS`` before the newest: runs still being written, and
rows a transaction had not yet committed when the last read took its snapshot, whose
``uid`` may lie below the highest one read). The next build asks only for rows from that
``uid`` on, the whole of every run they belong to, and every row of a run the run table
said was not finished; the archive supplies the rest, merged by run as a file's nightly
build merges it.

The events are the history; the other tables are small beside them and what the site
shows of them (unmatched rows, the catalogue, the policy denials of archived runs) needs
every row, so their rows as read are kept too and the new ones merged in by ``uid``. The
problems the events' rows raised are kept with them, so an archived row's problem is said
as a full read says it.
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

MARGIN_SECONDS = 3_600
RECORD_VERSION = 1


@dataclass
class TableMark:
    """How far one table was read: the highest ``uid`` and ``crdate``, the margin's first ``uid``,
    and (for a table besides the events) every row as read."""

    max_uid: int
    max_crdate: int | None
    since: int
    rows: pa.Table | None = None

    def to_json(self) -> dict[str, Any]:
        return {"max_uid": self.max_uid, "max_crdate": self.max_crdate, "since": self.since,
                "rows": None if self.rows is None else _ipc(self.rows)}

    @classmethod
    def of_json(cls, record: dict[str, Any]) -> TableMark:
        rows = record.get("rows")
        return cls(int(record["max_uid"]), record["max_crdate"], int(record["since"]),
                   None if rows is None else _table(rows))


@dataclass
class DatabaseMarks:
    """One URL's last read: each table's mark, the runs (their uids) not finished then, and the
    problems the events raised (as ``store.records`` writes them)."""

    tables: dict[str, TableMark] = field(default_factory=dict)
    unfinished: list[int] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"tables": {table: mark.to_json() for table, mark in self.tables.items()},
                "unfinished": self.unfinished, "problems": self.problems}

    @classmethod
    def of_json(cls, record: dict[str, Any]) -> DatabaseMarks:
        return cls({table: TableMark.of_json(mark) for table, mark in record["tables"].items()},
                   [int(uid) for uid in record["unfinished"]], list(record["problems"]))


def marks_record(marks: dict[str, DatabaseMarks]) -> bytes | None:
    """Each URL's marks as the archive's metadata holds them: compressed JSON, base64 (None for none)."""
    if not marks:
        return None
    text = json.dumps({"version": RECORD_VERSION, "urls": {url: mark.to_json() for url, mark in sorted(marks.items())}},
                      ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return base64.b64encode(zlib.compress(text.encode("utf-8", "surrogatepass"), 6))


def marks_of(data: bytes | None) -> dict[str, DatabaseMarks]:
    """The marks an archive keeps, by URL; none where it keeps none or ones this version cannot read
    (the next read is then a whole one)."""
    if not data:
        return {}
    try:
        record = json.loads(zlib.decompress(base64.b64decode(data)).decode("utf-8", "surrogatepass"))
        if record.get("version") != RECORD_VERSION:
            return {}
        return {url: DatabaseMarks.of_json(mark) for url, mark in record["urls"].items()}
    except (ValueError, TypeError, KeyError, zlib.error, pa.ArrowException):
        return {}


def _ipc(table: pa.Table) -> str:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as stream:
        stream.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode("ascii")


def _table(text: str) -> pa.Table:
    return pa.ipc.open_stream(pa.BufferReader(base64.b64decode(text))).read_all()
