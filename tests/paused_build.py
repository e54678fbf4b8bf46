"""``nrllm-report`` as a real process that pauses part-way, for tests that catch a build while it runs.

    python tests/paused_build.py GATE PAGES build INPUT --out SITE ...

Each process that writes run pages (the build itself, or its workers) writes PAGES
of them, then creates ``GATE/paused-<pid>`` and waits until ``GATE/go`` exists. A
test waits for the first ``paused-*`` file instead of guessing how long a build
takes: the build cannot finish, or even get past its run pages, before the test
lets it (or a signal ends it).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from nrllm_report.cli import main
from nrllm_report.output import writer

WAIT_SECONDS = 0.005


def pause_after(pages: int, gate: Path) -> None:
    """Make every process that writes run pages pause after ``pages`` of them."""
    original = writer.SiteWriter.write_claimed_bytes
    counted = {"pid": os.getpid(), "written": 0}  # a forked worker starts from its parent's count

    def write_claimed_bytes(self: writer.SiteWriter, relative: str, content: bytes) -> None:
        original(self, relative, content)
        if counted["pid"] != os.getpid():
            counted.update(pid=os.getpid(), written=0)
        counted["written"] += 1
        if counted["written"] == pages:
            (gate / f"paused-{os.getpid()}").touch()
            while not (gate / "go").exists():
                time.sleep(WAIT_SECONDS)

    writer.SiteWriter.write_claimed_bytes = write_claimed_bytes  # type: ignore[method-assign]


if __name__ == "__main__":
    gate_folder, page_count, *arguments = sys.argv[1:]
    pause_after(int(page_count), Path(gate_folder))
    sys.argv = ["nrllm-report", *arguments]
    main()
