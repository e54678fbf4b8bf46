"""Parquet files and folders of them (hive partitions included), read in record batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InputError

BATCH_ROWS = 65_536


def read_parquet_file(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    yield from _read_parquet(path, name, {}, 0)


def read_parquet_dataset(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    """Every Parquet file under a folder, in path order; ``key=value`` folders add columns."""
    files = parquet_files(path)
    if not files:
        raise InputError(name, "is a folder without Parquet files")
    rows_before = 0
    for file in files:
        partition = hive_partition(file.relative_to(path))
        for row_number, row in _read_parquet(file, f"{name}/{file.relative_to(path)}", partition, rows_before):
            rows_before = row_number
            yield row_number, row


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


def _read_parquet(
    path: Path, name: str, partition: dict[str, str], rows_before: int
) -> Iterator[tuple[int, Any]]:
    row_number = rows_before
    try:
        parquet = pq.ParquetFile(path)
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
            for row in _batch_rows(batch):
                row_number += 1
                for key, value in partition.items():
                    row.setdefault(key, value)
                yield row_number, row
    except (pa.ArrowException, OSError, ValueError) as error:
        where = "" if row_number == rows_before else f" after row {row_number}"
        raise InputError(name, f"is not a readable Parquet file{where}: {error}") from None


def _batch_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    return batch.to_pylist()
