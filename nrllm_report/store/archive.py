"""The merged runs written as the new archive, and kept in the input cache as that file's entry.

The rows go in the order of their run's bucket, then run, then sequence: a function of
the rows alone, whichever way the build swept them, so the same runs always give the
same bytes. A range of buckets is gathered from every swept partition that covers it,
one range at a time, so memory stays that of a partition. The same rows, split by
bucket and numbered as the file numbers them, are what checking the new archive as
an input would give: they become its entry in the input cache, so the next build
does not read and check the archive again.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..core.schema import ARCHIVE_DATABASE_KEY, ARCHIVE_WHOLE_RUN_KEY, CHECKED_SCHEMA
from ..output import cache_files
from ..output.archive import ArchiveFile
from .cache import InputCache
from .runs import read_steps
from .spill import BucketedFile, KeptPartition, buckets_of

ROW = CHECKED_SCHEMA.get_field_index("row")


def write_archive(kept: list[KeptPartition], target: Path, *, cache: InputCache | None,
                  whole_runs: bytes | None = None, database_marks: bytes | None = None) -> Path:
    """Every kept row of the build into a temporary file beside ``target`` (returned), and into the
    cache; ``whole_runs``, the runs' rows of the other tables as ``aggregate.whole_run`` packs them,
    and ``database_marks``, where the database reads resume (``readers.resume``), go into the
    file's metadata."""
    metadata = {key: value for key, value in ((ARCHIVE_WHOLE_RUN_KEY, whole_runs),
                                              (ARCHIVE_DATABASE_KEY, database_marks)) if value}
    archive = ArchiveFile(target, metadata or None)
    entry = _entry_file(cache)
    try:
        for first, stop in _gathering_ranges(kept):
            gathered = _rows_of_range(kept, first, stop=stop)
            if gathered is None:
                continue
            rows, buckets = gathered
            numbers = pa.array(range(archive.rows + 1, archive.rows + 1 + rows.num_rows), pa.int64())
            numbered = rows.set_column(ROW, CHECKED_SCHEMA.field(ROW), numbers)
            archive.add(numbered)
            if entry is not None:
                [batch] = numbered.combine_chunks().to_batches()  # one chunk a column: one batch
                entry.add_in_bucket_order(batch, buckets)
    except BaseException:
        archive.discard()
        if entry is not None:
            entry.close()
            cache_files.remove_file(entry.path)
        raise
    temporary = archive.finish()
    _keep_in_cache(cache, temporary, target=target, entry=entry, rows=archive.rows)
    return temporary


def _entry_file(cache: InputCache | None) -> BucketedFile | None:
    """The cache entry's file, made in the cache folder (a file that no entry names is pruned)."""
    if cache is None:
        return None
    try:
        cache_files.make_folder(cache.folder)
        return BucketedFile(cache.folder / f"archive-entry-{os.getpid()}.arrow")
    except (OSError, pa.ArrowException):
        return None


def _gathering_ranges(kept: list[KeptPartition]) -> list[tuple[int, int]]:
    """Bucket ranges in which every partition either lies whole or not at all: each
    partition's bounds are bounds here (they are the same partitions when the inputs
    were swept together)."""
    bounds = sorted({bound for partition in kept for bound in partition.buckets})
    return list(zip(bounds, bounds[1:]))


def _rows_of_range(kept: list[KeptPartition], first: int, *, stop: int) -> tuple[pa.Table, pa.Array] | None:
    """Every kept row in buckets ``first`` to ``stop``, in bucket, run and sequence order, and each row's bucket."""
    pieces = []
    for partition in kept:
        low, high = partition.buckets
        if high <= first or low >= stop:
            continue
        # The checked columns only: what the sweep added for the pages (a denial) is no canonical field.
        steps = read_steps(partition.file()).select(CHECKED_SCHEMA.names)
        if (low, high) != (first, stop):
            buckets = buckets_of(steps.column("run"))
            steps = steps.filter(pc.and_(pc.greater_equal(buckets, first), pc.less(buckets, stop)))
        pieces.append(steps)
    if not pieces:
        return None
    rows = pa.concat_tables(pieces)
    rows = rows.append_column("bucket", buckets_of(rows.column("run")))
    rows = rows.sort_by([("bucket", "ascending"), ("run", "ascending"), ("sequence", "ascending")]).combine_chunks()
    return rows.drop_columns(["bucket"]), rows.column("bucket").chunk(0) if rows.num_rows else pa.array([], pa.int32())


def _keep_in_cache(cache: InputCache | None, temporary: Path, *, target: Path, entry: BucketedFile | None,
                   rows: int) -> None:
    """The archive's rows as the cache entry of the file that replaces ``target``."""
    if cache is None or entry is None:
        return
    entry.close()
    key = cache.key(temporary, named=target)
    if key is None:
        cache_files.remove_file(entry.path)
        return
    cache.store(key, entry.path, about={"rows_read": rows, "problems": [], **entry.layout()})
