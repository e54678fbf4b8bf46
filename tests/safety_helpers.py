"""Helpers for the issue-5 safety tests: generated exports, snapshots of folders, parsed pages, real processes."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import markup
from markup import Node

from nrllm_report.output.writer import RETIRED_FOLDER_PREFIX, RETIRED_INFIX, STAGING_INFIX

REPO = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------- inputs


@lru_cache(maxsize=1)
def generator() -> ModuleType:
    """scripts/generate_export.py, the sample's generator, loaded once."""
    spec = importlib.util.spec_from_file_location("generate_export", REPO / "scripts" / "generate_export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_export(path: Path, runs: int, seed: int) -> int:
    """A realistic seeded export of ``runs`` runs (the format from the suffix); returns the rows written."""
    rows: int = generator().write_export(path, runs, seed)
    return rows


def previous_and_large_exports(folder: Path, *, previous_runs: int, large_runs: int) -> tuple[Path, Path]:
    """A small export for the previous site, and a large one for a build that is stopped part-way."""
    small, large = folder / "small.jsonl", folder / "large.jsonl"
    write_export(small, previous_runs, seed=3)
    write_export(large, large_runs, seed=4)
    return small, large


def write_jsonl(path: Path, rows: Iterable[Any]) -> Path:
    """Rows as JSON Lines, non-ASCII kept as it is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as stream:
        for row in rows:
            stream.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


# --------------------------------------------------------------------------- folders


def snapshot(folder: Path) -> dict[str, tuple[object, ...]]:
    """Every entry under ``folder`` (hidden ones included) with its bytes' hash, size, mode and mtime."""
    entries: dict[str, tuple[object, ...]] = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        info = path.lstat()
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            entries[relative] = ("link", os.readlink(path), info.st_mtime_ns)
        elif path.is_dir():
            entries[relative] = ("dir", info.st_mode, info.st_mtime_ns)
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            entries[relative] = ("file", digest, info.st_size, info.st_mode, info.st_mtime_ns)
    return entries


def content_hashes(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under ``folder``: what a site 'is', byte for byte."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def site_files(site: Path) -> list[str]:
    return sorted(path.relative_to(site).as_posix() for path in site.rglob("*") if path.is_file())


def html_pages(site: Path) -> list[Path]:
    return sorted(path for path in site.rglob("*.html") if path.is_file())


def leftovers(out: Path) -> list[str]:
    """Staging or retired folders of builds into ``out``, beside it, and a previous site still
    being removed inside it (named ``out/…``)."""
    beside = [
        entry.name
        for entry in out.parent.iterdir()
        if entry.name.startswith(f".{out.name}") and (STAGING_INFIX in entry.name or RETIRED_INFIX in entry.name)
    ]
    inside = [f"{out.name}/{entry.name}" for entry in (out.iterdir() if out.is_dir() else [])
              if entry.name.startswith(RETIRED_FOLDER_PREFIX)]
    return sorted(beside + inside)


def staging_folders(out: Path) -> list[Path]:
    return [entry for entry in out.parent.iterdir() if entry.name.startswith(f".{out.name}{STAGING_INFIX}")]


def count_files(folder: Path) -> int:
    try:
        return sum(len(files) for _root, _folders, files in os.walk(folder))
    except OSError:
        return 0


# --------------------------------------------------------------------------- processes


def paused_build_command(gate: Path, pages: int, *args: object) -> list[str]:
    """``nrllm-report build ...`` as a real process that pauses after ``pages`` run pages (see paused_build.py)."""
    gate.mkdir(parents=True, exist_ok=True)
    script = Path(__file__).resolve().parent / "paused_build.py"
    return [sys.executable, str(script), str(gate), str(pages), "build", *(str(arg) for arg in args)]


def wait_until_paused(process: subprocess.Popen[str], gate: Path, deadline_seconds: float = 120) -> None:
    """Wait until a process of the build has paused at the gate; fail if the build ends first.

    The build cannot get past the gate on its own, so nothing here depends on how fast it runs:
    the deadline only bounds a test that would otherwise hang.
    """
    deadline = time.monotonic() + deadline_seconds
    while not any(gate.glob("paused-*")):
        if process.poll() is not None:
            stderr = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"the build ended (exit {process.returncode}) before it paused: {stderr}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the build did not reach its pause within {deadline_seconds} s")
        time.sleep(0.005)


def release(gate: Path) -> None:
    """Let a paused build go on."""
    (gate / "go").touch()


def session_processes(session: int) -> list[int]:
    """The pids of the processes of ``session`` that have not ended (zombies have), read from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # it ended while we looked
        state, _parent, _group, session_id = stat[stat.rindex(")") + 2 :].split()[:4]
        if int(session_id) == session and state not in ("Z", "X"):
            found.append(int(entry))
    return sorted(found)


def alive_after(session: int, seconds: float) -> list[int]:
    """The processes of ``session`` still there ``seconds`` from now; returns as soon as there are none."""
    deadline = time.monotonic() + seconds
    while (alive := session_processes(session)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return alive


# --------------------------------------------------------------------------- pages


@dataclass
class ParsedPage:
    """A page as the safety tests read it: its elements in order, its text, its inline styles.

    Built from the tree ``markup.parse_html`` gives (the tree a browser builds), with
    attribute names in lower case, as HTML compares them.
    """

    tags: list[tuple[str, list[tuple[str, str | None]]]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    styles: list[str] = field(default_factory=list)
    text_by_class: dict[str, list[str]] = field(default_factory=dict)
    links: list[tuple[str, str]] = field(default_factory=list)  # (href, the link's text)

    def attributes(self) -> Iterable[tuple[str, str, str | None]]:
        for tag, attrs in self.tags:
            for name, value in attrs:
                yield tag, name, value

    def hrefs(self, tag: str = "a") -> list[str]:
        return [
            value or "" for name_tag, attrs in self.tags if name_tag == tag for name, value in attrs if name == "href"
        ]

    def csp(self) -> list[str]:
        return [
            dict(attrs).get("content") or ""
            for tag, attrs in self.tags
            if tag == "meta" and (dict(attrs).get("http-equiv") or "").lower() == "content-security-policy"
        ]

    def read(self, node: Node, classes: tuple[str, ...] = ()) -> None:
        """Add ``node`` and everything under it; ``classes`` are those of its ancestors."""
        if node.tag != "#document":
            self.tags.append((node.tag, [(name.lower(), value) for name, value in node.attrs.items()]))
        if node.tag == "style":
            self.styles.append(node.raw_text())
            return
        if node.tag == "a":
            self.links.append((node.attrs.get("href", ""), node.raw_text()))
        classes = (*classes, *node.classes)
        for child in node.children:
            if isinstance(child, Node):
                self.read(child, classes)
                continue
            self.text.append(child)
            for name in classes:
                self.text_by_class.setdefault(name, []).append(child)


def parse_html(text: str) -> ParsedPage:
    page = ParsedPage()
    page.read(markup.parse_html(text))
    return page


def parse_page(path: Path) -> ParsedPage:
    return parse_html(path.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- small crafted runs

DAY = 86_400
FIRST_CRDATE = 1_788_000_000  # 2026-08-29 UTC


def run_rows(
    run: str, *, day: int = 0, tool: str = "mcp_github_create_issue", outcomes: Iterable[str] = ("ok",),
    server: str | None = None,
) -> list[dict[str, Any]]:
    """A small valid run: a request, one tool step per outcome, and the model's final answer."""
    crdate = FIRST_CRDATE + day * DAY
    rows: list[dict[str, Any]] = [
        {"run": run, "sequence": 0, "kind": "request", "round": 1, "crdate": crdate,
         "payload": {"messagesSent": [{"role": "user"}], "toolSpecs": [tool]}},
    ]
    for index, outcome in enumerate(outcomes, 1):
        row: dict[str, Any] = {
            "run": run, "sequence": index, "kind": "tool", "round": 1, "duration_ms": 40.0 + index,
            "crdate": crdate + index,
            "payload": {"toolName": tool, "toolIsError": outcome != "ok", "toolOutcome": outcome},
        }
        if server is not None:
            row["server"] = server
        rows.append(row)
    rows.append(
        {"run": run, "sequence": len(rows), "kind": "llm", "round": 2, "duration_ms": 900.0, "crdate": crdate + 60,
         "payload": {"finishReason": "stop", "promptTokens": 120, "completionTokens": 30, "totalTokens": 150}}
    )
    return rows
