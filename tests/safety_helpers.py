"""Helpers for the issue-5 safety tests: generated exports, snapshots of folders, parsed pages, real processes."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

from nrllm_report.output.writer import RETIRED_INFIX, STAGING_INFIX

REPO = Path(__file__).resolve().parent.parent

# --------------------------------------------------------------------------- inputs


@lru_cache(maxsize=1)
def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_export", REPO / "scripts" / "generate_export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_export(path: Path, runs: int, seed: int) -> int:
    """A realistic seeded export of ``runs`` runs (the format from the suffix); returns the rows written."""
    rows: int = _generator().write_export(path, runs, seed)
    return rows


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
    """Staging or retired folders of builds into ``out``, beside it."""
    return sorted(
        entry.name
        for entry in out.parent.iterdir()
        if entry.name.startswith(f".{out.name}") and (STAGING_INFIX in entry.name or RETIRED_INFIX in entry.name)
    )


def staging_folders(out: Path) -> list[Path]:
    return [entry for entry in out.parent.iterdir() if entry.name.startswith(f".{out.name}{STAGING_INFIX}")]


def count_files(folder: Path) -> int:
    try:
        return sum(len(files) for _root, _folders, files in os.walk(folder))
    except OSError:
        return 0


# --------------------------------------------------------------------------- processes


def cli_command(*args: object) -> list[str]:
    """The real command line of ``nrllm-report`` in this interpreter."""
    return [sys.executable, "-m", "nrllm_report", *(str(arg) for arg in args)]


def run_cli(*args: object, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``nrllm-report`` as a real process; stdout and stderr captured as text."""
    return subprocess.run(
        cli_command(*args), cwd=cwd, capture_output=True, text=True, encoding="utf-8", timeout=timeout, check=False
    )


# --------------------------------------------------------------------------- pages


@dataclass
class ParsedPage:
    """What an HTML parser sees in a page: its elements in order, its text, its inline styles."""

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
        return [value or "" for name_tag, attrs in self.tags if name_tag == tag for name, value in attrs if name == "href"]

    def csp(self) -> list[str]:
        return [
            dict(attrs).get("content") or ""
            for tag, attrs in self.tags
            if tag == "meta" and (dict(attrs).get("http-equiv") or "").lower() == "content-security-policy"
        ]


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = ParsedPage()
        self._in_style = False
        self._open_classes: list[tuple[str, str | None]] = []
        self._link: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.tags.append((tag, attrs))
        if tag == "style":
            self._in_style = True
            self.page.styles.append("")
        if tag == "a":
            self._link = [dict(attrs).get("href") or "", ""]
        if tag not in ("meta", "link", "br", "img", "input", "rect", "line"):
            self._open_classes.append((tag, dict(attrs).get("class")))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.page.tags.append((tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False
        if tag == "a" and self._link is not None:
            self.page.links.append((self._link[0], self._link[1]))
            self._link = None
        for index in range(len(self._open_classes) - 1, -1, -1):
            if self._open_classes[index][0] == tag:
                del self._open_classes[index:]
                break

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.page.styles[-1] += data
            return
        self.page.text.append(data)
        if self._link is not None:
            self._link[1] += data
        for _tag, css_class in self._open_classes:
            if css_class:
                for name in css_class.split():
                    self.page.text_by_class.setdefault(name, []).append(data)


def parse_html(text: str) -> ParsedPage:
    parser = _PageParser()
    parser.feed(text)
    parser.close()
    return parser.page


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
