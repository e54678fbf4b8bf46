"""Measure the run index's filter (issue 22) on a built site, in Chromium from file://.

    python bench/filter.py --site /tmp/site200          # a site built from 200,000 runs
    python bench/filter.py --runs 200000                # generate, build, then measure

Prints the filter data's size (all of it, and the largest shard; targets 12 MB and 1.5 MB
for 200,000 runs) and, as the median of ``--repeat`` fresh page loads, the milliseconds
from the last keystroke of a filter by server and day to its first result row (target
500 ms). Debian's Chromium under Playwright (tests/chromium.py), never a downloaded one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from chromium import chromium_path, guarded_context, launch, open_page  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

MEASURE = """async ([server, from, to]) => {
  const body = document.querySelector('#run-filter tbody');
  const set = (name, value) => { document.querySelector(`[name="${name}"]`).value = value; };
  set('server', server); set('from', from);
  const form = document.querySelector('.filter-form');
  const first = new Promise(resolve => new MutationObserver((changes, observer) => {
    if (body.rows.length) { observer.disconnect(); resolve(performance.now()); }
  }).observe(body, {childList: true}));
  set('to', to);
  const began = performance.now();
  form.dispatchEvent(new Event('input', {bubbles: true}));  // the last keystroke
  return (await first) - began;
}"""


def data_sizes(site: Path) -> tuple[int, int, int]:
    """The filter data's bytes in all, its largest shard's, and the number of shards."""
    files = sorted((site / "filter").glob("*.js"))
    shards = [path.stat().st_size for path in files if path.name.startswith("runs-")]
    return sum(path.stat().st_size for path in files), max(shards), len(shards)


def busiest(site: Path) -> tuple[str, str]:
    """The server of the index's list and the newest day with runs, to filter by."""
    text = (site / "filter" / "index.js").read_text(encoding="utf-8")
    index = json.loads(text[len("nrllmFilter.index("):-3])
    newest = max(shard[2] for shard in index["shards"])
    day = datetime.fromtimestamp(newest, timezone.utc).date().isoformat()
    return index["servers"][0], day


def measure(site: Path, repeat: int) -> list[float]:
    server, day = busiest(site)
    url = (site / "en" / "index.html").resolve().as_uri()
    timings = []
    with sync_playwright() as playwright:
        browser = launch(playwright, chromium_path() or "/usr/bin/chromium")
        for _ in range(repeat):
            context, _traffic = guarded_context(browser, None)
            page = open_page(context, url)
            page.wait_for_selector("#run-filter:not([hidden])")
            timings.append(page.evaluate(MEASURE, [server, f"{day}T00:00:00", f"{day}T23:59:59"]))
            context.close()
        browser.close()
    return timings


def build(runs: int, folder: Path) -> Path:
    from generate_export import write_export
    export = folder / f"runs-{runs}.parquet"
    write_export(export, runs)
    subprocess.run([sys.executable, "-m", "nrllm_report", "build", str(export), "--out", str(folder / "site"),
                    "--no-cache"], check=True, cwd=ROOT)
    return folder / "site"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, help="a built site")
    parser.add_argument("--runs", type=int, default=200_000, help="without --site: generate and build this many")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        site = options.site or build(options.runs, Path(folder))
        total, largest, shards = data_sizes(site)
        timings = measure(site, options.repeat)
    print(f"filter data: {total / 1e6:.2f} MB in {shards} shards, largest {largest / 1e6:.3f} MB")
    print(f"server and day, last keystroke to first row: median {statistics.median(timings):.0f} ms "
          f"({', '.join(f'{value:.0f}' for value in timings)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
