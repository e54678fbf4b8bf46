"""Screenshots of the sample site for the README, taken with Debian's headless Chromium.

Run from anywhere, with the package installed: ``python scripts/screenshots.py``.
It builds the bundled sample into a temporary folder and writes

- ``docs/screenshots/timeline.png``: the timeline of the shortest run that has a
  failed and a cancelled call (or, failing that, either), 1400 px wide;
- ``docs/screenshots/servers.png``: the MCP servers page.

The pages are opened from disk (file://) with the flags of tests/test_browser.py;
every host name and Chromium's own services are sent to a loopback port that
refuses connections, so nothing leaves the machine.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "docs" / "screenshots"
WIDTH = 1400
CHROMIUM_TIMEOUT = 60  # seconds
DEAD_END_HOST = "127.0.0.2"
STEP_ROW = re.compile(r'<tr class="kind-[^"]*"')


def find_chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if not found:
        raise SystemExit("chromium is not installed: apt-get install chromium")
    return found


def chromium_arguments(profile: Path, dead_end_port: int, height: int) -> list[str]:
    """tests/test_browser.py's flags, with every host mapped to the refusing port."""
    dead_end = f"{DEAD_END_HOST}:{dead_end_port}"
    return [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}",
        f"--host-resolver-rules=MAP * {dead_end}, EXCLUDE {DEAD_END_HOST}",
        "--disable-features=NetworkTimeServiceQuerying",
        f"--component-updater=url-source=http://{dead_end}/",
        f"--gaia-url=http://{dead_end}/",
        "--disable-dev-shm-usage", "--hide-scrollbars", f"--window-size={WIDTH},{height}",
    ]


def screenshot(chromium: str, page: Path, target: Path, height: int, workdir: Path) -> None:
    """One page, opened from disk, as a PNG of WIDTH x height pixels."""
    with socket.socket() as dead_end:
        dead_end.bind((DEAD_END_HOST, 0))  # bound, never listening: connections are refused
        arguments = chromium_arguments(Path(tempfile.mkdtemp(dir=workdir)), dead_end.getsockname()[1], height)
        command = [chromium, *arguments, f"--screenshot={target}", page.as_uri()]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            process.wait(timeout=CHROMIUM_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"chromium did not finish {page.name} within {CHROMIUM_TIMEOUT} s") from None
        finally:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # this launch's own group: any helper left behind
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
    if process.returncode != 0 or not target.is_file():
        raise SystemExit(f"chromium could not take a screenshot of {page}")


def build_sample(out: Path) -> None:
    command = [sys.executable, "-m", "nrllm_report", "build", "--out", str(out), "--jobs", "1"]
    subprocess.run(command, check=True, timeout=300, stdin=subprocess.DEVNULL)


def showcase_run_page(site: Path) -> Path:
    """The shortest English run page with a failed and a cancelled call (else either)."""
    ranked = []
    for page in sorted((site / "en" / "runs").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        failed, cancelled = "step-failed" in text, "step-cancelled" in text
        if failed or cancelled:
            ranked.append((not (failed and cancelled), len(STEP_ROW.findall(text)), page.name, page))
    if not ranked:
        raise SystemExit("the sample has no run with a failed or cancelled call")
    return min(ranked)[3]


def timeline_height(page: Path) -> int:
    """Tall enough for the run's facts and every step row, within reason."""
    rows = len(STEP_ROW.findall(page.read_text(encoding="utf-8")))
    return max(700, min(2400, 360 + 50 * rows))


def main() -> int:
    chromium = find_chromium()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nrllm-screenshots-") as temporary:
        workdir = Path(temporary)
        site = workdir / "site"
        build_sample(site)
        run_page = showcase_run_page(site)
        screenshot(chromium, run_page, OUT_DIR / "timeline.png", timeline_height(run_page), workdir)
        screenshot(chromium, site / "en" / "servers" / "index.html", OUT_DIR / "servers.png", 620, workdir)
    print(f"Wrote {OUT_DIR / 'timeline.png'} (run {run_page.stem}) and {OUT_DIR / 'servers.png'}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
