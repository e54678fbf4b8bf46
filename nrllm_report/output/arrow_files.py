"""Arrow IPC files of checked steps: the build's scratch partitions and the input cache's entries."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from ..core.errors import OutputError


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


@contextmanager
def scratch_folder(near: Path | None = None) -> Iterator[Path]:
    """A fresh folder for a command's Arrow scratch files, removed when the command is done.

    It is made in ``near`` (beside a command's output, on the disk the user chose) or
    else in the system's temporary folder (``TMPDIR``).
    """
    try:
        scratch = tempfile.TemporaryDirectory(prefix=".nrllm-work-", dir=near)
    except OSError as error:
        where = near if near is not None else Path(tempfile.gettempdir())
        raise OutputError(f"{where}: cannot make a scratch folder there: {error.strerror or error}") from None
    with scratch as folder:
        yield Path(folder)
