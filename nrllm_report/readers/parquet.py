"""Parquet files and folders of them (hive partitions included), read in record batches.

Row by row, a record's values are what the JSON readers would give for the same
value: text, integers, floats, exact decimals, lists, objects. A record holding text
that is not UTF-8, anywhere, is an ``Unreadable``, as such a line is; a value Python
cannot hold (a date past year 9999) is an ``Unrepresentable``, which no rule accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.errors import InputError
from ..core.jsontext import invalid_utf8_rows
from ..core.model import N_, Unreadable
from .chunks import ArrowChunk, Chunk

# How pyarrow.parquet.write_to_dataset (and Hive, Spark) write a null partition value.
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

BATCH_ROWS = 65_536


def parquet_file_chunks(path: Path, name: str) -> Iterator[Chunk]:
    yield from _parquet_chunks(path, name, partition={}, rows_before=0)


def parquet_dataset_chunks(path: Path, name: str) -> Iterator[Chunk]:
    """Every Parquet file under a folder, in path order; ``key=value`` folders add columns."""
    files = parquet_files(path)
    if not files:
        raise InputError(name, "is a folder without Parquet files")
    rows_before = 0
    for file in files:
        partition = hive_partition(file.relative_to(path))
        for chunk in _parquet_chunks(file, f"{name}/{file.relative_to(path)}", partition=partition,
                                     rows_before=rows_before):
            rows_before = chunk.last_row()
            yield chunk


def parquet_columns(path: Path, name: str) -> list[str]:
    """The column names of a Parquet file's schema."""
    try:
        return list(pq.read_schema(path).names)
    except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a file that is not Parquet
        raise InputError(name, f"is not a readable Parquet file: {error}") from None


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


def hive_partition(relative: Path) -> dict[str, str | None]:
    """The ``key=value`` folders of a file's path; ``__HIVE_DEFAULT_PARTITION__`` is null."""
    partition: dict[str, str | None] = {}
    for part in relative.parts[:-1]:
        key, separator, value = part.partition("=")
        if separator and key:
            partition[unquote(key, errors="surrogateescape")] = (
                None if value == HIVE_NULL else unquote(value, errors="surrogateescape")
            )
    return partition


def _parquet_chunks(
    path: Path, name: str, *, partition: Mapping[str, str | None], rows_before: int
) -> Iterator[ArrowChunk]:
    row_number = rows_before
    try:
        # Without pre_buffer: with it, the reader keeps every column chunk it read, a file's worth.
        parquet = pq.ParquetFile(path, pre_buffer=False)
        for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
            table = _with_partition(pa.Table.from_batches([batch]), partition)
            unread = _not_utf8(table)
            yield ArrowChunk(table, row_number + 1, raw_row_of(table), unread=unread)
            row_number += batch.num_rows
    except (pa.ArrowException, OSError, ValueError) as error:
        where = "" if row_number == rows_before else f" after row {row_number}"
        raise InputError(name, f"is not a readable Parquet file{where}: {error}") from None


def _with_partition(table: pa.Table, partition: Mapping[str, str | None]) -> pa.Table:
    """Hive ``key=value`` folders as string columns, unless the file has the column itself."""
    for key, value in partition.items():
        if key not in table.column_names:
            table = table.append_column(_text(key), _repeated_text(value, table.num_rows))
    return table


def _text(value: str) -> str:
    """A folder name's text; bytes that are not UTF-8 become U+FFFD (a column name is no row's value)."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _repeated_text(value: str | None, length: int) -> pa.Array:
    """A partition value for every row; bytes that are not UTF-8 are kept, so the rows are unreadable."""
    if value is None:
        return pa.nulls(length, pa.string())
    data = value.encode("utf-8", "surrogateescape")
    return pa.array([data] * length, pa.binary()).view(pa.string())


def _not_utf8(table: pa.Table) -> pa.Array | None:
    """Rows holding text that is not UTF-8 in any column, nested ones included (None when none does)."""
    try:
        table.validate(full=True)
        return None
    except pa.ArrowInvalid:
        pass
    marks = pa.array([False] * table.num_rows, pa.bool_())
    for column in table.columns:
        marks = pc.or_(marks, invalid_utf8_rows(column.combine_chunks()))
    return marks


class Unrepresentable:
    """A value Python cannot hold (a date or time out of its range): no rule accepts it."""

    def __init__(self, type_: pa.DataType) -> None:
        self.type_name = str(type_)

    def __repr__(self) -> str:
        return f"<{self.type_name} out of range>"


def raw_row_of(table: pa.Table) -> Callable[[int], Any]:
    """A row of the table by its position, as the row checker reads it."""
    def raw_row(position: int) -> Any:
        row: dict[str, Any] = {}
        for name, column in zip(table.column_names, table.columns):
            try:
                row[name] = _python_value(column[position])
            except UnicodeDecodeError:
                return Unreadable(N_("the record's column %(column)s holds text that is not valid UTF-8"),
                                  (("column", _text(name)),))
        return row

    return raw_row


def _python_value(scalar: pa.Scalar) -> Any:
    """The scalar as Python holds it; a part Python cannot hold becomes ``Unrepresentable``."""
    try:
        return scalar.as_py()
    except UnicodeDecodeError:
        raise
    except (ValueError, OverflowError):
        if isinstance(scalar, pa.StructScalar):  # repeated field names too: the last wins, as in JSON
            if not scalar.is_valid:
                return None
            return {scalar.type.field(index).name: _python_value(scalar[index])
                    for index in range(scalar.type.num_fields)}
        if isinstance(scalar, (pa.ListScalar, pa.LargeListScalar, pa.FixedSizeListScalar)):
            return [_python_value(item) for item in scalar.values]
        return Unrepresentable(scalar.type)
