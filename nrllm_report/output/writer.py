"""The only code that writes files: canonical records, and the site (see ``SiteWriter``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Union

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import OutputError
from ..core.schema import CANONICAL_SCHEMA, STEP_FIELD_NAMES, Step

RECORD_BATCH_ROWS = 65_536

# A table, a stream of tables (normalize's merge, in bounded memory), or steps one by one.
Records = Union[pa.Table, "TableStream", Iterable[Step]]
RecordWriter = Callable[[Path, Records], None]


class TableStream:
    """Tables of canonical records that follow one another, written as if they were one table."""

    def __init__(self, tables: Iterable[pa.Table]) -> None:
        self.tables = tables


def _batches(records: Records) -> Iterator[pa.RecordBatch]:
    if isinstance(records, pa.Table):
        return iter(records.to_batches(max_chunksize=RECORD_BATCH_ROWS))
    if isinstance(records, TableStream):
        return _even_batches(records.tables)
    return _record_batches(records)


def _even_batches(tables: Iterable[pa.Table]) -> Iterator[pa.RecordBatch]:
    """Batches of exactly ``RECORD_BATCH_ROWS`` but the last, as one table's ``to_batches`` gives:
    Parquet's row groups, and so its bytes, do not depend on how the stream was cut."""
    held: list[pa.Table] = []
    rows = 0
    for table in tables:
        held.append(table)
        rows += table.num_rows
        while rows >= RECORD_BATCH_ROWS:
            whole = pa.concat_tables(held).combine_chunks()
            yield whole.slice(0, RECORD_BATCH_ROWS).to_batches()[0]
            held, rows = [whole.slice(RECORD_BATCH_ROWS)], rows - RECORD_BATCH_ROWS
    if rows:
        yield from pa.concat_tables(held).combine_chunks().to_batches()


def write_records_jsonl(out: Path, records: Records) -> None:
    """Canonical records as JSON Lines (camelCase keys, in the canonical order)."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    with atomic_file(out) as stream:
        for batch in _batches(records):
            lines = [encode(record) for record in batch.to_pylist()]
            if lines:
                stream.write(("\n".join(lines) + "\n").encode("utf-8"))


def write_records_parquet(out: Path, records: Records) -> None:
    with atomic_file(out) as stream:
        with pq.ParquetWriter(stream, CANONICAL_SCHEMA) as parquet:
            for batch in _batches(records):
                parquet.write_batch(batch)


def _record_batches(steps: Iterable[Step]) -> Iterator[pa.RecordBatch]:
    columns: list[list[object]] = [[] for _ in STEP_FIELD_NAMES]
    for step in steps:
        for column, value in zip(columns, step.values()):
            column.append(value)
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


class atomic_file:
    """A temporary file beside ``path`` that replaces it only when the block ends without error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> BinaryIO:
        descriptor, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        os.fchmod(descriptor, 0o644)  # mkstemp's 0600 would hide a published file from the web server
        self.temporary = Path(temporary)
        self.stream = os.fdopen(descriptor, "wb")
        return self.stream

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stream.close()
        if kind is None:
            os.replace(self.temporary, self.path)
        else:
            self.temporary.unlink(missing_ok=True)


# ---------------------------------------------------------------- the site

MARKER_NAME = ".nrllm-report-site.json"
STAGING_INFIX = ".nrllm-staging-"
RETIRED_INFIX = ".nrllm-retired-"
# Inside the staging folder: this build's scratch files, removed before the swap.
WORK_FOLDER = ".nrllm-work"
# Inside the new site: the previous one while it is being removed.
RETIRED_FOLDER_PREFIX = ".nrllm-retired-"
# A retired site with this many pages is removed in the background (a hundred
# thousand files take a second to unlink); a smaller one right away.
BACKGROUND_REMOVAL_PAGES = 5_000
MAX_INHERITED_DESCRIPTOR = 65_536
LOCK_ATTEMPTS = 20


class SiteWriter:
    """Writes a site into a fresh folder beside ``out`` and swaps it in when it is complete.

    It owns ``out`` only if ``out`` is empty, absent, or holds the marker this tool
    writes. The lock is an ``flock`` on the ``out`` folder itself (made empty when it
    is absent) and on the staging folder that becomes ``out``, so a second build into
    the same ``out`` is refused from the first build's start to its end, and nothing
    but the staging folder stands beside ``out`` while a build runs. An interrupted or
    failed build removes its staging folder and leaves ``out`` as it was.
    """

    def __init__(self, out: Path, force: bool = False) -> None:
        self.out = Path(os.path.abspath(out))
        if self.out.is_symlink():
            # A link to the site (``current -> releases/v1``) stays: the site it points to is rebuilt.
            self.out = Path(os.path.realpath(self.out))
        self.force = force
        self.parent = self.out.parent
        self.staging = self.parent / f".{self.out.name}{STAGING_INFIX}{os.getpid()}"
        # Scratch files of this build (checked steps by partition), gone before the swap.
        self.work = self.staging / WORK_FOLDER
        self._written: set[str] = set()
        self._folders: set[str] = set()
        self._staging, self._out = str(self.staging), str(self.out)
        self._locks: list[int] = []
        self._made_out = False
        self._retired: Path | None = None
        self._after_swap: list[tuple[Path, Path]] = []
        self.previous_manifest: dict[str, str] = {}
        self.written_keys: dict[str, str] = {}  # what ``write_text`` wrote in this process: path -> content key

    # -- lifecycle

    def __enter__(self) -> SiteWriter:
        self._check_out()
        self._lock_out()
        try:
            self._clean_leftovers()
            self.previous_manifest = self._read_manifest()
            self.staging.mkdir()
            self._locks.append(_locked_folder(self.staging, self.out))
            self.work.mkdir()
        except BaseException:
            self._release(failed=True)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._release(failed=kind is not None)
        if isinstance(error, OSError):
            # A full disk or an unwritable folder is the user's to fix: one line, not a traceback.
            reason = error.strerror or str(error)
            in_removed_folder = STAGING_INFIX in str(error.filename)
            where = f": {error.filename!r}" if error.filename and not in_removed_folder else ""
            raise OutputError(
                f"{self.out}: the build stopped: {reason}{where}; the previous site is unchanged"
            ) from None

    def _release(self, failed: bool) -> None:
        """Remove what this build made, unlock, then remove the previous site (maybe in the background)."""
        try:
            if self.staging.exists():
                _remove_tree(self.staging)
            for temporary, _target in self._after_swap if failed else ():
                temporary.unlink(missing_ok=True)
            if failed and self._made_out:
                with contextlib.suppress(OSError):
                    self.out.rmdir()  # the empty folder this build made to hold the lock
        finally:
            for descriptor in self._locks:
                os.close(descriptor)
            self._locks = []
        # After the locks are gone: a detached remover must not hold a copy of them.
        if self._retired is not None:
            retired, self._retired = self._retired, None
            if len(self.previous_manifest) >= BACKGROUND_REMOVAL_PAGES:
                _remove_tree_in_background(retired)
            else:
                _remove_tree(retired)

    def _check_out(self) -> None:
        if self.out.exists() and not self.out.is_dir():
            raise OutputError(f"{self.out}: exists and is not a folder; choose another --out")
        if not self.parent.is_dir():
            raise OutputError(f"{self.out}: the folder {str(self.parent)!r} does not exist")
        if self.force or not self.out.is_dir():
            return
        if (self.out / MARKER_NAME).is_file() or not any(self.out.iterdir()):
            return
        raise OutputError(
            f"{self.out}: is a folder with files that nrllm-report did not write; "
            "choose an empty or new folder, or pass --force to replace it"
        )

    def _lock_out(self) -> None:
        """Lock the folder that is ``out`` now; a build that swapped another in meanwhile makes us try again."""
        for _attempt in range(LOCK_ATTEMPTS):
            if not self.out.exists():
                try:
                    self.out.mkdir()
                    self._made_out = True
                except FileExistsError:
                    pass
                except OSError as error:
                    raise OutputError(f"{self.out}: cannot be created: {error.strerror}") from None
            try:
                descriptor = _locked_folder(self.out, self.out)
            except FileNotFoundError:
                continue
            if _same_folder(descriptor, self.out):
                self._locks.append(descriptor)
                return
            os.close(descriptor)
        raise OutputError(f"{self.out}: another nrllm-report build keeps replacing this folder; try again later")

    def _clean_leftovers(self) -> None:
        """Folders of builds that were killed; we hold the lock, so none of them is live."""
        prefix = f".{self.out.name}"
        for entry in self.parent.iterdir():
            name = entry.name
            if not name.startswith(prefix) or not entry.is_dir():
                continue
            rest = name[len(prefix):]
            if rest.startswith(RETIRED_INFIX) and self._made_out:
                # Killed mid-swap: the previous site comes back, locked before it moves.
                self._locks.append(_locked_folder(entry, self.out))
                os.replace(entry, self.out)
                self._made_out = False
            elif rest.startswith((STAGING_INFIX, RETIRED_INFIX)):
                _remove_tree(entry)
        for entry in self.out.iterdir():  # a previous site a killed remover left inside this one
            if entry.name.startswith(RETIRED_FOLDER_PREFIX) and entry.is_dir():
                _remove_tree(entry)

    def _read_manifest(self) -> dict[str, str]:
        try:
            marker = json.loads((self.out / MARKER_NAME).read_text(encoding="utf-8"))
            pages = marker.get("pages", {})
            return {str(path): str(key) for path, key in pages.items()} if isinstance(pages, dict) else {}
        except (OSError, ValueError, AttributeError):
            return {}

    # -- files

    def target(self, relative: str) -> str:
        """The staging path of a site file; refuses a path that would leave the site.

        Paths are plain strings here: a site has a hundred thousand files, and pathlib
        costs more per file than the system calls do.
        """
        parts = relative.split("/")
        if relative.startswith("/") or any(part in ("", ".", "..") or "\\" in part or "\x00" in part for part in parts):
            raise OutputError(f"refusing to write {relative!r}: it would leave the site folder")
        if relative in self._written:
            raise OutputError(f"refusing to write {relative!r} twice in one build")
        self._written.add(relative)
        folder, _, _name = relative.rpartition("/")
        if folder not in self._folders:
            os.makedirs(os.path.join(self._staging, folder), exist_ok=True)
            self._folders.add(folder)
        return self._claimed(relative)

    def write_text(self, relative: str, text: str) -> None:
        """Write a file whose content key is its bytes' hash (``written_keys``, for the manifest);
        the previous build's file is linked instead where it holds the same bytes, so a rebuild
        leaves an unchanged file as it was."""
        content = text.encode("utf-8")
        key = hashlib.sha256(content).hexdigest()
        self.written_keys[relative] = key
        path = self.target(relative)
        if not (self.reusable(relative, key) and self.link_previous(relative)):
            Path(path).write_bytes(content)

    def claim(self, relative: str) -> str:
        """Reserve a path for a file written later, possibly by a worker process."""
        return self.target(relative)

    def _claimed(self, relative: str) -> str:
        return f"{self._staging}/{relative}"

    def write_claimed_bytes(self, relative: str, content: bytes) -> None:
        descriptor = os.open(self._claimed(relative), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(descriptor, content)
        finally:
            os.close(descriptor)

    def reusable(self, relative: str, key: str) -> bool:
        """Whether the previous build wrote this file with this content key."""
        return self.previous_manifest.get(relative) == key

    def link_previous(self, relative: str) -> bool:
        """Hard-link (or copy) the previous build's file into the new site; False if it is gone."""
        previous, destination = f"{self._out}/{relative}", self._claimed(relative)
        try:
            os.link(previous, destination)
        except FileNotFoundError:
            return False  # listed in the manifest, but removed from the site since
        except OSError:  # a file system without hard links
            import shutil

            shutil.copyfile(previous, destination)
        return True

    def replace_after_swap(self, temporary: Path, target: Path) -> None:
        """Replace ``target`` by the finished ``temporary`` right after the swap, under the lock;
        a build that fails before then removes ``temporary`` and leaves ``target`` as it was."""
        self._after_swap.append((temporary, target))

    def commit(self, manifest: dict[str, str], about: dict[str, object]) -> None:
        """Write the marker with the manifest, then swap the finished site in."""
        _remove_tree(self.work)
        marker = dict(about, pages=dict(sorted(manifest.items())))
        with open(self.target(MARKER_NAME), "w", encoding="utf-8") as stream:
            json.dump(marker, stream, indent=1, sort_keys=True)  # in pieces: the manifest can be large
            stream.write("\n")
        retired = self.parent / f".{self.out.name}{RETIRED_INFIX}{os.getpid()}"
        os.replace(self.out, retired)
        try:
            os.replace(self.staging, self.out)
        except BaseException:
            if not self.out.exists():
                os.replace(retired, self.out)  # the new site did not go in: the previous one goes back
            raise
        inside = self.out / f"{RETIRED_FOLDER_PREFIX}{os.getpid()}"
        os.replace(retired, inside)  # nothing of ours beside the site while it is removed
        self._retired = inside
        for temporary, target in self._after_swap:
            os.replace(temporary, target)
        self._after_swap = []


def _locked_folder(folder: Path, out: Path) -> int:
    """An ``flock`` held on ``folder``; refused when another build holds it."""
    import fcntl

    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise OutputError(f"{out}: cannot open {str(folder)!r} to lock it: {error.strerror}") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        raise OutputError(
            f"{out}: another nrllm-report build is writing into this folder; try again when it has finished"
        ) from None
    return descriptor


def _same_folder(descriptor: int, path: Path) -> bool:
    try:
        here, there = os.fstat(descriptor), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _remove_tree_in_background(path: Path) -> None:
    """Remove a retired site in a detached process, so the build ends when its site is in.

    The process closes every inherited descriptor: the lock's (an flock held by a copy
    would outlive this build) and any pipe a caller waits on for the end of output.
    A build that finds the folder still there (``_clean_leftovers``) removes it too.
    """
    try:
        child = os.fork()
    except OSError:
        _remove_tree(path)
        return
    if child:
        os.waitpid(child, 0)
        return
    try:  # the child: fork once more, so that the remover is nobody's child and leaves no zombie
        if os.fork() == 0:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for standard in (0, 1, 2):
                os.dup2(null, standard)
            os.closerange(3, MAX_INHERITED_DESCRIPTOR)
            _remove_tree(path)
    finally:
        os._exit(0)


def _write_all(descriptor: int, content: bytes) -> None:
    view = memoryview(content)
    while view:
        view = view[os.write(descriptor, view):]


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def check_single_file(out: Path) -> None:
    """Refuse, before any work, a file ``write_single_file`` could not write."""
    if out.is_dir():
        raise OutputError(f"{out}: is a folder; give a file name")
    if not out.parent.is_dir():
        raise OutputError(f"{out}: the folder {str(out.parent)!r} does not exist")


def write_single_file(out: Path, text: str) -> None:
    """One file (a timeline, a report): written whole or not at all."""
    check_single_file(out)
    with atomic_file(out) as stream:
        stream.write(text.encode("utf-8"))
