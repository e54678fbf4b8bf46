"""The one way the tests run ``nrllm-report``: in-process through click's runner, or as a real process.

In-process runs are quick and show a traceback's cause; a real process is what a user and a CI
runner start, with its own exit code, streams and signals. Arguments may be paths or numbers.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from nrllm_report.cli import main


def invoke(*args: object, **options: Any) -> Result:
    """``nrllm-report ARGS`` in-process; ``options`` (``input``, ``env``, ...) go to click's runner."""
    return CliRunner().invoke(main, [str(arg) for arg in args], **options)


def cli_command(*args: object) -> list[str]:
    """The real command line of ``nrllm-report``: the console script installed beside this interpreter,
    as a user types it, or ``python -m nrllm_report`` where the package is not installed."""
    script = Path(sys.executable).parent / "nrllm-report"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "nrllm_report"]
    return [*command, *(str(arg) for arg in args)]


def run_cli(
    *args: object, cwd: Path | None = None, timeout: float = 300, prefix: Sequence[str] = (), **options: Any
) -> subprocess.CompletedProcess[str]:
    """``nrllm-report ARGS`` as a real process, its output captured as text; ``prefix`` runs it through
    another command (``setpriv ...``); ``options`` go to subprocess.run."""
    return subprocess.run(
        [*prefix, *cli_command(*args)], cwd=cwd, capture_output=True, text=True, encoding="utf-8", timeout=timeout,
        check=False, **options,
    )
