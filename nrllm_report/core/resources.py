"""Where the templates, catalogs and sample live: inside the installed package, or beside it in a checkout."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent


def resource_path(name: str) -> Path:
    """``name`` inside the package (a built wheel) or at the repository's top level (a checkout)."""
    packaged = PACKAGE_DIR / name
    if packaged.is_dir():
        return packaged
    return PACKAGE_DIR.parent / name


def sample_inputs() -> list[str]:
    """The bundled sample export, used when a command is given no INPUT."""
    return [str(resource_path("sample_data") / "runs.jsonl")]


def sample_servers() -> list[str]:
    """The MCP server ids of the sample, so ids with ``_`` in them resolve without ``--servers``."""
    listing = resource_path("sample_data") / "servers.txt"
    return [line.strip() for line in listing.read_text(encoding="utf-8").splitlines() if line.strip()]
