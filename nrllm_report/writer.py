"""The only code that writes files: canonical records, and the site (see ``SiteWriter``)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import OutputError
from .model import CANONICAL_NAMES, STEP_FIELD_NAMES, Step

RECORD_BATCH_ROWS = 65_536

CANONICAL_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("sequence", pa.int64()),
        ("kind", pa.string()),
        ("round", pa.int64()),
        ("durationMs", pa.float64()),
        ("crdate", pa.int64()),
        ("toolName", pa.string()),
        ("server", pa.string()),
        ("toolIsError", pa.bool_()),
        ("outcome", pa.string()),
        ("finishReason", pa.string()),
        ("promptTokens", pa.int64()),
        ("completionTokens", pa.int64()),
        ("totalTokens", pa.int64()),
        ("estimatedCost", pa.float64()),
        ("requestedToolCallCount", pa.int64()),
        ("messageCount", pa.int64()),
        ("toolSpecCount", pa.int64()),
        ("artifactCount", pa.int64()),
        ("droppedSourceCount", pa.int64()),
        ("approved", pa.bool_()),
        ("decidedBy", pa.int64()),
    ]
)
assert CANONICAL_SCHEMA.names == [CANONICAL_NAMES[name] for name in STEP_FIELD_NAMES]

RecordWriter = Callable[[Path, Iterable[Step]], None]


def write_records_jsonl(out: Path, steps: Iterable[Step]) -> None:
    with _atomic_file(out) as stream:
        for step in steps:
            line = json.dumps(step.to_record(), ensure_ascii=False, separators=(",", ":"))
            stream.write(line.encode("utf-8") + b"\n")


def write_records_parquet(out: Path, steps: Iterable[Step]) -> None:
    with _atomic_file(out) as stream:
        with pq.ParquetWriter(stream, CANONICAL_SCHEMA) as parquet:
            for batch in _record_batches(steps):
                parquet.write_batch(batch)


def _record_batches(steps: Iterable[Step]) -> Iterator[pa.RecordBatch]:
    columns: list[list[object]] = [[] for _ in STEP_FIELD_NAMES]
    for step in steps:
        for column, name in zip(columns, STEP_FIELD_NAMES):
            value = getattr(step, name)
            column.append(value.value if name == "outcome" and value is not None else value)
        if len(columns[0]) >= RECORD_BATCH_ROWS:
            yield pa.RecordBatch.from_arrays(columns, schema=CANONICAL_SCHEMA)
            columns = [[] for _ in STEP_FIELD_NAMES]
    yield pa.RecordBatch.from_arrays(columns, schema=CANONICAL_SCHEMA)


RECORD_WRITERS: dict[str, RecordWriter] = {
    ".jsonl": write_records_jsonl,
    ".ndjson": write_records_jsonl,
    ".parquet": write_records_parquet,
}


def record_writer_for(out: Path) -> RecordWriter:
    """The writer for ``normalize --out`` by the file's suffix."""
    record_writer = RECORD_WRITERS.get(out.suffix.lower())
    if record_writer is None:
        raise OutputError(f"{out}: unknown output format; expected .jsonl or .parquet")
    if out.is_dir():
        raise OutputError(f"{out}: is a folder; give a file name ending in .jsonl or .parquet")
    if not out.parent.is_dir():
        raise OutputError(f"{out}: the folder {str(out.parent)!r} does not exist")
    return record_writer


class _atomic_file:
    """A temporary file beside ``path`` that replaces it only when the block ends without error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self):  # type: ignore[no-untyped-def]
        descriptor, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        self.temporary = Path(temporary)
        self.stream = os.fdopen(descriptor, "wb")
        return self.stream

    def __exit__(self, kind, error, traceback) -> None:  # type: ignore[no-untyped-def]
        self.stream.close()
        if kind is None:
            os.replace(self.temporary, self.path)
        else:
            self.temporary.unlink(missing_ok=True)
