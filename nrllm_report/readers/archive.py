"""The archive a build carries from build to build: recognised by its marker before it is read as an input."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import ArchiveError
from ..core.schema import ARCHIVE_DATABASE_KEY, ARCHIVE_MARKER_KEY, ARCHIVE_VERSION, ARCHIVE_WHOLE_RUN_KEY


def check_archive(path: Path) -> bool:
    """Whether an archive exists at ``path``; raises ``ArchiveError`` when the file there is not one.

    A missing file is no archive yet (the build creates it); a folder, a file that is not
    Parquet, another tool's Parquet or an archive of a newer format is refused.
    """
    if not path.exists():
        if not path.parent.is_dir():
            raise ArchiveError(f"{path}: the folder {str(path.parent)!r} does not exist")
        return False
    if not path.is_file():
        raise ArchiveError(f"{path}: is not a file; --archive takes a Parquet file")
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError, ValueError) as error:
        raise ArchiveError(f"{path}: is not an nrllm-report archive: it cannot be read as Parquet ({error})") from None
    marker = metadata.get(ARCHIVE_MARKER_KEY)
    if marker is None:
        raise ArchiveError(f"{path}: is a Parquet file but not an nrllm-report archive (it has no "
                           f"{ARCHIVE_MARKER_KEY.decode()!r} marker); left untouched")
    version = marker.decode("ascii", "replace")
    if not version.isdigit():
        raise ArchiveError(f"{path}: has an archive marker this tool cannot read ({version!r}); left untouched")
    if int(version) > ARCHIVE_VERSION:
        raise ArchiveError(f"{path}: was written by a newer nrllm-report (archive format {version}; this version "
                           f"reads format {ARCHIVE_VERSION}); left untouched")
    return True


def archived_whole_runs(path: Path) -> bytes | None:
    """What an archive keeps of its runs' other rows (see ``aggregate.whole_run``), or None."""
    return _metadata(path, ARCHIVE_WHOLE_RUN_KEY)


def archived_database_marks(path: Path) -> bytes | None:
    """Where the database reads of the build that wrote an archive resume (see ``readers.resume``), or None."""
    return _metadata(path, ARCHIVE_DATABASE_KEY)


def _metadata(path: Path, key: bytes) -> bytes | None:
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError, ValueError):
        return None
    return metadata.get(key)
