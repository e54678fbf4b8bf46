"""The input cache: an unchanged input file's checked rows and first pass, kept for the next build."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..output.writer import atomic_file

EDGE_BYTES = 1 << 16


class InputCache:
    """Checked rows of each input file, kept beside the site for the next build to reuse.

    An entry is keyed by the file's path, size, modification time and inode and by
    ``salt`` (the code, catalogs and options that shape the check), so a changed file
    or a changed tool is checked again. Entries no build used last are pruned.
    """

    def __init__(self, folder: Path, salt: str) -> None:
        self.folder = folder
        self.salt = salt
        self.used: set[str] = set()

    def key(self, path: Path) -> str | None:
        try:
            stat = path.stat()
        except OSError:
            return None
        if not path.is_file():
            return None
        identity = f"{self.salt}|{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}"
        digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass"))
        try:  # the file's two ends too: an edit in place that kept size and time is still seen there
            with path.open("rb") as stream:
                digest.update(stream.read(EDGE_BYTES))
                if stat.st_size > 2 * EDGE_BYTES:
                    stream.seek(-EDGE_BYTES, os.SEEK_END)
                    digest.update(stream.read(EDGE_BYTES))
        except OSError:
            return None
        return digest.hexdigest()[:32]

    def load(self, key: str) -> tuple[Path, dict[str, Any]] | None:
        """The entry's Arrow file and what was kept beside it, or None when it is missing or broken."""
        path = self.folder / f"{key}.arrow"
        try:
            about = self.read_json(f"{key}.json")
            batches = pa.ipc.open_file(pa.memory_map(str(path))).num_record_batches
        except (OSError, ValueError, pa.ArrowException):
            return None
        if not isinstance(about, dict) or not all(name in about for name in ("rows_read", "problems", "buckets", "rows")):
            return None
        if not len(about["buckets"]) == len(about["rows"]) == batches:
            return None
        self.used.add(key)
        return path, about

    def store(self, key: str, written: Path, about: dict[str, Any]) -> Path:
        """Keep the Arrow file ``written`` (moved, not copied) with ``about``; returns where it is now."""
        try:
            self.folder.mkdir(exist_ok=True)
            self.write_json(f"{key}.json", about)
            os.replace(written, self.folder / f"{key}.arrow")
        except OSError:
            return written  # a cache that cannot be written costs the next build time, nothing else
        self.used.add(key)
        return self.folder / f"{key}.arrow"

    def load_swept(self, key: str) -> dict[str, Any] | None:
        """What the build's first pass made of the entry's rows (``spill.sweep``), if all its files are there."""
        try:
            record = self.read_json(f"{key}.swept.json")
            if all((self.folder / name).is_file() for files in record["partitions"] for name in files):
                return record if isinstance(record, dict) else None
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None

    def drop_swept(self, key: str) -> None:
        """Forget the entry's first pass before its files are written anew."""
        (self.folder / f"{key}.swept.json").unlink(missing_ok=True)

    def store_swept(self, key: str, record: dict[str, Any]) -> None:
        """Keep the first pass's record; the entry's partition files it does not name go."""
        named = {name for files in record["partitions"] for name in files}
        try:
            for stale in self.folder.glob(f"{key}.kept-*"):
                if stale.name not in named:
                    stale.unlink(missing_ok=True)
            self.write_json(f"{key}.swept.json", record)
        except OSError:
            return  # the next build sweeps this input again

    def write_json(self, name: str, record: Any) -> None:
        with atomic_file(self.folder / name) as stream:
            stream.write(json.dumps(record, ensure_ascii=False).encode("utf-8"))

    def read_json(self, name: str) -> Any:
        return json.loads((self.folder / name).read_text(encoding="utf-8"))

    def prune(self) -> None:
        """Remove the entries this build did not use."""
        if not self.folder.is_dir():
            return
        for entry in self.folder.iterdir():
            if entry.name.split(".", 1)[0] not in self.used:
                entry.unlink(missing_ok=True)


def cache_folders_in(folder: Path) -> list[Path]:
    """``folder`` and the folders in it: a build's input cache, or a folder of them."""
    try:
        return [folder, *sorted(entry for entry in folder.iterdir() if entry.is_dir())]
    except OSError:
        return []
