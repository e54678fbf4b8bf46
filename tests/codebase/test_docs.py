"""The README and docs/ hold together: every relative link points at a file that exists (and at a
heading of it, where it names one), every docs page is linked from the README, and the README keeps
what CI and newcomers read in it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from site_helpers import REPO

PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#* *$", re.MULTILINE)


def prose(path: Path) -> str:
    """The page without its fenced code blocks, whose brackets are not links."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def anchors(path: Path) -> set[str]:
    """The fragments a heading of ``path`` can be linked by, spelled as GitHub spells them."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in HEADING.findall(prose(path)):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    return [target for target in LINK.findall(prose(path)) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no such heading")
    assert broken == []


def test_a_broken_link_and_a_broken_anchor_are_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Two words\n\n[a](gone.md) [b](#two-words) [c](#none)\n"
                    "```\n[not a link](nowhere.md)\n```\n", encoding="utf-8")
    assert relative_links(page) == ["gone.md", "#two-words", "#none"]
    assert anchors(page) == {"title", "two-words"}


def test_the_readme_links_every_docs_page() -> None:
    linked = {(REPO / target.partition("#")[0]).resolve() for target in relative_links(REPO / "README.md")}
    assert {page.resolve() for page in (REPO / "docs").glob("*.md")} <= linked


def test_the_readme_shows_every_screenshot() -> None:
    shown = {target for target in relative_links(REPO / "README.md") if target.startswith("docs/screenshots/")}
    assert shown == {f"docs/screenshots/{image.name}" for image in (REPO / "docs" / "screenshots").glob("*.png")}


def test_the_readme_keeps_the_quick_start_and_no_benchmark_log() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "    python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/nrllm-report build --out site\n" in readme
    assert "    python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest\n" in readme
    commit = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
    assert commit.findall(readme) == []


@pytest.mark.slow
def test_the_readmes_tests_by_feature_are_the_collected_tests() -> None:
    """The README's table of tests by feature counts what pytest collects, folder by folder."""
    completed = python_script("scripts/test_counts.py", "--check")
    assert completed.returncode == 0, completed.stdout + completed.stderr


def python_script(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / script), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)
