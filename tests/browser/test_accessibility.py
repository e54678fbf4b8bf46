"""Every kind of page passes axe-core's WCAG 2.1 A and AA rules, in both languages and both colour schemes.

axe-core (shipped inside axe-playwright-python) runs in the page Chromium
rendered, so it judges what a reader gets: the computed colours of the light
or the dark scheme, the language of the page, the names of links and figures.
The site is the sample with the crafted rows of site_helpers (all five verdicts,
rejected rows and warnings), its run index paginated by 25 runs a page.
It is served over HTTP, as on an intranet: axe reads the stylesheet's rules
from the page, where from disk it would have to fetch them, and the pages'
own policy forbids that. The single-file timeline is opened from disk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from chromium import Visit, serving
from command_line import invoke
from site_helpers import SAMPLE, SAMPLE_SERVERS, build_ok, crafted_rows, failure_text, write_jsonl

from nrllm_report.aggregate.verdicts import Verdict
from nrllm_report.core.model import LatencyVerdict
from nrllm_report.site import pages

LANGUAGES = ["en", "de"]
SCHEMES = ["light", "dark"]
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
AXE_OPTIONS = {
    "runOnly": {"type": "tag", "values": WCAG_TAGS},
    "resultTypes": ["violations"],
    # axe leaves one-character text (a page number of the pagination) undecided, as it
    # might be an icon; ours is text, so check its contrast like any other.
    "checks": {"color-contrast": {"options": {"ignoreLength": True}}},
}
RUNS_PER_INDEX_PAGE = 25  # the sample's and the crafted runs then fill three pages
VERDICT_CLASS = re.compile(r'class="verdict verdict-([a-z-]+)"')
CRAFTED_SERVER = "bigflaky"  # a chart, a tools table, runs with failed calls
CRAFTED_TOOL = "mcp_bigflaky_query"  # its tool, called by ten runs: a list of them on its own page



def denied_run() -> str:
    """The sample's run with an operator's denial (issue 20): its timeline says who denied the call."""
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
        if row["kind"] == "approval" and payload.get("approved") is False:
            return str(row["run"])
    raise AssertionError("the sample has no denied approval")


# Page kind -> its path in a language's folder; the single-file timeline is written beside the site.
PAGES = {
    "run-index": "index.html",
    "run": "runs/{run}.html",
    "run-with-a-denial": f"runs/{denied_run()}.html",
    "servers-index": "servers/index.html",
    "server": f"servers/{CRAFTED_SERVER}.html",
    "problems": "problems.html",
    "runs-with-failed-calls": "runs-with-failed-calls.html",
    "server-runs": f"servers/{CRAFTED_SERVER}/failed.html",
    "tool-runs": f"servers/{CRAFTED_SERVER}/tools/{CRAFTED_TOOL}/runs.html",
    "configurations": "configurations.html",
    "single-file-timeline": "../../timeline-{language}.html",
}
# The sample's other tables: run pages open with the run header and merge provider calls and decisions.
SAMPLE_TABLES = sorted(SAMPLE.parent.glob("tx_nrllm_*.jsonl"))
AUDITED = [pytest.param("root", None, id="root")] + [
    pytest.param(kind, language, id=f"{kind}-{language}") for kind in PAGES for language in LANGUAGES
]
AXE = Axe()

Opener = Callable[..., Visit]


def showcase_run() -> str:
    """The sample's shortest run with a failed and a cancelled call: every badge on one page."""
    steps: dict[str, list[str | None]] = {}
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
        steps.setdefault(row["run"], []).append(payload.get("toolOutcome"))
    candidates = [run for run, outcomes in steps.items() if {"failed", "cancelled"} <= set(outcomes)]
    return min(candidates, key=lambda run: (len(steps[run]), run))


@pytest.fixture(scope="module")
def audited_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The site to audit, with a single-file timeline per language beside it, and its showcase run."""
    folder = tmp_path_factory.mktemp("accessibility")
    crafted = write_jsonl(folder / "crafted.jsonl", crafted_rows())
    servers = ",".join(SAMPLE_SERVERS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pages, "RUNS_PER_INDEX_PAGE", RUNS_PER_INDEX_PAGE)
        # --min-calls 5 and docs-search's own budget: the servers index shows every verdict.
        build_ok(SAMPLE, *SAMPLE_TABLES, crafted, "--out", folder / "site", "--servers", servers, "--min-calls", "5",
                 "--failure-budget", "docs-search=0.25", "--jobs", "1")
    assert (folder / "site" / "en" / "index-3.html").is_file(), "the run index is not paginated"
    shown = set(VERDICT_CLASS.findall((folder / "site" / "en" / "servers" / "index.html").read_text("utf-8")))
    every = {verdict.value for verdict in Verdict} | {verdict.value for verdict in LatencyVerdict}
    assert shown == every, f"the audit would miss verdicts: {shown}"
    run = showcase_run()
    run_page = (folder / "site" / "en" / "runs" / f"{run}.html").read_text("utf-8")
    assert "run-header" in run_page and "source-call" in run_page, "the audit would miss the whole run's markup"
    assert '<figure class="waterfall">' in run_page and 'class="lane"' in run_page, "the audit would miss the waterfall"
    for language in LANGUAGES:
        out = folder / f"timeline-{language}.html"
        result = invoke("timeline", run, str(SAMPLE), *map(str, SAMPLE_TABLES), "--out", str(out), "--lang", language)
        assert result.exit_code == 0, failure_text(result)
    return folder / "site", run


@pytest.fixture(scope="module")
def served(audited_site: tuple[Path, str]) -> Iterator[str]:
    with serving(audited_site[0]) as origin:
        yield origin


def page_url(site: Path, run: str, origin: str, kind: str, language: str | None) -> str:
    """Where a reader opens the page: from the served site, or the single file from disk."""
    if language is None:
        return f"{origin}/index.html"
    path = f"{language}/{PAGES[kind].format(run=run, language=language)}"
    if kind == "single-file-timeline":
        return (site / path).resolve().as_uri()
    assert (site / path).is_file(), path
    return f"{origin}/{path}"


def describe(violations: list[dict[str, Any]]) -> str:
    """axe's findings as a reader wants them: the rule, why, and each element with its fix."""
    lines = [f"{len(violations)} rule(s) violated:"]
    for violation in violations:
        lines.append(f"- {violation['id']} ({violation['impact']}): {violation['help']}  <{violation['helpUrl']}>")
        for node in violation["nodes"][:8]:
            lines.append(f"    at {' '.join(map(str, node['target']))}: {node['html'][:160]}")
            lines += [f"      {line.strip()}" for line in node["failureSummary"].splitlines()[1:3]]
        if len(violation["nodes"]) > 8:
            lines.append(f"    ... and {len(violation['nodes']) - 8} more elements")
    return "\n".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "language"), AUDITED)
def test_page_has_no_wcag_21_aa_violation_in_either_colour_scheme(
    visit: Opener, audited_site: tuple[Path, str], served: str, kind: str, language: str | None
) -> None:
    page = visit(page_url(*audited_site, served, kind, language)).page
    assert page.locator("html").get_attribute("lang") == (language or "en")
    found = {}
    for scheme in SCHEMES:  # the same page, as a reader with either preference sees it
        page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
        found[scheme] = AXE.run(page, options=AXE_OPTIONS).response["violations"]
    assert found == {scheme: [] for scheme in SCHEMES}, "\n".join(
        f"{scheme} scheme: {describe(violations)}" for scheme, violations in found.items() if violations
    )
