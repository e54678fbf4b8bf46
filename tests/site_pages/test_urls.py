"""Every link the site writes agrees with the relative path between the two pages."""

from __future__ import annotations

import pytest

from nrllm_report.site import urls


@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize("slug", ["4711", "run-with-dashes-h0123456789abcdef0123"])
def test_written_out_links_agree_with_the_paths(language: str, slug: str) -> None:
    index = urls.numbered(language, urls.RUN_INDEX_STEM, number=1)
    run_page = urls.run_page(language, slug)
    server_page = urls.server_page(language, slug)
    assert urls.run_from_language_folder(slug) == urls.link(index, run_page)
    assert urls.run_from_sibling_folder(slug) == urls.link(server_page, run_page)
    assert urls.server_from_sibling_folder(slug) == urls.link(run_page, server_page)
    assert urls.server_from_servers_index(slug) == urls.link(urls.servers_index(language), server_page)


@pytest.mark.parametrize(
    ("path", "root"),
    [("index.html", ""), ("en/index.html", "../"), ("de/runs/7.html", "../../")],
)
def test_root_of_a_page(path: str, root: str) -> None:
    assert urls.root_of(path) == root


def test_the_same_page_in_another_language() -> None:
    assert urls.in_other_language("en/runs/7.html", "de") == "../../de/runs/7.html"
    assert urls.in_other_language("index.html", "de") == "de/index.html"
    assert urls.link("en/runs/7.html", "de/runs/7.html") == "../../de/runs/7.html"


def test_numbered_pages() -> None:
    assert urls.numbered("en", urls.PROBLEMS_STEM, number=1) == "en/problems.html"
    assert urls.numbered("en", urls.PROBLEMS_STEM, number=3) == "en/problems-3.html"
    assert urls.language_index("de") == "de/index.html"
