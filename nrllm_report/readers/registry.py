"""Every reader, one class a shape, and the registry that picks the reader of an input.

A file's reader is chosen by its name's longest known suffix (case-insensitive); where
several readers share that suffix (a ``.json`` file: phpMyAdmin's export or a JSON
array), by the first whose ``sniff`` of the content says it is its own. A folder is a
Parquet dataset, ``-`` standard input (JSON Lines, read as a file of the same bytes
would be), a database URL a database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO, ClassVar

from ..core.errors import InputError
from ..core.tables import EVENTS_TABLE
from .chunks import Chunk, RowChunk
from .database import DatabaseSession, is_database_url, parse_database_url
from .delimited import csv_file_chunks, header_columns, tsv_file_chunks
from .inputs import STDIN, Input, Reader, TableInput
from .json import first_record, json_file_chunks, json_lines_chunks, json_lines_table_chunks
from .one_run import filtered_rows, json_lines_run_rows, parquet_run_rows
from .parquet import hive_partition, parquet_columns, parquet_dataset_chunks, parquet_file_chunks, parquet_files
from .phpmyadmin import export_chunks, export_tables, looks_like_export

# What mysqldump --tab writes: TABLE.sql (the CREATE TABLE) and TABLE.txt (the rows, no header row).
MYSQLDUMP_TAB_SUFFIXES = (".txt", ".txt.gz", ".sql", ".sql.gz")
MYSQLDUMP_TAB_HOW_TO = (
    "unknown format; if it is what mysqldump --tab writes (TABLE.sql and TABLE.txt, rows without a header row "
    "naming their columns), export the events with their header instead, e.g. mysql --batch -e "
    "'SELECT * FROM tx_nrllm_agentrun_event' typo3 > events.tsv (see docs/guide.md, Exporting the events table)"
)

FORMATS_SAID = (
    ".json, .jsonl, .ndjson, .csv, .tsv (each optionally .gz), .parquet, a folder of Parquet files, or - for stdin"
)


def _file(source: Input) -> Path:
    """The file or folder a reader of files reads."""
    assert source.path is not None
    return source.path


class FilteringReader(Reader):
    """A reader whose one-run variant reads the whole input and keeps the rows that may be the run's."""

    def run_rows(self, source: Input, run: str) -> Iterator[RowChunk]:
        return filtered_rows(self.chunks(source), run)


class JsonLinesReader(Reader):
    """JSON Lines, a file's or standard input's: only the lines that may hold a run are parsed for it."""

    suffixes = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")

    def chunks(self, source: Input) -> Iterator[Chunk]:
        with source.opened() as stream:
            yield from json_lines_chunks(stream, source.name)

    def run_rows(self, source: Input, run: str) -> Iterator[RowChunk]:
        with source.opened() as stream:
            yield from json_lines_run_rows(stream, source.name, run=run)

    def columns(self, source: Input) -> set[str] | None:
        first = first_record(_file(source), source.name, array=False)
        return set(first) if isinstance(first, dict) else None

    def table_input(self, source: Input, table: str) -> TableInput:
        path, name = _file(source), source.name
        return TableInput(table, name, lambda: json_lines_table_chunks(path, name))


class JsonArrayReader(FilteringReader):
    """A JSON array of records (or, in a ``.json`` file, JSON Lines)."""

    suffixes = (".json", ".json.gz")

    def chunks(self, source: Input) -> Iterator[Chunk]:
        return json_file_chunks(_file(source), source.name)

    def columns(self, source: Input) -> set[str] | None:
        first = first_record(_file(source), source.name, array=True)
        return set(first) if isinstance(first, dict) else None


class PhpMyAdminReader(JsonArrayReader):
    """phpMyAdmin's JSON export: the rows of one table at a time, one input per table it holds."""

    def sniff(self, path: Path, name: str) -> bool:
        return looks_like_export(path, name)

    def chunks(self, source: Input) -> Iterator[Chunk]:
        return export_chunks(_file(source), source.name)

    def tables(self, source: Input) -> list[str] | None:
        held = export_tables(_file(source), source.name)
        return None if held is None else held or [EVENTS_TABLE]

    def table_input(self, source: Input, table: str) -> TableInput:
        path, name = _file(source), source.name
        return TableInput(table, name, lambda: export_chunks(path, name, table_name=table))


class DelimitedReader(FilteringReader):
    """CSV or TSV with a header row naming the columns (see ``delimited``)."""

    header_row = True
    tab_separated: ClassVar[bool] = False

    def chunks(self, source: Input) -> Iterator[Chunk]:
        reader = tsv_file_chunks if self.tab_separated else csv_file_chunks
        return reader(_file(source), source.name)

    def columns(self, source: Input) -> set[str] | None:
        columns = header_columns(_file(source), source.name, tab_separated=self.tab_separated)
        return set(columns) if columns else None

    def table_input(self, source: Input, table: str) -> TableInput:
        # A delimited file's header needs no particular column here: the table's checker names what is missing.
        path, name = _file(source), source.name
        reader = tsv_file_chunks if self.tab_separated else csv_file_chunks
        return TableInput(table, name, lambda: reader(path, name, required=()))


class CsvReader(DelimitedReader):
    suffixes = (".csv", ".csv.gz")


class TsvReader(DelimitedReader):
    suffixes = (".tsv", ".tsv.gz")
    tab_separated = True


class ParquetReader(Reader):
    """A Parquet file: for one run, only the row groups whose statistics may hold it are read."""

    suffixes = (".parquet", ".pq")

    def chunks(self, source: Input) -> Iterator[Chunk]:
        return parquet_file_chunks(_file(source), source.name)

    def run_rows(self, source: Input, run: str) -> Iterator[RowChunk]:
        return parquet_run_rows(_file(source), source.name, run=run)

    def columns(self, source: Input) -> set[str] | None:
        return set(parquet_columns(_file(source), source.name))


class ParquetFolderReader(FilteringReader):
    """A folder of Parquet files (a dataset; ``key=value`` folders add columns)."""

    folder = True

    def chunks(self, source: Input) -> Iterator[Chunk]:
        return parquet_dataset_chunks(_file(source), source.name)

    def columns(self, source: Input) -> set[str] | None:
        path = _file(source)
        files = parquet_files(path)
        if not files:
            return None
        return set(parquet_columns(files[0], source.name)) | set(hive_partition(files[0].relative_to(path)))


class DatabaseReader(FilteringReader):
    """A database's tables, read in one session (see ``database``)."""

    def chunks(self, source: Input) -> Iterator[Chunk]:
        assert source.database is not None
        return source.database.chunks(EVENTS_TABLE)

    def tables(self, source: Input) -> list[str] | None:
        assert source.database is not None
        return [EVENTS_TABLE, *source.database.tables()]  # the events, and the others it holds

    def table_input(self, source: Input, table: str) -> TableInput:
        database = source.database
        assert database is not None
        return TableInput(table, database.name_of(table), lambda: database.chunks(table))


class Readers:
    """The readers of files (in the order a shared suffix tries them), of folders, of standard
    input and of databases; ``pick`` chooses a file's."""

    def __init__(self, files: Sequence[Reader], *, folder: Reader, standard_input: Reader, database: Reader) -> None:
        self.files = tuple(files)
        self.folder, self.standard_input, self.database = folder, standard_input, database

    def named(self, path: Path) -> list[Reader]:
        """The readers of a file's name: those of its longest known suffix (none when it has none)."""
        name = path.name.lower()
        matching = [(len(suffix), reader) for reader in self.files for suffix in reader.suffixes
                    if name.endswith(suffix)]
        longest = max((length for length, _reader in matching), default=0)
        return [reader for length, reader in matching if length == longest]

    def pick(self, path: Path, name: str) -> Reader | None:
        """A file's reader: by its name, then by its content where readers share the name."""
        named = self.named(path)
        if len(named) > 1:
            return next((reader for reader in named[:-1] if reader.sniff(path, name)), named[-1])
        return named[0] if named else None

    def suffixes(self) -> list[str]:
        """Every suffix a reader reads by, longest first."""
        return sorted({suffix for reader in self.files for suffix in reader.suffixes}, key=len, reverse=True)


JSON_LINES = JsonLinesReader()
READERS = Readers(
    [PhpMyAdminReader(), JsonArrayReader(), JSON_LINES, CsvReader(), TsvReader(), ParquetReader()],
    folder=ParquetFolderReader(), standard_input=JSON_LINES, database=DatabaseReader(),
)


def resolve_input(name: str, *, standard_input: BinaryIO | None = None) -> Input:
    """Check that an input exists and has a known format, before any row is read.

    ``-`` reads ``standard_input`` where given (a test's bytes), else the process's standard input.
    """
    if name == STDIN:
        return Input(name, READERS.standard_input, stream=standard_input)
    if is_database_url(name):
        session = DatabaseSession(parse_database_url(name))
        return Input(session.name_of(EVENTS_TABLE), READERS.database, database=session)
    path = Path(name)
    if not path.exists():
        raise InputError(name, "no such file or folder")
    if path.is_dir():
        return Input(name, READERS.folder, path=path)
    named = READERS.named(path)
    if not named and path.name.lower().endswith(MYSQLDUMP_TAB_SUFFIXES):
        raise InputError(name, MYSQLDUMP_TAB_HOW_TO)
    if not named:
        raise InputError(name, f"unknown format; expected {FORMATS_SAID}")
    if not os.access(path, os.R_OK):
        raise InputError(name, "cannot be read: permission denied")
    reader = READERS.pick(path, name)
    assert reader is not None
    return Input(name, reader, path=path)


def resolve_inputs(names: list[str], *, standard_input: BinaryIO | None = None) -> list[Input]:
    """All inputs checked up front, so a typo in the last one fails before any work."""
    if names.count(STDIN) > 1:
        raise InputError(STDIN, "standard input can be read only once")
    return [resolve_input(name, standard_input=standard_input) for name in names]
