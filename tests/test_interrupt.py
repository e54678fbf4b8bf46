"""Issue 5: a real build interrupted part-way (Ctrl-C, or killed) leaves the previous site exactly as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrllm_report.cli import main
from safety_helpers import (
    cli_command,
    content_hashes,
    count_files,
    leftovers,
    snapshot,
    staging_folders,
    write_export,
)

LARGE_RUNS = 3000  # about 60,000 rows and 6,000 run pages: several seconds of work to interrupt
FILES_BEFORE_SIGNAL = 20


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small export for the previous site and a large one for the build that is interrupted."""
    folder = tmp_path_factory.mktemp("exports")
    small, large = folder / "small.jsonl", folder / "large.jsonl"
    write_export(small, 25, seed=3)
    write_export(large, LARGE_RUNS, seed=4)
    return small, large


@pytest.fixture
def previous_site(tmp_path: Path, exports: tuple[Path, Path]) -> Path:
    """The previous site, and beside it the archive its build wrote (issue 12)."""
    out = tmp_path / "site"
    result = CliRunner().invoke(main, ["build", str(exports[0]), "--out", str(out), "--jobs", "1",
                                       "--archive", str(archive_of(out))])
    assert result.exit_code == 0, result.output
    return out


def archive_of(out: Path) -> Path:
    return out.parent / "history.parquet"


def start_build(large: Path, out: Path, jobs: int) -> subprocess.Popen[str]:
    """The large build as a real process in its own process group, as a shell job would be."""
    return subprocess.Popen(
        cli_command("build", large, "--out", out, "--jobs", jobs, "--archive", archive_of(out)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        start_new_session=True,
    )


def wait_until_pages_are_written(process: subprocess.Popen[str], out: Path) -> None:
    """Poll until the build's staging folder holds some pages; fail if the build ends first."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the build ended (exit {process.returncode}) before it could be interrupted; "
                        f"raise LARGE_RUNS. stderr: {process.stderr.read() if process.stderr else ''}")
        if any(count_files(folder) >= FILES_BEFORE_SIGNAL for folder in staging_folders(out)):
            return
        time.sleep(0.005)
    process.kill()
    pytest.fail("the build wrote no pages within 90 seconds")


@pytest.mark.parametrize("jobs", [pytest.param(1, id="one-job"), pytest.param(2, id="two-jobs")])
def test_ctrl_c_part_way_leaves_the_previous_site_intact_and_no_temporary_folder(
    previous_site: Path, exports: tuple[Path, Path], jobs: int
) -> None:
    out = previous_site
    before, hashes = snapshot(out), content_hashes(out)
    archive, beside = archive_of(out).read_bytes(), sorted(os.listdir(out.parent))
    process = start_build(exports[1], out, jobs)
    try:
        wait_until_pages_are_written(process, out)
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
    again = CliRunner().invoke(main, ["build", str(exports[0]), "--out", str(out), "--jobs", "1",
                                      "--archive", str(archive_of(out))])
    assert again.exit_code == 0, again.output
    assert archive_of(out).read_bytes() == archive  # the same export again: the same archive


def test_a_killed_build_leaves_the_previous_site_and_the_next_build_cleans_up(
    previous_site: Path, exports: tuple[Path, Path]
) -> None:
    out = previous_site
    hashes = content_hashes(out)
    process = start_build(exports[1], out, 1)
    try:
        wait_until_pages_are_written(process, out)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.communicate(timeout=60)

    assert process.returncode == -signal.SIGKILL
    assert content_hashes(out) == hashes
    assert leftovers(out), "a killed build cannot clean up; this test needs its staging folder"

    result = CliRunner().invoke(main, ["build", str(exports[0]), "--out", str(out), "--jobs", "1"])

    assert result.exit_code == 0, result.output
    assert leftovers(out) == []
    assert sorted(os.listdir(out.parent)) == ["history.parquet", "site"]
    assert content_hashes(out) == hashes  # the same small input: the same site
