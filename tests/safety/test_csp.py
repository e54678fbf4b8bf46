"""Every page carries a Content-Security-Policy that allows nothing from other hosts and no inline
script, and no page needs anything that policy would block."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest
from command_line import invoke
from safety_helpers import ParsedPage, html_pages, parse_page, run_rows, write_jsonl

from nrllm_report.core.resources import sample_inputs

# Attributes whose value the browser fetches or navigates to.
URL_ATTRIBUTES = frozenset({"href", "src", "srcset", "action", "formaction", "poster", "data", "xlink:href",
                            "background", "cite", "ping", "manifest", "codebase", "longdesc"})
FETCH_DIRECTIVES = ("default-src", "script-src", "style-src", "img-src", "font-src", "connect-src", "media-src",
                    "object-src", "frame-src", "child-src", "worker-src", "manifest-src", "prefetch-src")
HASH_SOURCE = re.compile(r"'sha(256|384|512)-[A-Za-z0-9+/]+=*'")


def hostile_rows() -> list[dict[str, object]]:
    rows = (
        run_rows('<script src="https://evil.example/x.js"></script>', tool='mcp_<img src=//evil.example>_t',
                 outcomes=("ok", "failed"))
        + run_rows("https://evil.example/run", day=1, outcomes=("cancelled",), server='" style="x')
        + run_rows("plain-run", day=2)
    )
    rows.append({"run": "plain-run", "sequence": 7, "kind": "tool",
                 "payload": {"toolName": "kb_lookup", "toolIsError": "@import url(https://evil.example/a.css)"}})
    return rows


@pytest.fixture(scope="module", params=["sample", "hostile"])
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample's site, and one built from hostile strings with a rejected row."""
    folder = tmp_path_factory.mktemp(f"csp-{request.param}")
    inputs = [] if request.param == "sample" else [str(write_jsonl(folder / "hostile.jsonl", hostile_rows()))]
    out = folder / "site"
    result = invoke("build", *inputs, "--out", str(out), "--jobs", "1")
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def timeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the bundled sample as one self-contained file."""
    with open(sample_inputs()[0], encoding="utf-8") as sample:
        run = json.loads(sample.readline())["run"]
    out = tmp_path_factory.mktemp("csp-timeline") / "timeline.html"
    result = invoke("timeline", str(run), "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


def all_pages(site: Path, timeline: Path) -> list[tuple[str, Path]]:
    return [(page.relative_to(site).as_posix(), page) for page in html_pages(site)] + [("timeline", timeline)]


def policy_of(page: ParsedPage) -> dict[str, list[str]]:
    policies = page.csp()
    assert len(policies) == 1, f"expected one Content-Security-Policy meta, got {policies!r}"
    directives: dict[str, list[str]] = {}
    for part in policies[0].split(";"):
        words = part.split()
        if words:
            assert words[0].lower() not in directives, f"directive {words[0]!r} given twice"
            directives[words[0].lower()] = words[1:]
    return directives


def check_policy(directives: dict[str, list[str]], inline_style_allowed: bool) -> None:
    assert directives.get("default-src") == ["'none'"], directives
    for name in FETCH_DIRECTIVES:
        for source in directives.get(name, []):
            if name == "style-src" and inline_style_allowed and HASH_SOURCE.fullmatch(source):
                continue
            assert source in ("'none'", "'self'"), f"{name} allows {source!r}"
    scripts = directives.get("script-src", directives["default-src"])
    assert not {"'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "'strict-dynamic'"} & set(scripts)
    assert directives.get("base-uri") == ["'none'"] and directives.get("form-action") == ["'none'"], directives


@pytest.mark.slow
def test_every_page_has_a_policy_that_allows_no_other_host_and_no_inline_script(site: Path, timeline: Path) -> None:
    pages = all_pages(site, timeline)
    assert len(pages) >= 8
    for name, path in pages:
        page = parse_page(path)
        check_policy(policy_of(page), inline_style_allowed=name == "timeline")
        # A policy in a meta element only governs what comes after it.
        first_tag = next(
            index for index, (tag, _attrs) in enumerate(page.tags) if tag in ("link", "style", "script", "img")
        )
        policy_tag = next(
            index
            for index, (tag, attrs) in enumerate(page.tags)
            if tag == "meta" and (dict(attrs).get("http-equiv") or "").lower() == "content-security-policy"
        )
        assert policy_tag < first_tag, name


@pytest.mark.slow
def test_no_page_has_script_inline_styles_handlers_or_references_to_other_hosts(site: Path, timeline: Path) -> None:
    for name, path in all_pages(site, timeline):
        text = path.read_text(encoding="utf-8")
        page = parse_page(path)
        # The one script: the run index's filter, a file of the site (issue 22); never inline.
        scripts = [dict(attrs) for tag, attrs in page.tags if tag == "script"]
        allowed = [{"src": "../assets/filter.js"}] if re.fullmatch(r"(en|de)/index\.html", name) else []
        assert scripts == allowed, name
        assert text.lower().count("<script") == len(allowed) and text.count('filter.js"></script>') == len(allowed), (
            name
        )
        assert not [tag for tag, _attrs in page.tags if tag in ("iframe", "object", "embed", "base", "form")]
        for tag, attribute, value in page.attributes():
            assert attribute != "style", f"{name}: <{tag} style=...> is blocked by the policy"
            assert not attribute.startswith("on"), f"{name}: <{tag} {attribute}=...> is an inline script"
            if attribute in URL_ATTRIBUTES:
                target = (value or "").strip().lower()
                assert not re.match(r"^([a-z][a-z0-9+.-]*:|//)", target), f"{name}: <{tag} {attribute}={value!r}>"
        for css in page.styles:
            assert "@import" not in css and "url(" not in css, name


@pytest.mark.slow
def test_every_stylesheet_a_page_links_is_a_file_of_the_site_without_imports(site: Path) -> None:
    for page_path in html_pages(site):
        sheets = [dict(attrs).get("href") or "" for tag, attrs in parse_page(page_path).tags
                  if tag == "link" and "stylesheet" in (dict(attrs).get("rel") or "")]
        # The site's stylesheet, and where it shows the whole run or denied calls, theirs.
        assert sheets[:1] == [sheets[0]] and 1 <= len(sheets) <= 2, page_path
        assert sheets[0].endswith("assets/style.css") and all(sheet.endswith("assets/whole-run.css")
                                                              for sheet in sheets[1:]), sheets
        for linked in sheets:
            sheet = (page_path.parent / linked).resolve()
            assert sheet.is_file() and sheet.is_relative_to(site.resolve()), (page_path, linked)
            css = sheet.read_text(encoding="utf-8")
            assert "@import" not in css
            assert all(target.strip("'\" ").startswith("#") for target in re.findall(r"url\(([^)]*)\)", css))


def test_the_single_file_timeline_inlines_exactly_the_style_its_policy_allows(timeline: Path) -> None:
    page = parse_page(timeline)
    assert len(page.styles) == 1
    style = page.styles[0]
    assert "Segoe UI" in style and "&#" not in style and "&quot;" not in style, "the CSS must be inlined unescaped"
    digest = base64.b64encode(hashlib.sha256(style.encode("utf-8")).digest()).decode("ascii")
    assert policy_of(page)["style-src"] == [f"'sha256-{digest}'"]
    assert not [tag for tag, _attrs in page.tags if tag == "link"]
    assert all(href.startswith("#") for href in page.hrefs()), page.hrefs()
