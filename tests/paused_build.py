"""``nrllm-report`` as a real process that pauses part-way, for tests that catch a build while it runs.

    python tests/paused_build.py GATE PAGES build [--fork-render] [--watch-parent] INPUT --out SITE ...

Each process that writes run pages (the build itself, or its workers) writes PAGES
of them, then creates ``GATE/paused-<pid>`` and waits until ``GATE/go`` exists. A
test waits for the first ``paused-*`` file instead of guessing how long a build
takes: the build cannot finish, or even get past its run pages, before the test
lets it (or a signal ends it). A paused process for which the test creates
``GATE/crash-<pid>`` ends there at once with ``os._exit(CRASH_EXIT)``, as a
worker that crashes does.

``--fork-render`` makes even a small site's run pages be rendered by forked
workers, so that a test can catch the workers with a small export: each worker
takes a share of the runs in every language (and writes, and pauses).
``--watch-parent`` makes workers notice their parent's end as they do where the
kernel cannot tell them (not Linux), by watching it from a thread.
The build runs through the command's real entry point (``nrllm_report.__main__``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from nrllm_report.__main__ import run
from nrllm_report.core import workers
from nrllm_report.output import writer
from nrllm_report.site import parallel

WAIT_SECONDS = 0.005
FORK_RENDER = "--fork-render"
WATCH_PARENT = "--watch-parent"
CRASH_EXIT = 70


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
            wait_at(gate)

    writer.SiteWriter.write_claimed_bytes = write_claimed_bytes  # type: ignore[method-assign]


def wait_at(gate: Path) -> None:
    """Say this process paused, then wait to be let go (or told to crash)."""
    (gate / f"paused-{os.getpid()}").touch()
    while not (gate / "go").exists():
        if (gate / f"crash-{os.getpid()}").exists():
            os._exit(CRASH_EXIT)
        time.sleep(WAIT_SECONDS)


if __name__ == "__main__":
    gate_folder, page_count, *arguments = sys.argv[1:]
    pause_after(int(page_count), Path(gate_folder))
    if FORK_RENDER in arguments:
        arguments.remove(FORK_RENDER)
        parallel.PARALLEL_THRESHOLD = 0
    if WATCH_PARENT in arguments:
        arguments.remove(WATCH_PARENT)
        workers._killed_with_parent = lambda: False  # type: ignore[attr-defined]
    sys.argv = ["nrllm-report", *arguments]
    run()
