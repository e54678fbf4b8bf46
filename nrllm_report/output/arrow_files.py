"""Arrow IPC files of checked steps: the build's scratch partitions and the input cache's entries."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa


class ArrowBatchFile:
    """An IPC file written a record batch at a time; ``close`` finishes it."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        self._stream = pa.OSFile(str(path), "wb")
        self._writer = pa.ipc.new_file(self._stream, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()
        self._stream.close()


def write_arrow_table(path: Path, table: pa.Table) -> None:
    """``table`` as an IPC file at ``path``."""
    with pa.OSFile(str(path), "wb") as stream, pa.ipc.new_file(stream, table.schema) as ipc:
        ipc.write_table(table)
