"""Every process of a build ends with it, whatever ends it, and the previous site and archive stay.

Each build is a real process in its own session, as a CI job's is; its run pages are rendered
by two forked workers (a share of the runs each, in every language), which pause at a gate
(tests/paused_build.py) so that the test signals the build while both workers are known to be
alive. "No process of the build" is read from /proc: every process of the session, the main one
and its workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from command_line import invoke
from paused_build import CRASH_EXIT, FORK_RENDER, WATCH_PARENT
from safety_helpers import (
    alive_after,
    content_hashes,
    leftovers,
    paused_build_command,
    previous_and_large_exports,
    session_processes,
    snapshot,
)

RUNS = 40  # 40 run pages a language: each worker pauses after PAGES_BEFORE_SIGNAL of them
PAGES_BEFORE_SIGNAL = 5
WORKERS = 2
GRACE_SECONDS = 1.0  # how long after the main process ends a process of the build may still be there
DEADLINE_SECONDS = 120  # bounds a test that would otherwise hang; nothing waits for it to pass
STARTUP_GATE = Path(__file__).resolve().parents[1] / "startup_gate.py"


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small export for the previous site, a larger one for the build that is stopped."""
    return previous_and_large_exports(tmp_path_factory.mktemp("exports"), previous_runs=12, large_runs=RUNS)


def archive_of(out: Path) -> Path:
    return out.parent / "history.parquet"


@pytest.fixture
def previous_site(tmp_path: Path, exports: tuple[Path, Path]) -> Path:
    """The previous site, and beside it the archive its build wrote."""
    out = tmp_path / "beside" / "site"
    out.parent.mkdir()
    result = invoke("build", str(exports[0]), "--out", str(out), "--jobs", "1", "--archive", str(archive_of(out)))
    assert result.exit_code == 0, result.output
    return out


@dataclass(frozen=True)
class Before:
    """What the folder beside the site holds before the build that is stopped."""

    snapshot: dict[str, tuple[object, ...]]
    hashes: dict[str, str]
    archive: bytes
    beside: list[str]

    @classmethod
    def of(cls, out: Path) -> Before:
        return cls(snapshot(out), content_hashes(out), archive_of(out).read_bytes(), sorted(os.listdir(out.parent)))

    def assert_unchanged(self, out: Path) -> None:
        assert content_hashes(out) == self.hashes
        assert snapshot(out) == self.snapshot
        assert archive_of(out).read_bytes() == self.archive
        assert leftovers(out) == []
        assert sorted(os.listdir(out.parent)) == self.beside  # no staging folder, lock or temporary archive


@dataclass(frozen=True)
class Ended:
    """How a build ended: its exit code, its stderr, and the processes of it still there after the grace."""

    returncode: int
    stderr: str
    alive: list[int]

    def assert_one_line(self) -> str:
        assert "Traceback" not in self.stderr, self.stderr
        lines = self.stderr.splitlines()
        assert len(lines) == 1, self.stderr
        return lines[0]


@pytest.fixture
def builds(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """Builds started by a test; whatever of them is left at its end is killed, so no test leaves one."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        for pid in session_processes(process.pid):
            os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
        process.communicate()


def start(builds: list[subprocess.Popen[str]], command: list[str]) -> subprocess.Popen[str]:
    """``command`` as a real process in a session of its own, as a CI runner starts a job."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               encoding="utf-8", start_new_session=True)
    builds.append(process)
    return process


def start_paused_build(
    builds: list[subprocess.Popen[str]], gate: Path, large: Path, out: Path, *options: object,
) -> subprocess.Popen[str]:
    command = paused_build_command(gate, PAGES_BEFORE_SIGNAL, FORK_RENDER, large, "--out", out, "--jobs", WORKERS,
                                   "--archive", archive_of(out), *options)
    return start(builds, command)


def paused(process: subprocess.Popen[str], gate: Path, count: int) -> list[int]:
    """The pids of the ``count`` processes that paused at the gate; fails if the build ends first.

    The build cannot get past the gate on its own: the deadline only bounds a test that would hang.
    """
    deadline = time.monotonic() + DEADLINE_SECONDS
    while len(found := sorted(int(path.name.split("-")[1]) for path in gate.glob("paused-*"))) < count:
        if process.poll() is not None:
            stderr = process.stderr.read() if process.stderr else ""
            raise AssertionError(f"the build ended (exit {process.returncode}) before it paused: {stderr}")
        assert time.monotonic() < deadline, "the build did not reach its pause"
        time.sleep(0.005)
    return found


def paused_workers(process: subprocess.Popen[str], gate: Path) -> list[int]:
    """The render workers, both paused: forked processes of the build, not the build itself."""
    workers = paused(process, gate, WORKERS)
    assert process.pid not in workers
    assert set(workers) <= set(session_processes(process.pid))
    return workers


def ended(process: subprocess.Popen[str]) -> Ended:
    """Wait for the main process, then give the rest of the build GRACE_SECONDS to be gone.

    Reading the output to its end also shows that nothing of the build still holds the pipes.
    """
    returncode = process.wait(timeout=DEADLINE_SECONDS)
    alive = alive_after(process.pid, GRACE_SECONDS)
    _stdout, stderr = process.communicate(timeout=DEADLINE_SECONDS) if not alive else ("", "")
    return Ended(returncode, stderr, alive)


@pytest.fixture
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gate")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signal_number", "to_group", "exit_code"),
    [
        pytest.param(signal.SIGTERM, False, 143, id="SIGTERM-to-the-build"),
        pytest.param(signal.SIGTERM, True, 143, id="SIGTERM-to-the-group"),
        pytest.param(signal.SIGINT, True, 130, id="SIGINT-ctrl-c"),
        pytest.param(signal.SIGHUP, False, 129, id="SIGHUP-hang-up"),
    ],
)
def test_a_signal_mid_render_ends_every_process_of_the_build_and_leaves_the_previous_site(
    previous_site: Path, exports: tuple[Path, Path], gate: Path, builds: list[subprocess.Popen[str]],
    signal_number: int, to_group: bool, exit_code: int,
) -> None:
    out, before = previous_site, Before.of(previous_site)
    process = start_paused_build(builds, gate, exports[1], out)
    paused_workers(process, gate)

    (os.killpg if to_group else os.kill)(process.pid, signal_number)
    result = ended(process)

    assert result.alive == []
    assert result.returncode == exit_code, result.stderr
    line = result.assert_one_line()
    assert signal.Signals(signal_number).name in line and "the previous site is unchanged" in line
    before.assert_unchanged(out)


@pytest.mark.slow
def test_a_signal_mid_render_of_one_language_ends_every_worker(
    tmp_path: Path, exports: tuple[Path, Path], gate: Path, builds: list[subprocess.Popen[str]],
) -> None:
    """One language: each worker renders and writes its share of the runs, and pauses there."""
    out = tmp_path / "site"
    process = start_paused_build(builds, gate, exports[1], out, "--lang", "en")
    paused_workers(process, gate)

    os.kill(process.pid, signal.SIGTERM)
    result = ended(process)

    assert result.alive == []
    assert result.returncode == 143, result.stderr
    assert "SIGTERM" in result.assert_one_line()
    assert os.listdir(tmp_path) == []  # no site, no staging folder, no archive: none was there before


@pytest.mark.slow
@pytest.mark.parametrize("notice", [pytest.param((), id="told-by-the-kernel"),
                                    pytest.param((WATCH_PARENT,), id="watching-from-a-thread")])
def test_a_killed_build_takes_its_workers_with_it(
    previous_site: Path, exports: tuple[Path, Path], gate: Path, builds: list[subprocess.Popen[str]],
    notice: tuple[str, ...],
) -> None:
    """SIGKILL cannot be caught: the workers notice their parent is gone, and let go of the lock and the pipes."""
    out, hashes, archive = previous_site, content_hashes(previous_site), archive_of(previous_site).read_bytes()
    process = start_paused_build(builds, gate, exports[1], out, *notice)
    paused_workers(process, gate)

    os.kill(process.pid, signal.SIGKILL)
    result = ended(process)

    assert result.alive == []
    assert result.returncode == -signal.SIGKILL
    assert content_hashes(out) == hashes
    assert archive_of(out).read_bytes() == archive
    again = invoke("build", str(exports[0]), "--out", str(out), "--jobs", "1")
    assert again.exit_code == 0, again.output  # no worker holds the lock
    assert leftovers(out) == []


@pytest.mark.parametrize("crash", [pytest.param("exit", id="worker-exits"), pytest.param("kill", id="worker-killed")])
def test_a_crashing_worker_fails_the_build_in_one_line_and_stops_the_other(
    previous_site: Path, exports: tuple[Path, Path], gate: Path, builds: list[subprocess.Popen[str]], crash: str,
) -> None:
    """A worker that ends on its own (a crash) or is killed (as the OOM killer does) fails the build: exit 1."""
    out, before = previous_site, Before.of(previous_site)
    process = start_paused_build(builds, gate, exports[1], out)
    crashing, _other = paused_workers(process, gate)

    if crash == "exit":
        (gate / f"crash-{crashing}").touch()
    else:
        os.kill(crashing, signal.SIGKILL)
    result = ended(process)

    assert result.alive == []
    assert result.returncode == 1, result.stderr
    line = result.assert_one_line()
    expected = f"exit code {CRASH_EXIT}" if crash == "exit" else "SIGKILL"
    assert expected in line and "the previous site is unchanged" in line, line
    before.assert_unchanged(out)


@pytest.mark.parametrize(
    ("signal_number", "exit_code"),
    [pytest.param(signal.SIGINT, 130, id="ctrl-c"), pytest.param(signal.SIGTERM, 143, id="SIGTERM")],
)
def test_a_signal_while_starting_up_is_one_line_and_its_exit_code(
    tmp_path: Path, exports: tuple[Path, Path], gate: Path, builds: list[subprocess.Popen[str]],
    signal_number: int, exit_code: int,
) -> None:
    """Caught while pyarrow is being imported, before any option is parsed: nothing written."""
    out = tmp_path / "site"
    process = start(builds, [sys.executable, str(STARTUP_GATE), str(gate), "build", str(exports[0]),
                             "--out", str(out), "--archive", str(archive_of(out))])
    paused(process, gate, 1)

    os.killpg(process.pid, signal_number)
    result = ended(process)

    assert result.alive == []
    assert result.returncode == exit_code, result.stderr
    assert signal.Signals(signal_number).name in result.assert_one_line()
    assert os.listdir(tmp_path) == []
