"""Where the templates, catalogs and sample live: inside the installed package, or beside it in a checkout."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent


# The stages whose code shapes what the input cache keeps: checked rows, their buckets,
# the sweep's partitions and figures. Not ``site``: a page's look is no reason to check again.
CACHED_STAGES = ("core", "readers", "check", "store", "aggregate", "pipeline")


@lru_cache(maxsize=1)
def code_key() -> str:
    """A hash of the code of ``CACHED_STAGES``: part of every input cache entry's key."""
    return files_key([PACKAGE_DIR / stage for stage in CACHED_STAGES], {".py"})


def files_key(roots: list[Path], suffixes: set[str]) -> str:
    """A hash of the files with ``suffixes`` under ``roots``: their paths and their bytes."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in suffixes:
                digest.update(path.relative_to(root).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def resource_path(name: str) -> Path:
    """``name`` inside the package (a built wheel) or at the repository's top level (a checkout)."""
    packaged = PACKAGE_DIR / name
    if packaged.is_dir():
        return packaged
    return PACKAGE_DIR.parent / name


# The sample's tables besides the events (issue 20), read with them when a command is given no INPUT.
SAMPLE_TABLES = ("tx_nrllm_agentrun", "tx_nrllm_telemetry", "tx_nrllm_governance_event", "tx_nrllm_mcp_tool",
                 "tx_nrllm_mcp_server")


def sample_inputs() -> list[str]:
    """The bundled sample export, used when a command is given no INPUT: the events and the other tables."""
    folder = resource_path("sample_data")
    return [str(folder / "runs.jsonl"), *(str(folder / f"{table}.jsonl") for table in SAMPLE_TABLES)]


def sample_servers() -> list[str]:
    """The MCP server ids of the sample, so ids with ``_`` in them resolve without ``--servers``."""
    listing = resource_path("sample_data") / "servers.txt"
    return [line.strip() for line in listing.read_text(encoding="utf-8").splitlines() if line.strip()]
