"""The lists of runs by status and by agent configuration, where the site has the run rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from site_helpers import REPO, build_ok, page, read_jsonl

from nrllm_report.core.slugs import slug
from site_pages.test_run_lists import list_runs

RUN_ROWS = REPO / "sample_data" / "tx_nrllm_agentrun.jsonl"


@pytest.fixture(scope="module")
def sample_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("groups") / "site"
    build_ok("--out", out)  # no INPUT: the sample's events with its other tables
    return out


def expected(field: str, index_order: list[str]) -> dict[str, list[str]]:
    """The runs of the index (in its order) by a field of their run row, from the rows as written."""
    rows = {str(row["uuid"]): row for row in read_jsonl(RUN_ROWS)}
    groups: dict[str, list[str]] = {}
    for run in index_order:
        value = rows[run].get(field) if run in rows else None
        if value:
            groups.setdefault(str(value), []).append(run)
    return groups


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "de"])
@pytest.mark.parametrize(("field", "folder"), [("status", "status"), ("configuration_identifier", "configurations")])
def test_each_list_holds_exactly_the_runs_of_its_value_newest_first(sample_site: Path, language: str, field: str,
                                                                      folder: str) -> None:
    index_order = list_runs(sample_site / language / "index.html")
    groups = expected(field, index_order)
    assert groups, "the sample's run rows name no value"
    pages = {value: f"{slug(value)}.html" if folder == "status" else f"{slug(value)}/runs.html" for value in groups}
    assert sorted(path.relative_to(sample_site / language / folder).as_posix()
                  for path in (sample_site / language / folder).rglob("*.html")) == sorted(pages.values())
    for value, runs in groups.items():
        assert list_runs(sample_site / language / folder / pages[value]) == runs


@pytest.mark.parametrize("language", ["en", "de"])
def test_the_index_and_the_configurations_page_link_every_list(sample_site: Path, language: str) -> None:
    index_links = {
        link.attrs["href"]
        for nav in page(sample_site / language / "index.html").find_all("nav", "list-links")
        for link in nav.find_all("a")
    }
    statuses = expected("status", list_runs(sample_site / language / "index.html"))
    configurations = expected("configuration_identifier", list_runs(sample_site / language / "index.html"))
    assert {f"status/{slug(status)}.html" for status in statuses} <= index_links
    assert {f"configurations/{slug(name)}/runs.html" for name in configurations} <= index_links
    table_links = {link.attrs["href"] for link in page(sample_site / language / "configurations.html").find_all("a")}
    assert {f"configurations/{slug(name)}/runs.html" for name in configurations} <= table_links


@pytest.mark.slow
def test_a_site_of_events_alone_has_no_such_lists(tmp_path: Path) -> None:
    out = tmp_path / "site"
    build_ok(REPO / "sample_data" / "runs.jsonl", "--out", out)
    assert not (out / "en" / "status").exists() and not (out / "en" / "configurations").exists()
    assert "status/" not in (out / "en" / "index.html").read_text(encoding="utf-8")
