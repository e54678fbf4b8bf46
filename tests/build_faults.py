"""Ways to make a build fail part-way, shared by the tests of the output folder and the archive."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nrllm_report.output.writer import STAGING_INFIX
from nrllm_report.site.kit import PageKit


def fail_on_template(monkeypatch: pytest.MonkeyPatch, failing_template: str) -> None:
    """Rendering ``failing_template`` raises."""
    original = PageKit.render

    def render(self: PageKit, template: str, path: str, **context: Any) -> str:
        if template == failing_template:
            raise RuntimeError(f"boom while rendering {path}")
        return original(self, template, path, **context)

    monkeypatch.setattr(PageKit, "render", render)


def fail_writes(monkeypatch: pytest.MonkeyPatch, full: Callable[[Path], bool]) -> None:
    """Writing a file for which ``full(path)`` is true fails as a full disk does."""
    original = Path.write_bytes

    def write_bytes(self: Path, data: Any) -> int:
        if full(self):
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return original(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)


def fail_when_disk_is_full(monkeypatch: pytest.MonkeyPatch, after_writes: int) -> None:
    """The disk is full after ``after_writes`` files."""
    writes = [0]

    def full(_path: Path) -> bool:
        writes[0] += 1
        return writes[0] > after_writes

    fail_writes(monkeypatch, full)


def fail_to_swap_the_site_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last step fails: the finished site cannot be moved into place (after the old one was moved aside)."""
    original = os.replace

    def replace(source: Any, destination: Any) -> None:
        if STAGING_INFIX in Path(source).name:
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(source))
        original(source, destination)

    monkeypatch.setattr(os, "replace", replace)
