"""The output folder is the tool's, and only the tool's: refusals, rebuilds, leftovers, locks, failures."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from build_faults import fail_on_template, fail_to_swap_the_site_in, fail_when_disk_is_full
from click.testing import Result
from command_line import invoke, run_cli
from safety_helpers import (
    content_hashes,
    count_files,
    leftovers,
    parse_page,
    paused_build_command,
    release,
    run_rows,
    site_files,
    snapshot,
    staging_folders,
    wait_until_paused,
    write_export,
    write_jsonl,
)

from nrllm_report.output import writer
from nrllm_report.output.writer import MARKER_NAME, RETIRED_INFIX, STAGING_INFIX


def build(*args: object) -> Result:
    """``nrllm-report build`` in-process, one job, so monkeypatches reach every page."""
    return invoke("build", *args, "--jobs", "1")


def first_input(folder: Path) -> Path:
    rows = (
        run_rows("alpha", day=0)
        + run_rows("beta", day=1, outcomes=("ok", "failed"))
        + run_rows("gamma", day=2, tool="mcp_jira_search", outcomes=("cancelled",))
    )
    return write_jsonl(folder / "first.jsonl", rows)


def second_input(folder: Path) -> Path:
    """``gamma`` (and with it the only ``jira`` call) is gone; ``beta`` has one more failed call."""
    rows = run_rows("alpha", day=0) + run_rows("beta", day=1, outcomes=("ok", "failed", "failed"))
    return write_jsonl(folder / "second.jsonl", rows)


def summary(site: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((site / "summary.json").read_text(encoding="utf-8"))
    return data


def listing(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir())


def make_files(root: Path, files: dict[str, bytes]) -> None:
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


# --------------------------------------------------------------------------- a folder that is not ours

FOREIGN_FOLDERS = [
    pytest.param({"notes.txt": b"my notes\n"}, id="one-file"),
    pytest.param({".git/HEAD": b"ref: refs/heads/main\n"}, id="only-a-hidden-folder"),
    pytest.param(
        {"index.html": b"<p>their site</p>", "en/index.html": b"<p>theirs</p>", "summary.json": b"{}"},
        id="another-static-site",
    ),
    pytest.param({f"{MARKER_NAME}/inside.txt": b"x"}, id="folder-named-like-our-marker"),
]


@pytest.mark.parametrize("files", FOREIGN_FOLDERS)
def test_a_folder_of_someone_elses_files_is_refused_and_nothing_is_touched(
    tmp_path: Path, files: dict[str, bytes]
) -> None:
    source = first_input(tmp_path)
    out = tmp_path / "docs"
    make_files(out, files)
    before, beside_before = snapshot(out), listing(tmp_path)

    completed = run_cli("build", source, "--out", out)

    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    message = completed.stderr.strip().splitlines()
    assert len(message) == 1, completed.stderr
    assert str(out) in message[0] and "--force" in message[0] and "did not write" in message[0]
    assert snapshot(out) == before
    assert listing(tmp_path) == beside_before


@pytest.mark.parametrize("force", [pytest.param(False, id="plain"), pytest.param(True, id="with-force")])
def test_an_out_that_is_a_file_is_refused_even_with_force(tmp_path: Path, force: bool) -> None:
    source = first_input(tmp_path)
    out = tmp_path / "report"
    out.write_bytes(b"not a folder")
    before = snapshot(tmp_path)

    result = build(source, "--out", out, *(["--force"] if force else []))

    assert result.exit_code == 2, result.output
    assert str(out) in result.stderr
    assert "is a file" in result.stderr or "not a folder" in result.stderr
    assert snapshot(tmp_path) == before


def test_force_replaces_a_foreign_folder_with_the_site(tmp_path: Path) -> None:
    source = first_input(tmp_path)
    out = tmp_path / "docs"
    make_files(out, {"notes.txt": b"my notes\n", "old/page.html": b"<p>old</p>"})

    result = build(source, "--out", out, "--force")

    assert result.exit_code == 0, result.output
    assert not (out / "notes.txt").exists() and not (out / "old").exists()
    assert (out / MARKER_NAME).is_file() and (out / "en" / "index.html").is_file()
    assert summary(out)["runs"] == 3
    assert leftovers(out) == []


# --------------------------------------------------------------------------- folders it may build into


@pytest.mark.parametrize("state", ["absent", "empty", "our-previous-site"])
def test_an_absent_or_empty_folder_or_our_own_site_is_built_into(tmp_path: Path, state: str) -> None:
    out = tmp_path / "site"
    if state == "empty":
        out.mkdir()
    elif state == "our-previous-site":
        assert build(first_input(tmp_path), "--out", out).exit_code == 0

    result = build(second_input(tmp_path), "--out", out)

    assert result.exit_code == 0, result.output
    assert summary(out)["runs"] == 2
    assert summary(out)["outcomes"] == {"ok": 2, "failed": 2, "cancelled": 0}
    assert leftovers(out) == []


def test_a_rebuild_is_the_same_as_a_fresh_build_and_drops_pages_of_vanished_runs(tmp_path: Path) -> None:
    out, fresh = tmp_path / "site", tmp_path / "fresh"
    assert build(first_input(tmp_path), "--out", out).exit_code == 0
    old_pages = set(site_files(out))
    assert {"en/runs/gamma.html", "de/runs/gamma.html", "en/servers/jira.html"} <= old_pages

    assert build(second_input(tmp_path), "--out", out).exit_code == 0
    assert build(second_input(tmp_path), "--out", fresh).exit_code == 0

    files = site_files(out)
    for gone in ("en/runs/gamma.html", "de/runs/gamma.html", "en/servers/jira.html", "de/servers/jira.html"):
        assert gone not in files
    index_links = [href for href, _text in parse_page(out / "en" / "index.html").links]
    assert "runs/gamma.html" not in index_links and "runs/beta.html" in index_links
    assert content_hashes(out) == content_hashes(fresh)


# --------------------------------------------------------------------------- leftovers of killed builds


def leftover_name(out: Path, infix: str, pid: int = 999_999) -> Path:
    return out.parent / f".{out.name}{infix}{pid}"


@pytest.mark.parametrize(
    "infix", [pytest.param(STAGING_INFIX, id="staging"), pytest.param(RETIRED_INFIX, id="retired")]
)
def test_a_folder_left_by_a_killed_build_is_cleaned_by_the_next_build(tmp_path: Path, infix: str) -> None:
    out = tmp_path / "site"
    assert build(first_input(tmp_path), "--out", out).exit_code == 0
    left = leftover_name(out, infix)
    make_files(left, {"en/runs/half.html": b"<p>half a page", "assets/style.css": b""})

    result = build(second_input(tmp_path), "--out", out)

    assert result.exit_code == 0, result.output
    assert not left.exists()
    assert leftovers(out) == []
    assert summary(out)["runs"] == 2


def test_a_build_killed_in_the_middle_of_the_swap_loses_no_site(tmp_path: Path) -> None:
    """Killed between moving the old site aside and moving the new one in, ``out`` is missing."""
    out = tmp_path / "site"
    assert build(first_input(tmp_path), "--out", out).exit_code == 0
    previous = content_hashes(out)
    os.replace(out, leftover_name(out, RETIRED_INFIX))
    make_files(leftover_name(out, STAGING_INFIX, 999_998), {"index.html": b"<p>half"})

    result = build(second_input(tmp_path), "--out", out)

    assert result.exit_code == 0, result.output
    assert summary(out)["runs"] == 2
    assert content_hashes(out) != previous
    assert leftovers(out) == []


def test_after_a_kill_mid_swap_a_failing_build_brings_the_previous_site_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "site"
    assert build(first_input(tmp_path), "--out", out).exit_code == 0
    previous = content_hashes(out)
    os.replace(out, leftover_name(out, RETIRED_INFIX))
    fail_on_template(monkeypatch, "run.html")

    result = build(second_input(tmp_path), "--out", out)

    assert result.exit_code != 0, "the build was meant to fail but did not"
    assert content_hashes(out) == previous
    assert leftovers(out) == []


def test_the_next_build_leaves_other_folders_beside_the_site_alone(tmp_path: Path) -> None:
    out = tmp_path / "site"
    neighbours = {
        f".site-b{STAGING_INFIX}4242/en/index.html": b"a live build of another site",
        f".site-b{RETIRED_INFIX}4242/index.html": b"another site's retired folder",
        ".site.notes/todo.txt": b"a user's own folder",
        "site-archive/index.html": b"an old copy",
    }
    make_files(tmp_path, neighbours)
    before = {name: snapshot(tmp_path / name.split("/")[0]) for name in neighbours}

    result = build(first_input(tmp_path), "--out", out)

    assert result.exit_code == 0, result.output
    assert {name: snapshot(tmp_path / name.split("/")[0]) for name in neighbours} == before


# --------------------------------------------------------------------------- two builds at once


@contextlib.contextmanager
def held_lock(out: Path) -> Iterator[Path]:
    """The lock a running build holds on ``out``, taken the way SiteWriter takes it:
    an flock on the folder itself (which a build makes when it is absent)."""
    out.mkdir(exist_ok=True)
    descriptor = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        yield out
    finally:
        os.close(descriptor)


def test_a_second_build_while_one_holds_the_folder_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "site"
    # The first build's previous site, made before it took the lock.
    assert build(first_input(tmp_path), "--out", out).exit_code == 0
    source = second_input(tmp_path)
    before, beside_before = snapshot(out), listing(tmp_path)

    with held_lock(out):
        completed = run_cli("build", source, "--out", out)

    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    assert "another nrllm-report build is writing into this folder" in completed.stderr
    assert str(out) in completed.stderr
    assert snapshot(out) == before
    assert listing(tmp_path) == beside_before  # no staging folder, nothing new


def test_the_refusal_ends_with_the_build_that_held_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "site"
    with held_lock(out):
        assert build(first_input(tmp_path), "--out", out).exit_code == 2
    assert build(first_input(tmp_path), "--out", out).exit_code == 0
    assert summary(out)["runs"] == 3


@pytest.mark.slow
def test_two_real_builds_at_once_do_not_mix_and_the_first_site_is_whole(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    write_export(big, 200, seed=11)
    out = tmp_path / "site"
    gate = tmp_path / "gate"
    intruder = write_jsonl(tmp_path / "intruder.jsonl", run_rows("intruder-run"))
    # The first build pauses part-way through its run pages, holding the folder, until it is released.
    first = subprocess.Popen(paused_build_command(gate, 20, big, "--out", out, "--jobs", "1"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_paused(first, gate)
        assert staging_folders(out), "the first build has no staging folder while it writes pages"
        second = build(intruder, "--out", out)
        assert first.poll() is None, "the first build cannot end before it is released"
    finally:
        release(gate)
        _stdout, stderr = first.communicate(timeout=120)

    assert second.exit_code == 2, second.output
    assert "another nrllm-report build is writing into this folder" in second.stderr
    assert first.returncode == 0, stderr
    assert summary(out)["runs"] == 200
    files = set(site_files(out))
    assert not any("intruder" in name for name in files)
    marker = json.loads((out / MARKER_NAME).read_text(encoding="utf-8"))
    assert set(marker["pages"]) <= files
    index_runs = [href for href, _text in parse_page(out / "en" / "index.html").links if href.startswith("runs/")]
    assert index_runs and all(f"en/{href}" in files for href in index_runs)
    assert sum(1 for name in files if name.startswith("en/runs/")) == 200
    assert leftovers(out) == []
    assert count_files(out) == len(files)


# --------------------------------------------------------------------------- a build that fails


FAILURES = [
    pytest.param(lambda monkeypatch: fail_on_template(monkeypatch, "run.html"), id="rendering-a-run-page"),
    pytest.param(lambda monkeypatch: fail_on_template(monkeypatch, "servers.html"), id="rendering-the-servers-page"),
    pytest.param(lambda monkeypatch: fail_on_template(monkeypatch, "problems.html"), id="rendering-the-problems-page"),
    pytest.param(lambda monkeypatch: fail_when_disk_is_full(monkeypatch, 5), id="disk-full"),
    pytest.param(fail_to_swap_the_site_in, id="swapping-the-site-in"),
]


@pytest.mark.parametrize("break_build", FAILURES)
@pytest.mark.parametrize("previous", ["our-previous-site", "absent"])
def test_a_failed_build_leaves_the_previous_site_exactly_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, break_build: Any, previous: str
) -> None:
    out = tmp_path / "site"
    if previous == "our-previous-site":
        assert build(first_input(tmp_path), "--out", out).exit_code == 0
    before = snapshot(out) if out.exists() else None
    source = second_input(tmp_path)
    break_build(monkeypatch)

    result = build(source, "--out", out)

    assert result.exit_code != 0, "the build was meant to fail but did not"
    assert (snapshot(out) if out.exists() else None) == before
    assert leftovers(out) == []


@pytest.mark.parametrize("after_writes", [pytest.param(0, id="first-file"), pytest.param(3, id="part-way")])
def test_a_full_disk_is_reported_in_one_line_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after_writes: int
) -> None:
    out = tmp_path / "site"
    assert build(first_input(tmp_path), "--out", out).exit_code == 0
    source = second_input(tmp_path)
    fail_when_disk_is_full(monkeypatch, after_writes)

    result = build(source, "--out", out)

    assert isinstance(result.exception, SystemExit), f"not handled: {result.exception!r}"
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert str(out) in lines[0] and "No space left on device" in lines[0]
    assert "previous site is unchanged" in lines[0]


# --------------------------------------------------------------------------- an out that is a link


def test_an_out_that_links_to_our_site_rebuilds_the_site_it_points_to_and_keeps_the_link(tmp_path: Path) -> None:
    """``--out current`` where ``current -> releases/v1``, as a web server's document root often is."""
    target = tmp_path / "releases" / "v1"
    target.parent.mkdir()
    assert build(first_input(tmp_path), "--out", target).exit_code == 0
    link = tmp_path / "current"
    link.symlink_to(Path("releases") / "v1", target_is_directory=True)

    result = build(second_input(tmp_path), "--out", link)

    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(Path("releases") / "v1")
    assert summary(target)["runs"] == 2
    assert leftovers(link) == [] and leftovers(target) == []


def test_an_out_that_links_to_someone_elses_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "theirs"
    make_files(target, {"notes.txt": b"mine"})
    link = tmp_path / "current"
    link.symlink_to(target, target_is_directory=True)
    before = snapshot(target)

    result = build(first_input(tmp_path), "--out", link)

    assert result.exit_code == 2, result.output
    assert link.is_symlink() and snapshot(target) == before


def test_a_large_retired_site_is_removed_in_the_background_and_the_folder_is_free_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "BACKGROUND_REMOVAL_PAGES", 1)
    site = tmp_path / "site"
    source = first_input(tmp_path)
    assert build(source, "--out", site).exit_code == 0
    first = content_hashes(site)
    (site / "en" / "runs" / "stale.html").write_text("from the previous site", encoding="utf-8")
    assert build(source, "--out", site).exit_code == 0  # retires the first site to a detached remover
    assert build(source, "--out", site).exit_code == 0  # not refused: the remover holds no lock
    deadline = time.monotonic() + 60
    while leftovers(site):  # the previous site, removed from inside the new one
        assert time.monotonic() < deadline, f"never removed: {leftovers(site)}"
        time.sleep(0.05)
    assert content_hashes(site) == first
    assert sorted(os.listdir(tmp_path)) == sorted([site.name, source.name])  # nothing of ours beside the site


def lock_is_free(out: Path) -> bool:
    """Whether a build could take the lock of ``out`` now (a new open file, as another process has)."""
    descriptor = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    finally:
        os.close(descriptor)
    return True


def test_the_remover_of_a_large_retired_site_is_started_only_after_the_lock_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remover forked while the build holds its lock shares it until it closes its descriptors:
    a build starting in that moment was refused (issue 15). Checked where the remover starts."""
    monkeypatch.setattr(writer, "BACKGROUND_REMOVAL_PAGES", 1)
    site = tmp_path / "site"
    source = first_input(tmp_path)
    assert build(source, "--out", site).exit_code == 0
    free_when_started: list[bool] = []
    start_remover = writer._remove_tree_in_background

    def remover(path: Path) -> None:
        free_when_started.append(lock_is_free(site))
        start_remover(path)

    monkeypatch.setattr(writer, "_remove_tree_in_background", remover)
    assert build(source, "--out", site).exit_code == 0
    assert free_when_started == [True]
