"""The input cache: an unchanged input file's checked rows and first pass, kept for the next build."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..output import cache_files

EDGE_BYTES = 1 << 16

CACHE_FOLDER_NAME = "nrllm-report"
SITE_ENTRY_PREFIX = "site-"
SITE_STAMP = "site.json"  # names the site an entry belongs to; its time is when that site was last built
INPUTS_FOLDER = "inputs"
STALE_SECONDS = 30 * 86_400
# The most a cache folder holds; past it the entries of the sites built longest ago go first.
CACHE_LIMIT_BYTES = 5 * 1024**3


def default_cache_root(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/nrllm-report``, or ``~/.cache/nrllm-report`` (a relative XDG path is ignored,
    as the spec says)."""
    base = environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / CACHE_FOLDER_NAME


def site_entry(root: Path, out: Path) -> Path:
    """The cache entry of the site built at ``out`` (a resolved path): one folder per site."""
    digest = hashlib.sha256(str(out).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return root / f"{SITE_ENTRY_PREFIX}{digest}"


def open_site_entry(root: Path, out: Path) -> Path:
    """Make the site's entry (its stamp says which site and when it was built); returns its input folder."""
    entry = site_entry(root, out)
    cache_files.make_folder(entry / INPUTS_FOLDER)
    cache_files.write_json(entry / SITE_STAMP, {"out": str(out)}, errors="surrogateescape")
    return entry / INPUTS_FOLDER


def prune_cache_root(root: Path, *, current: Path | None, now: float | None = None,
                     limit: int | None = None) -> None:
    """Remove the entries of sites not built for 30 days, then the oldest until the total is under the limit.

    Only folders that are entries of this tool (a ``site-`` name and a stamp) are touched.
    """
    now = time.time() if now is None else now
    limit = CACHE_LIMIT_BYTES if limit is None else limit
    entries = sorted(_site_entries(root), key=lambda pair: pair[1])
    kept: list[tuple[Path, float]] = []
    for entry, built in entries:
        if entry != current and now - built > STALE_SECONDS:
            cache_files.remove_folder(entry)
        else:
            kept.append((entry, built))
    sizes = {entry: _folder_bytes(entry) for entry, _built in kept}
    total = sum(sizes.values())
    oldest_first = [entry for entry, _built in kept if entry != current] + ([current] if current in sizes else [])
    for entry in oldest_first:
        if total <= limit:
            break
        cache_files.remove_folder(entry)
        total -= sizes[entry]


def _site_entries(root: Path) -> list[tuple[Path, float]]:
    found = []
    try:
        children = list(root.iterdir())
    except OSError:
        return []
    for entry in children:
        try:
            if entry.name.startswith(SITE_ENTRY_PREFIX) and entry.is_dir() and not entry.is_symlink():
                found.append((entry, (entry / SITE_STAMP).stat().st_mtime))
        except OSError:
            continue  # not an entry of ours (no stamp): left alone
    return found


def _folder_bytes(folder: Path) -> int:
    total = 0
    for path, _folders, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(path, name)).st_size
            except OSError:
                pass
    return total


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

    def key(self, path: Path, named: Path | None = None) -> str | None:
        """The entry key of the file at ``path``; ``named``: the path it will have once renamed
        (a rename keeps size, time and inode), so a file can be cached before it is moved in."""
        try:
            stat = path.stat()
        except OSError:
            return None
        if not path.is_file():
            return None
        where = (named or path).resolve()
        identity = f"{self.salt}|{where}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}"
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
        if not isinstance(about, dict) or not all(name in about
                                                  for name in ("rows_read", "problems", "buckets", "rows")):
            return None
        listed = about.get("batches")
        if listed is None:  # an entry written before a batch held more than one bucket
            if not len(about["buckets"]) == len(about["rows"]) == batches:
                return None
        elif not (isinstance(listed, list) and len(about["buckets"]) == len(about["rows"]) == len(listed)
                  and listed == sorted(listed) and (not listed or listed[-1] < batches)):
            return None
        self.used.add(key)
        return path, about

    def store(self, key: str, written: Path, *, about: dict[str, Any]) -> Path:
        """Keep the Arrow file ``written`` (moved, not copied) with ``about``; returns where it is now."""
        try:
            cache_files.make_folder(self.folder)
            self.write_json(f"{key}.json", about)
            cache_files.move_file(written, self.folder / f"{key}.arrow")
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
        cache_files.remove_file(self.folder / f"{key}.swept.json")

    def store_swept(self, key: str, record: dict[str, Any]) -> None:
        """Keep the first pass's record; the entry's partition files it does not name go."""
        named = {name for files in record["partitions"] for name in files}
        try:
            for stale in self.folder.glob(f"{key}.kept-*"):
                if stale.name not in named:
                    cache_files.remove_file(stale)
            self.write_json(f"{key}.swept.json", record)
        except OSError:
            return  # the next build sweeps this input again

    def write_json(self, name: str, record: Any) -> None:
        cache_files.write_json(self.folder / name, record)

    def read_json(self, name: str) -> Any:
        return json.loads((self.folder / name).read_text(encoding="utf-8"))

    def forget(self, key: str | None) -> None:
        """An entry that this build read but that no build will read again (a replaced archive's)."""
        self.used.discard(key or "")

    def prune(self) -> None:
        """Remove the entries this build did not use."""
        if not self.folder.is_dir():
            return
        for entry in self.folder.iterdir():
            if entry.name.split(".", 1)[0] not in self.used:
                cache_files.remove_file(entry)


def cache_folders_in(folder: Path) -> list[Path]:
    """``folder`` and the folders in it: a build's input cache, a site's entry, or a cache folder of them."""
    try:
        inside = sorted(entry for entry in folder.iterdir() if entry.is_dir())
    except OSError:
        return []
    # A cache folder holds an entry per site, each with its input cache in ``inputs/``.
    return [folder, *inside, *[entry / INPUTS_FOLDER for entry in inside if (entry / INPUTS_FOLDER).is_dir()]]
