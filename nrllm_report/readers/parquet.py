"""Parquet files and folders of them (hive partitions included), read in record batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import InputError
from .chunks import ArrowChunk, Chunk

BATCH_ROWS = 65_536


def parquet_file_chunks(path: Path, name: str) -> Iterator[Chunk]:
    yield from _parquet_chunks(path, name, {}, 0)


def parquet_dataset_chunks(path: Path, name: str) -> Iterator[Chunk]:
    """Every Parquet file under a folder, in path order; ``key=value`` folders add columns."""
    files = parquet_files(path)
    if not files:
        raise InputError(name, "is a folder without Parquet files")
    rows_before = 0
    for file in files:
        partition = hive_partition(file.relative_to(path))
        for chunk in _parquet_chunks(file, f"{name}/{file.relative_to(path)}", partition, rows_before):
            rows_before = chunk.first_row + chunk.table.num_rows - 1
            yield chunk


def parquet_files(folder: Path) -> list[Path]:
    """Data files of a dataset, skipping hidden and ``_``-prefixed entries as Arrow does."""
    found = []
    for file in folder.rglob("*"):
        relative = file.relative_to(folder).parts
        if any(part.startswith((".", "_")) for part in relative):
            continue
        if file.is_file() and file.name.lower().endswith((".parquet", ".pq")):
            found.append(file)
    return sorted(found, key=lambda file: file.relative_to(folder).as_posix())


def hive_partition(relative: Path) -> dict[str, str]:
    partition = {}
    for part in relative.parts[:-1]:
        key, separator, value = part.partition("=")
        if separator and key:
            partition[unquote(key)] = unquote(value)
    return partition


def _parquet_chunks(
    path: Path, name: str, partition: dict[str, str], rows_before: int
) -> Iterator[ArrowChunk]:
    row_number = rows_before
    try:
        # Without pre_buffer: with it, the reader keeps every column chunk it read, a file's worth.
        parquet = pq.ParquetFile(path, pre_buffer=False)
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
            table = _with_partition(pa.Table.from_batches([batch]), partition)
            yield ArrowChunk(table, row_number + 1, _raw_row_of(table))
            row_number += batch.num_rows
    except (pa.ArrowException, OSError, ValueError) as error:
        where = "" if row_number == rows_before else f" after row {row_number}"
        raise InputError(name, f"is not a readable Parquet file{where}: {error}") from None


def _with_partition(table: pa.Table, partition: dict[str, str]) -> pa.Table:
    """Hive ``key=value`` folders as string columns, unless the file has the column itself."""
    for key, value in partition.items():
        if key not in table.column_names:
            table = table.append_column(key, pa.array([value] * table.num_rows, pa.string()))
    return table


def _raw_row_of(table: pa.Table):  # type: ignore[no-untyped-def]
    def raw_row(position: int) -> dict[str, Any]:
        return table.slice(position, 1).to_pylist()[0]

    return raw_row
