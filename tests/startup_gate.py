"""``python -m nrllm_report`` as a real process that pauses while pyarrow is being imported.

    python tests/startup_gate.py GATE build INPUT --out SITE ...

When the command's start-up first imports pyarrow (the slowest import), this process
creates ``GATE/paused-<pid>`` and waits, inside that import, until ``GATE/go`` exists:
a test can signal it at start-up without guessing how long start-up takes.
"""

from __future__ import annotations

import importlib.abc
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

WAIT_SECONDS = 0.005
PAUSE_ON = "pyarrow"


class PauseOnImport(importlib.abc.MetaPathFinder):
    """Pauses the first import of ``PAUSE_ON``, then lets the other finders find it."""

    def __init__(self, gate: Path) -> None:
        self.gate = gate

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == PAUSE_ON:
            sys.meta_path.remove(self)
            (self.gate / f"paused-{os.getpid()}").touch()
            while not (self.gate / "go").exists():
                time.sleep(WAIT_SECONDS)


if __name__ == "__main__":
    gate_folder, *arguments = sys.argv[1:]
    assert PAUSE_ON not in sys.modules
    sys.meta_path.insert(0, PauseOnImport(Path(gate_folder)))
    sys.argv = ["nrllm-report", *arguments]
    runpy.run_module("nrllm_report", run_name="__main__", alter_sys=True)
