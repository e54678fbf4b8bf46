"""The input cache's files on disk: the only code that makes, moves or removes them.

The cache's logic (which entry a file has, what its records hold, which entries go)
is the store's; every change to the cache folder goes through these functions, so
that ``output`` stays the one stage that writes files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from .writer import atomic_file


def make_folder(folder: Path) -> None:
    """``folder`` and its parents, if missing."""
    folder.mkdir(parents=True, exist_ok=True)


def write_json(path: Path, record: Any, *, errors: str = "strict") -> None:
    """``record`` as JSON at ``path``, whole or not at all; ``errors`` as ``str.encode`` takes it."""
    with atomic_file(path) as stream:
        stream.write(json.dumps(record, ensure_ascii=False).encode("utf-8", errors))


def move_file(source: Path, target: Path) -> None:
    """``source`` renamed to ``target`` in one step (both in the cache folder's file system)."""
    os.replace(source, target)


def remove_file(path: Path) -> None:
    """``path`` gone, if it was there."""
    path.unlink(missing_ok=True)


def remove_folder(folder: Path) -> None:
    """``folder`` and everything in it, as far as it can be removed."""
    shutil.rmtree(folder, ignore_errors=True)
