"""The input cache in the user's cache folder, one entry per site, bounded; nothing of
ours beside the site after a build that finished or failed (interrupted: tests/safety/test_interrupt.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from click.testing import Result
from command_line import invoke
from safety_helpers import run_rows, write_jsonl

from nrllm_report.store.cache import (
    INPUTS_FOLDER,
    SITE_STAMP,
    STALE_SECONDS,
    default_cache_root,
    prune_cache_root,
    site_entry,
)


def build(*args: object) -> Result:
    return invoke("build", *args, "--jobs", "1")


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "inputs" / "rows.jsonl", run_rows("a", outcomes=("ok", "cancelled")) + run_rows("b"))


def entry_files(root: Path, site: Path) -> list[str]:
    return sorted(path.name for path in (site_entry(root, site.resolve()) / INPUTS_FOLDER).iterdir())


def test_the_cache_is_in_the_users_cache_folder_one_entry_per_site(
    tmp_path: Path, export: Path, cache_home: Path
) -> None:
    first, second = tmp_path / "www" / "first", tmp_path / "www" / "second"
    first.parent.mkdir()
    assert build(export, "--out", first).exit_code == 0
    assert build(export, "--out", second).exit_code == 0

    assert sorted(os.listdir(tmp_path / "www")) == ["first", "second"]  # nothing beside the sites
    assert len(list(cache_home.iterdir())) == 2
    for site in (first, second):
        assert any(name.endswith(".arrow") for name in entry_files(cache_home, site))
        assert str(site) in (site_entry(cache_home, site) / SITE_STAMP).read_text(encoding="utf-8")


def test_cache_dir_chooses_the_folder_and_no_cache_keeps_none(tmp_path: Path, export: Path, cache_home: Path) -> None:
    chosen = tmp_path / "chosen"
    assert build(export, "--out", tmp_path / "site", "--cache-dir", chosen).exit_code == 0
    assert entry_files(chosen, tmp_path / "site") and not cache_home.exists()

    assert build(export, "--out", tmp_path / "other", "--no-cache").exit_code == 0
    assert not cache_home.exists() and len(list(chosen.iterdir())) == 1


def test_the_default_folder_follows_xdg_and_falls_back_to_home(tmp_path: Path) -> None:
    assert default_cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "nrllm-report"
    home = Path.home()
    assert default_cache_root({}) == home / ".cache" / "nrllm-report"
    assert default_cache_root({"XDG_CACHE_HOME": "relative/cache"}) == home / ".cache" / "nrllm-report"


def test_entries_of_sites_not_built_for_30_days_go_and_others_stay(
    tmp_path: Path, export: Path, cache_home: Path
) -> None:
    old, recent, current = tmp_path / "old", tmp_path / "recent", tmp_path / "current"
    for site in (old, recent):
        assert build(export, "--out", site).exit_code == 0
    month_ago = time.time() - STALE_SECONDS - 3600
    os.utime(site_entry(cache_home, old) / SITE_STAMP, (month_ago, month_ago))
    foreign = cache_home / "someone-elses"
    foreign.mkdir()

    assert build(export, "--out", current).exit_code == 0

    assert not site_entry(cache_home, old).exists()
    assert site_entry(cache_home, recent).is_dir() and site_entry(cache_home, current).is_dir()
    assert foreign.is_dir()  # not an entry of ours: left alone


def test_past_the_limit_the_sites_built_longest_ago_go_first(tmp_path: Path, export: Path, cache_home: Path) -> None:
    sites = [tmp_path / f"site-{number}" for number in range(3)]
    for age, site in zip((300, 200, 100), sites):
        assert build(export, "--out", site).exit_code == 0
        then = time.time() - age
        os.utime(site_entry(cache_home, site) / SITE_STAMP, (then, then))
    one_entry = sum(path.stat().st_size for path in site_entry(cache_home, sites[0]).rglob("*") if path.is_file())

    prune_cache_root(cache_home, current=site_entry(cache_home, sites[0]), limit=2 * one_entry + one_entry // 2)

    assert [site_entry(cache_home, site).exists() for site in sites] == [True, False, True]
    prune_cache_root(cache_home, current=site_entry(cache_home, sites[0]), limit=one_entry // 2)
    assert not any(site_entry(cache_home, site).exists() for site in sites)  # the limit holds, always


def test_nothing_of_ours_beside_the_site_after_a_finished_or_failed_build(
    tmp_path: Path, export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    www = tmp_path / "www"
    www.mkdir()
    out = www / "reports"
    assert build(export, "--out", out).exit_code == 0
    assert os.listdir(www) == ["reports"]
    assert build(export, "--out", out).exit_code == 0
    assert os.listdir(www) == ["reports"]

    def full_disk(self: Path, data: bytes) -> int:
        raise OSError(28, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    # Another title: every page changes, none can be linked from the previous site, all are written.
    assert build(export, "--out", out, "--title", "Other").exit_code == 2
    assert os.listdir(www) == ["reports"]
    assert build(export, "--out", www / "new").exit_code == 2
    assert os.listdir(www) == ["reports"]  # the folder made to hold the lock went too
