"""The single-file timeline: ``nrllm-report timeline RUN [INPUT]... --out FILE.html``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from command_line import invoke, run_cli
from site_helpers import (
    REPO,
    Node,
    build_ok,
    cells,
    crafted_rows,
    failure_text,
    hrefs,
    page,
    parse_html,
    table_rows,
    write_jsonl,
)


def step_rows(rows: list) -> list:
    """A merged timeline's step rows (the sample has provider calls too): those with a kind class."""
    return [row for row in rows if row.attrs.get("class", "").startswith("kind-")]


SAMPLE_RUN = (
    "e213df5a-ba80-4e0d-aeea-5bed705ef4e3"  # in sample_data/runs.jsonl, with content: ok, cancelled and local calls
)
STYLESHEET = (REPO / "templates" / "assets" / "style.css").read_text(encoding="utf-8")
WHOLE_RUN_STYLESHEET = (REPO / "templates" / "assets" / "whole-run.css").read_text(encoding="utf-8")


def timeline(*args: Any) -> Result:
    return invoke("timeline", *args)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The crafted input and its site, built beside it."""
    source = write_jsonl(tmp_path_factory.mktemp("timeline") / "crafted.jsonl", crafted_rows())
    build_ok(source, "--out", source.parent / "site")
    return source


@pytest.fixture(scope="module")
def sample_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sample") / "site"
    build_ok("--out", out)
    return out


def write_timeline(folder: Path, run: str, *args: Any) -> Node:
    out = folder / f"{run}.html"
    result = timeline(run, *args, "--out", out)
    assert result.exit_code == 0, failure_text(result)
    return parse_html(out.read_text(encoding="utf-8"))


def rows_as_seen(document: Node) -> list[tuple[str, list[str]]]:
    """Each timeline row: its classes and the text of its cells."""
    return [(row.attrs.get("class", ""), cells(row)) for row in table_rows(document, "timeline")]


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_single_file_has_its_css_inline_and_links_to_no_other_file(tmp_path: Path, language: str) -> None:
    document = write_timeline(tmp_path, SAMPLE_RUN, "--lang", language)
    styles = document.find_all("style")
    assert len(styles) == 1
    # The sample has its tables: the whole run's styles follow the site's own.
    assert "".join(child for child in styles[0].children if isinstance(child, str)).strip() == (
        STYLESHEET + WHOLE_RUN_STYLESHEET).strip()
    assert not document.find_all("link")
    assert [link for link in hrefs(document) if not link.startswith("#")] == []
    assert "url(" not in (tmp_path / f"{SAMPLE_RUN}.html").read_text(encoding="utf-8")
    assert len(step_rows(table_rows(document, "timeline"))) == 29


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "de"])
def test_the_single_file_shows_the_same_steps_as_the_sample_run_page(
    tmp_path: Path, sample_site: Path, language: str
) -> None:
    single = write_timeline(tmp_path, SAMPLE_RUN, "--lang", language)
    site_page = page(sample_site / language / "runs" / f"{SAMPLE_RUN}.html")
    assert rows_as_seen(single) == rows_as_seen(site_page)
    facts = [node.text() for node in single.find("dl", "facts").find_all("dd")]
    assert facts == [node.text() for node in site_page.find("dl", "facts").find_all("dd")]


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_single_file_shows_the_same_steps_as_a_crafted_run_page(
    tmp_path: Path, crafted: Path, language: str
) -> None:
    single = write_timeline(tmp_path, "mixed-run", crafted, "--lang", language)
    site_page = page(crafted.parent / "site" / language / "runs" / "mixed-run.html")
    assert rows_as_seen(single) == rows_as_seen(site_page)
    assert [row.find("span", "outcome").attrs["class"] for row in table_rows(single, "timeline")] == [
        "outcome outcome-none", "outcome outcome-ok", "outcome outcome-failed", "outcome outcome-cancelled",
        "outcome outcome-failed", "outcome outcome-none", "outcome outcome-none",
    ]


def test_the_single_file_in_german(tmp_path: Path) -> None:
    document = write_timeline(
        tmp_path, SAMPLE_RUN, "--lang", "de", "--title", "Störung 4711", "--timezone", "Europe/Berlin"
    )
    assert document.find("html").attrs["lang"] == "de"
    assert document.find("h1").text().startswith("Verlauf des Laufs")
    assert "Störung 4711" in document.find("title").text()
    assert "Zeiten in Europe/Berlin" in document.find("div", "site-meta").text()
    headers = [node.text() for node in document.find("table", "timeline").find_all("th")]
    assert headers == ["Quelle", "#", "Zeit", "Art", "Runde", "Dauer", "Werkzeug", "Server", "Ergebnis", "Details"]
    labels = {row.find("span", "outcome").text() for row in table_rows(document, "timeline")}
    assert {"ok", "abgebrochen"} <= labels
    assert cells(table_rows(document, "timeline")[0])[:3] == ["Schritt", "0", "07:44:43"]  # 05:44:43 UTC


@pytest.mark.parametrize(
    ("run", "suggestion"),
    [
        pytest.param("e213df5a-ba80-4e0d-aeea-5bed705ef4eX", SAMPLE_RUN, id="one-character-off"),
        pytest.param("E213DF5A-BA80-4E0D-AEEA-5BED705EF4E3", SAMPLE_RUN, id="case-differs"),
        pytest.param("no-such-run", None, id="nothing-close"),
    ],
)
def test_an_unknown_run_is_exit_2_naming_it(tmp_path: Path, run: str, suggestion: str | None) -> None:
    out = tmp_path / "timeline.html"
    result = timeline(run, "--out", out)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert repr(run) in result.stderr
    if suggestion is None:
        assert "did you mean" not in result.stderr
    else:
        assert f"did you mean {suggestion!r}" in result.stderr
    assert not out.exists()


def test_an_unknown_run_suggests_close_matches_from_the_given_input(tmp_path: Path, crafted: Path) -> None:
    result = timeline("big-12", crafted, "--out", tmp_path / "timeline.html")
    assert result.exit_code == 2, result.output
    assert "'big-12'" in result.stderr
    assert "did you mean" in result.stderr and "'big-1'" in result.stderr


def test_timeline_as_a_real_command(tmp_path: Path) -> None:
    out = tmp_path / "attachment.html"
    completed = run_cli("timeline", SAMPLE_RUN, "--out", out, "--lang", "de", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert SAMPLE_RUN in completed.stderr and str(out) in completed.stderr
    document = parse_html(out.read_text(encoding="utf-8"))
    assert document.find("html").attrs["lang"] == "de"
    assert len(step_rows(table_rows(document, "timeline"))) == 29
