"""Run ids, tool names and server ids that attack the file system and the page."""

from __future__ import annotations

import random
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from command_line import invoke, run_cli
from safety_helpers import html_pages, parse_html, parse_page, run_rows, site_files, write_jsonl

HOSTILE_RUN_IDS = {
    "very-long": "r" * 5000,
    "case-upper": "Run-A",
    "case-lower": "run-a",
    "nfc": unicodedata.normalize("NFC", "Müller"),
    "nfd": unicodedata.normalize("NFD", "Müller"),
    "slash": "team/run-7",
    "backslash": "team\\run-7",
    "dot-dot": "..",
    "dot": ".",
    "traversal": "../../etc/passwd",
    "absolute": "/etc/passwd",
    "windows-traversal": "..\\..\\windows\\win.ini",
    "control-characters": "ctl\x01\x1b[31m\x7f\tend",
    "nul": "nul\x00byte",
    "device-name": "CON",
    "device-name-lower": "con",
    "device-with-extension": "aux.txt",
    "our-page-name": "index",
    "our-folder-name": "servers",
    "looks-hashed": "run-h0123456789abcdef0123",
    "script": "<script>alert(1)</script>",
    "attribute-break": '" onmouseover="x',
    "single-quote-break": "' onfocus='x",
    "ampersand-entity": "&lt;b&gt; &amp; &#60;",
    "trailing-dot-space": "run. ",
    "emoji-and-rtl": "run-\U0001f4a5-\u202egnp.exe",
}
# The ids as a browser shows them. HTML cannot carry a NUL: the parser drops it from
# text (WHATWG, "in body": a U+0000 character token is ignored), so "nul\x00byte" reads "nulbyte".
SHOWN_RUN_IDS = {name: run.replace("\x00", "") for name, run in HOSTILE_RUN_IDS.items()}
HOSTILE_TOOL = 'mcp_evil<b>"&_tool<i>"&'
HOSTILE_SERVER = '<svg onload=alert(1)>"&amp;'
LOCAL_TOOL = 'local<script>"&'
# Attributes the templates write; a broken-out attribute would show up as another one.
FILTER_SRC = "../assets/filter.js"
AXIS_TICK = re.compile(r'<i(?: class="x\d+")?>[\d.,\u00a0\u202f ]+(?:ms|s)</i>')
TICK_CLASS = re.compile(r"x\d+")
FILTER_SCRIPT = f'<script src="{FILTER_SRC}"></script>'
KNOWN_ATTRIBUTES = frozenset({
    "lang", "charset", "http-equiv", "content", "name", "rel", "href", "hreflang", "class", "aria-label",
    "aria-hidden", "aria-current", "aria-labelledby", "scope", "xmlns", "role", "viewbox", "width", "height",
    "id", "x", "y", "x1", "y1", "x2", "y2", "text-anchor", "tabindex",
    # The run index's filter form (issue 22) and the latency charts and waterfall (issue 23).
    "hidden", "for", "type", "value", "min", "step", "inputmode", "autocomplete", "spellcheck", "aria-live",
    "src", "title", "fill", "points", "data-language", "data-root", "data-timezone", "data-words",
})


def hostile_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for day, run in enumerate(HOSTILE_RUN_IDS.values()):
        if day % 2:
            rows += run_rows(run, day=day, tool=LOCAL_TOOL, outcomes=("ok", "cancelled"))
        else:
            rows += run_rows(run, day=day, tool=HOSTILE_TOOL, outcomes=("ok", "failed"), server=HOSTILE_SERVER)
    return rows


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same rows built twice, in a different order and into different folders."""
    folder = tmp_path_factory.mktemp("hostile-ids")
    rows = hostile_rows()
    first = write_jsonl(folder / "first.jsonl", rows)
    random.Random(5).shuffle(rows)
    second = write_jsonl(folder / "second.jsonl", rows)
    built = invoke("build", str(first), "--out", str(folder / "one"), "--jobs", "1")
    assert built.exit_code == 0, built.output
    completed = run_cli("build", second, "--out", folder / "two", "--jobs", "1")
    assert completed.returncode == 0, completed.stderr
    return folder / "one", folder / "two"


def index_links(site: Path, language: str) -> dict[str, str]:
    """Run id (as the page shows it) -> the href of its link, over every page of the run index."""
    links: dict[str, str] = {}
    for page in sorted((site / language).glob("index*.html")):
        for href, text in parse_page(page).links:
            if href.startswith("runs/"):
                assert text not in links, f"run {text!r} is listed twice"
                links[text] = href
    return links


def test_the_rows_are_all_kept(sites: tuple[Path, Path]) -> None:
    summary = (sites[0] / "summary.json").read_text(encoding="utf-8")
    assert '"rows_rejected": 0' in summary and f'"runs": {len(HOSTILE_RUN_IDS)}' in summary


@pytest.mark.parametrize("language", ["en", "de"])
def test_every_run_has_its_own_page_linked_from_the_index(sites: tuple[Path, Path], language: str) -> None:
    site = sites[0]
    links = index_links(site, language)
    assert set(links) == set(SHOWN_RUN_IDS.values())
    assert len(set(links.values())) == len(HOSTILE_RUN_IDS)
    for run, href in links.items():
        page = site / language / href
        assert page.is_file(), href
        shown = parse_page(page).text_by_class["run-id"]
        assert shown == [run], f"{href} shows {shown!r}, not its run {run!r}"


@pytest.mark.parametrize("name", list(HOSTILE_RUN_IDS))
def test_a_hostile_run_id_gets_a_short_safe_page_name(sites: tuple[Path, Path], name: str) -> None:
    href = index_links(sites[0], "en")[SHOWN_RUN_IDS[name]]
    assert href.startswith("runs/") and href.count("/") == 1
    file_name = href.removeprefix("runs/")
    assert len(file_name.encode("utf-8")) <= 200
    assert file_name.endswith(".html") and file_name.isascii() and file_name.isprintable()
    assert not any(character in file_name for character in '\\/:*?"<>|') and not file_name.startswith(".")
    stem = file_name.removesuffix(".html")
    assert stem.split(".")[0].lower() not in {"con", "prn", "aux", "nul", "com1", "lpt1", "index", "servers"}


def test_every_file_is_inside_the_site_with_a_short_name_unique_on_any_file_system(sites: tuple[Path, Path]) -> None:
    site = sites[0]
    folder = site.parent
    files = site_files(site)
    for relative in files:
        path = site / relative
        assert path.resolve().is_relative_to(site.resolve()), relative
        assert all(len(part.encode("utf-8")) <= 200 for part in relative.split("/")), relative
    folded = {unicodedata.normalize("NFC", relative).casefold() for relative in files}
    assert len(folded) == len(files), "two files differ only in case or normalization"
    assert sorted(entry.name for entry in folder.iterdir() if not entry.name.startswith(".")) == [
        "first.jsonl", "one", "second.jsonl", "two",
    ]
    assert not (folder / "etc").exists() and not Path("/etc/passwd.html").exists()


def test_page_names_are_the_same_from_build_to_build(sites: tuple[Path, Path]) -> None:
    one, two = sites
    assert site_files(one) == site_files(two)
    assert index_links(one, "de") == index_links(two, "de")
    differing = [name for name in site_files(one) if (one / name).read_bytes() != (two / name).read_bytes()]
    assert differing == [], "the same rows in another order must give the same bytes"


def test_hostile_strings_appear_only_as_escaped_text_on_every_page(sites: tuple[Path, Path]) -> None:
    site = sites[0]
    pages = html_pages(site)
    shown: set[str] = set()
    for path in pages:
        raw = path.read_text(encoding="utf-8")
        page = parse_page(path)
        # The one script there is: the run index's filter, a file of the site (never data, never inline);
        # the only <i> elements: a waterfall's time axis ticks, each a duration the tool wrote.
        raw = AXIS_TICK.sub("", raw.replace(FILTER_SCRIPT, ""))
        assert "<script" not in raw and "<svg onload" not in raw and "<b>" not in raw and "<i>" not in raw, path
        element_names = {tag for tag, attrs in page.tags
                         if not (tag == "script" and attrs == [("src", FILTER_SRC)])
                         and not (tag == "i" and all(name == "class" and TICK_CLASS.fullmatch(value or "")
                                                     for name, value in attrs))}
        assert not element_names & {"script", "b", "i", "img"}, path
        for tag, attribute, value in page.attributes():
            assert attribute in KNOWN_ATTRIBUTES, f"{path}: <{tag} {attribute}={value!r}>"
        text = "".join(page.text)
        shown |= {string for string in (*SHOWN_RUN_IDS.values(), HOSTILE_TOOL, HOSTILE_SERVER, LOCAL_TOOL)
                  if string in text}
    # Parsed back, the text is the exact string: escaped once, neither lost nor double-escaped.
    assert shown == {*SHOWN_RUN_IDS.values(), HOSTILE_TOOL, HOSTILE_SERVER, LOCAL_TOOL}


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_server_page_and_its_chart_show_the_hostile_server_and_tool_as_text(
    sites: tuple[Path, Path], language: str
) -> None:
    site = sites[0]
    servers_index = parse_page(site / language / "servers" / "index.html")
    hrefs = [href for href, text in servers_index.links if text == HOSTILE_SERVER]
    assert len(hrefs) == 1, servers_index.links
    path = site / language / "servers" / hrefs[0]
    raw = path.read_text(encoding="utf-8")
    # The calls per day, and (issue 23) the latency histogram and the latency per day.
    charts = [parse_html(raw[start : raw.index("</svg>", start) + len("</svg>")])
              for start in (match.start() for match in re.finditer("<svg", raw))]
    assert len(charts) == 3
    for chart in charts:
        assert [tag for tag, _attrs in chart.tags if tag == "svg"] == ["svg"]
        assert not [name for _tag, name, _value in chart.attributes() if name.startswith("on")]
    assert any(HOSTILE_SERVER in text for text in charts[0].text), "the chart's title names the server"
    page = parse_page(path)
    text = "".join(page.text)
    assert HOSTILE_SERVER in text and HOSTILE_TOOL in text
    [failed_list] = [path.parent / href for href, _text in page.links if href.endswith("/failed.html")]
    failed_links = {link_text: href for href, link_text in parse_page(failed_list).links
                    if href.startswith("../../runs/")}
    assert set(failed_links) == {run for day, run in enumerate(SHOWN_RUN_IDS.values()) if day % 2 == 0}
    assert all((failed_list.parent / href).resolve().is_file() for href in failed_links.values())


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_hostile_tools_list_of_runs_is_inside_its_servers_folder_and_shows_it_as_text(
    sites: tuple[Path, Path], language: str
) -> None:
    site = sites[0]
    [server_href] = [href for href, text in parse_page(site / language / "servers" / "index.html").links
                     if text == HOSTILE_SERVER]
    server_page = site / language / "servers" / server_href
    tool_links = [href for href, _text in parse_page(server_page).links if "/tools/" in href]
    assert len(tool_links) == 1, tool_links
    [tool_list] = [server_page.parent / href for href in tool_links]
    folder = server_page.with_suffix("") / "tools"
    assert tool_list.resolve().parent.parent == folder.resolve() and tool_list.name == "runs.html"
    assert tool_list.parent.name.isascii() and not set(tool_list.parent.name) - set(
        "abcdefghijklmnopqrstuvwxyz0123456789_-"
    )
    listed = parse_page(tool_list)
    assert HOSTILE_TOOL in "".join(listed.text) and HOSTILE_SERVER in "".join(listed.text)
    run_links = {text: href for href, text in listed.links if href.startswith("../../../../runs/")}
    assert set(run_links) == {run for day, run in enumerate(SHOWN_RUN_IDS.values()) if day % 2 == 0}
    assert all((tool_list.parent / href).resolve().is_file() for href in run_links.values())
