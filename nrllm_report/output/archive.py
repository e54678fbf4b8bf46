"""The archive file: canonical records in Parquet, written to a temporary file beside it.

The bytes are a function of the rows alone: fixed-size row groups, the schema's marker,
no time stamps. The file is fsynced; the site writer moves it in after the swap.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.schema import ARCHIVE_SCHEMA

ROW_GROUP_ROWS = 65_536


class ArchiveFile:
    """Rows written in the order given, cut into row groups of exactly ``ROW_GROUP_ROWS``."""

    def __init__(self, target: Path, metadata: dict[bytes, bytes] | None = None) -> None:
        """``metadata`` is added to the schema's (the archived runs' other rows)."""
        descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.fchmod(descriptor, 0o644)
        self.path = Path(temporary)
        self._stream = os.fdopen(descriptor, "wb")
        schema = ARCHIVE_SCHEMA.with_metadata({**ARCHIVE_SCHEMA.metadata, **(metadata or {})})
        self._parquet = pq.ParquetWriter(self._stream, schema, compression="zstd")
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self.rows = 0

    def add(self, table: pa.Table) -> None:
        """Canonical columns (``ARCHIVE_SCHEMA``'s names) to append."""
        table = table.select(ARCHIVE_SCHEMA.names).cast(ARCHIVE_SCHEMA)
        self._pending += table.to_batches()
        self._pending_rows += table.num_rows
        self.rows += table.num_rows
        while self._pending_rows >= ROW_GROUP_ROWS:
            self._write_group(ROW_GROUP_ROWS)

    def _write_group(self, rows: int) -> None:
        pending = pa.Table.from_batches(self._pending, schema=ARCHIVE_SCHEMA)
        self._parquet.write_table(pending.slice(0, rows), row_group_size=ROW_GROUP_ROWS)
        rest = pending.slice(rows)
        self._pending, self._pending_rows = rest.to_batches(), rest.num_rows

    def finish(self) -> Path:
        """Write the last row group, close and fsync; returns the temporary file."""
        if self._pending_rows:
            self._write_group(self._pending_rows)
        self._parquet.close()
        self._stream.flush()
        os.fsync(self._stream.fileno())
        self._stream.close()
        return self.path

    def discard(self) -> None:
        try:
            self._parquet.close()
            self._stream.close()
        finally:
            self.path.unlink(missing_ok=True)
