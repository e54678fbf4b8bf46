"""Long builds show a progress bar on a terminal, and every build ends with one summary line."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

import pytest
from command_line import cli_command, run_cli
from site_helpers import sample_rows_read


def run_with_terminal_stderr(arguments: list[str], cwd: Path) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal, as a person at a shell would."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        cli_command(*arguments),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=terminal, cwd=cwd,
    )
    os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closes when the process ends
            break
        if not chunk:
            break
        output += chunk
    os.close(controller)
    return process.wait(timeout=120), output.decode("utf-8", "replace")


@pytest.mark.slow
def test_a_terminal_gets_a_progress_bar_and_the_summary_line(tmp_path: Path) -> None:
    code, stderr = run_with_terminal_stderr(["build", "--out", str(tmp_path / "site")], tmp_path)
    assert code == 0, stderr
    assert "Rendering run pages" in stderr and "100%" in stderr
    assert f"Built 120 runs from {sample_rows_read()} rows (0 rejected) into {tmp_path / 'site'}/" in stderr


@pytest.mark.slow
def test_a_pipe_gets_only_the_summary_line(tmp_path: Path) -> None:
    completed = run_cli("build", "--out", tmp_path / "site", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr.strip().splitlines() == [
        f"Built 120 runs from {sample_rows_read()} rows (0 rejected) into {tmp_path / 'site'}/ "
        "(240 run pages rendered, 0 reused)."
    ]
