"""Screenshots of the sample site for the README, taken with Debian's headless Chromium.

Run from anywhere, with the package and its test extras installed
(``pip install '.[test]'``): ``python scripts/screenshots.py``. It builds the
bundled sample into a temporary folder and writes

- ``docs/screenshots/timeline.png``: the timeline of the shortest run that has a
  failed and a cancelled call (or, failing that, either), one stored with its content
  first, as the browser tests choose it, 1400 px wide;
- ``docs/screenshots/servers.png``: the MCP servers page;
- ``docs/screenshots/filter.png``: the run index filtered by server, outcome class and time range;
- ``docs/screenshots/server.png``: the page of the server that changed most recently
  (its changes marked on the chart, its current period shaded), else of the worst one;
- ``docs/screenshots/run-header.png``: the shortest run page with the run header of a
  failed run and a merged timeline with a provider fallback (else any merged one);
- ``docs/screenshots/waterfall.png``: that page's waterfall (issue 23), 1280 px wide.

Chromium is launched as the browser tests launch it (tests/chromium.py): the
pages are opened from disk, no host name resolves and any request for another
host is aborted, so nothing leaves the machine.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from chromium import chromium_path, guarded_context, launch, open_page  # noqa: E402

OUT_DIR = ROOT / "docs" / "screenshots"
# 1400 px wide; the window starts short so that a whole-page shot is as tall as the page.
WINDOW = {"width": 1400, "height": 400}
STEP_ROW = re.compile(r'<tr class="kind-[^"]*"')


def screenshot(browser: Browser, page: Path, target: Path) -> None:
    """One page, opened from disk, as a PNG of its whole height (light colour scheme)."""
    context, traffic = guarded_context(browser, None, color_scheme="light", viewport=WINDOW)
    try:
        open_page(context, page.as_uri()).screenshot(path=target, full_page=True)
    finally:
        context.close()
    if traffic.problems():
        raise SystemExit(f"{page}: " + "; ".join(traffic.problems()))


def element_screenshot(browser: Browser, page: Path, selector: str, target: Path) -> None:
    """One element of a page, opened from disk 1280 px wide, as a PNG (light colour scheme)."""
    context, traffic = guarded_context(browser, None, color_scheme="light", viewport={"width": 1280, "height": 900})
    try:
        open_page(context, page.as_uri()).locator(selector).screenshot(path=target)
    finally:
        context.close()
    if traffic.problems():
        raise SystemExit(f"{page}: " + "; ".join(traffic.problems()))


def build_sample(out: Path) -> None:
    command = [sys.executable, "-m", "nrllm_report", "build", "--out", str(out), "--jobs", "1"]
    subprocess.run(command, check=True, timeout=300, stdin=subprocess.DEVNULL)


def showcase_run_page(site: Path) -> Path:
    """The shortest English run page with a failed and a cancelled call (else either), runs with content first."""
    ranked = []
    for page in sorted((site / "en" / "runs").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        failed, cancelled = "step-failed" in text, "step-cancelled" in text
        if failed or cancelled:
            redacted = "Content redacted" in text  # stored at the "metadata" level
            ranked.append((not (failed and cancelled), redacted, len(STEP_ROW.findall(text)), page.name, page))
    if not ranked:
        raise SystemExit("the sample has no run with a failed or cancelled call")
    return min(ranked)[-1]


def whole_run_page(site: Path) -> Path:
    """The shortest English run page of a failed run with a fallback call; else the shortest merged one."""
    ranked = []
    for page in sorted((site / "en" / "runs").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        if "source-call" not in text:
            continue
        wanted = 'run-status status-failed' in text and "Served by" in text
        ranked.append((not wanted, "source-governance" not in text, text.count("<tr"), page.name, page))
    if not ranked:
        raise SystemExit("the sample has no run with provider calls")
    return min(ranked)[-1]


SERVER_LINK = re.compile(r'<td><a href="([^"]+\.html)">')


def showcase_server_page(site: Path) -> Path:
    """The English page of the server whose latest change is the newest; else the first (worst) server."""
    servers = json.loads((site / "summary.json").read_text(encoding="utf-8"))["servers"]
    changed = [(figures["changes"][-1]["day"], server) for server, figures in servers.items() if figures["changes"]]
    index = site / "en" / "servers" / "index.html"
    links = SERVER_LINK.findall(index.read_text(encoding="utf-8"))
    if not links:
        raise SystemExit("the sample has no MCP server")
    if changed:
        newest = max(changed)[1]
        named = [link for link in links if link.removesuffix(".html") == newest]
        if named:
            return index.parent / named[0]
    return index.parent / links[0]


FILTER = "#server=github&outcome=failed&from=2026-09-10T00:00:00&to=2026-09-30T23:59:59"


def filter_screenshot(browser: Browser, site: Path, target: Path) -> None:
    """The run index's filter (issue 22), filtered by server, outcome class and time range."""
    context, traffic = guarded_context(browser, None, color_scheme="light", viewport={"width": 1400, "height": 900})
    try:
        page = open_page(context, (site / "en" / "index.html").as_uri() + FILTER)
        page.wait_for_function("() => document.querySelector('.filter-count').textContent.includes('match')")
        page.locator("#run-filter").screenshot(path=target)
    finally:
        context.close()
    assert not traffic.problems(), traffic.problems()


def main() -> int:
    executable = chromium_path()
    if executable is None:
        raise SystemExit("chromium is not installed: apt-get install chromium")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nrllm-screenshots-") as temporary, sync_playwright() as playwright:
        site = Path(temporary) / "site"
        build_sample(site)
        run_page = showcase_run_page(site)
        browser = launch(playwright, executable)
        screenshot(browser, run_page, OUT_DIR / "timeline.png")
        screenshot(browser, site / "en" / "servers" / "index.html", OUT_DIR / "servers.png")
        server_page = showcase_server_page(site)
        screenshot(browser, server_page, OUT_DIR / "server.png")
        header_page = whole_run_page(site)
        screenshot(browser, header_page, OUT_DIR / "run-header.png")
        filter_screenshot(browser, site, OUT_DIR / "filter.png")
        element_screenshot(browser, header_page, "figure.waterfall", OUT_DIR / "waterfall.png")
        browser.close()
    print(f"Wrote {OUT_DIR / 'timeline.png'} (run {run_page.stem}), {OUT_DIR / 'servers.png'} and "
          f"{OUT_DIR / 'server.png'} (server {server_page.stem}).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
