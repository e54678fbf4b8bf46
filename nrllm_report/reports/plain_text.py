"""Figures as the command line's English lines and tables write them (``gate``, ``diff``)."""

from __future__ import annotations

from collections.abc import Sequence


def percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def interval_text(interval: tuple[float, float] | None) -> str:
    return "-" if interval is None else f"{percent(interval[0])}-{percent(interval[1])}"


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells as lines, each column as wide as its widest cell."""
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
