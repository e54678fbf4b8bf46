"""A real build interrupted part-way (Ctrl-C, or killed) leaves the previous site exactly as it was."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from command_line import invoke
from safety_helpers import (
    content_hashes,
    count_files,
    leftovers,
    paused_build_command,
    previous_and_large_exports,
    snapshot,
    staging_folders,
    wait_until_paused,
)

LARGE_RUNS = 200  # 400 run pages: the build pauses after PAGES_BEFORE_SIGNAL of them, part-way
PAGES_BEFORE_SIGNAL = 20


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small export for the previous site and a large one for the build that is interrupted."""
    return previous_and_large_exports(tmp_path_factory.mktemp("exports"), previous_runs=25, large_runs=LARGE_RUNS)


@pytest.fixture
def previous_site(tmp_path: Path, exports: tuple[Path, Path]) -> Path:
    """The previous site, and beside it the archive its build wrote (issue 12)."""
    out = tmp_path / "site"
    result = invoke("build", str(exports[0]), "--out", str(out), "--jobs", "1", "--archive", str(archive_of(out)))
    assert result.exit_code == 0, result.output
    return out


def archive_of(out: Path) -> Path:
    return out.parent / "history.parquet"


@pytest.fixture
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the paused build says it paused: away from the folder beside the site, which is checked."""
    return tmp_path_factory.mktemp("gate")


def start_build(large: Path, out: Path, jobs: int, gate: Path) -> subprocess.Popen[str]:
    """The large build as a real process in its own process group, as a shell job would be;
    it pauses (until a signal ends it) once it has written PAGES_BEFORE_SIGNAL run pages."""
    return subprocess.Popen(
        paused_build_command(gate, PAGES_BEFORE_SIGNAL, large, "--out", out, "--jobs", jobs,
                             "--archive", archive_of(out)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        start_new_session=True,
    )


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [pytest.param(1, id="one-job"), pytest.param(2, id="two-jobs")])
def test_ctrl_c_part_way_leaves_the_previous_site_intact_and_no_temporary_folder(
    previous_site: Path, exports: tuple[Path, Path], jobs: int, gate: Path
) -> None:
    out = previous_site
    before, hashes = snapshot(out), content_hashes(out)
    archive, beside = archive_of(out).read_bytes(), sorted(os.listdir(out.parent))
    process = start_build(exports[1], out, jobs, gate)
    try:
        wait_until_paused(process, gate)
        assert any(count_files(folder) >= PAGES_BEFORE_SIGNAL for folder in staging_folders(out))
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends: the whole group
        _stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()

    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert "previous site is unchanged" in stderr
    assert content_hashes(out) == hashes
    assert snapshot(out) == before
    assert leftovers(out) == []
    assert archive_of(out).read_bytes() == archive  # the archive as it was, byte for byte
    assert sorted(os.listdir(out.parent)) == beside  # no lock, no work folder, no temporary archive
    # No stale lock or staging folder stands in the way of the next build.
    again = invoke("build", str(exports[0]), "--out", str(out), "--jobs", "1", "--archive", str(archive_of(out)))
    assert again.exit_code == 0, again.output
    assert archive_of(out).read_bytes() == archive  # the same export again: the same archive


@pytest.mark.slow
def test_a_killed_build_leaves_the_previous_site_and_the_next_build_cleans_up(
    previous_site: Path, exports: tuple[Path, Path], gate: Path
) -> None:
    out = previous_site
    hashes = content_hashes(out)
    process = start_build(exports[1], out, 1, gate)
    try:
        wait_until_paused(process, gate)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.communicate(timeout=60)

    assert process.returncode == -signal.SIGKILL
    assert content_hashes(out) == hashes
    assert leftovers(out), "a killed build cannot clean up; this test needs its staging folder"

    result = invoke("build", str(exports[0]), "--out", str(out), "--jobs", "1")

    assert result.exit_code == 0, result.output
    assert leftovers(out) == []
    assert sorted(os.listdir(out.parent)) == ["history.parquet", "site"]
    assert content_hashes(out) == hashes  # the same small input: the same site
