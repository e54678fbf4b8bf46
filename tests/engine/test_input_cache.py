"""The checked rows of an unchanged input are reused by the next build, and only then."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from command_line import invoke

from nrllm_report.pipeline import sweep
from nrllm_report.store.cache import INPUTS_FOLDER, site_entry


def rows(count: int, extra: dict | None = None) -> list[dict]:
    made = [
        {"run": f"run-{index // 4}", "sequence": index % 4, "kind": "tool", "crdate": 1_757_000_000 + index,
         "payload": {"toolName": "mcp_jira_cloud_search", "toolIsError": index % 3 == 0}}
        for index in range(count)
    ]
    made.append({"run": "bad", "sequence": 0, "kind": "tool", "payload": {"toolIsError": "false"}})
    made.append({"run": "warned", "sequence": 0, "kind": "tool", "payload": {"toolName": "x"}})
    if extra:
        made.append(extra)
    return made


def write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


def build(source: Path, out: Path) -> dict:
    result = invoke("build", str(source), "--out", str(out), "--servers", "jira_cloud")
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def site_bytes(site: Path) -> dict[str, bytes]:
    return {str(path.relative_to(site)): path.read_bytes() for path in sorted(site.rglob("*")) if path.is_file()}


def site_cache(cache_home: Path, site: Path) -> Path:
    """Where the input cache of ``site`` is: its entry in the user's cache folder."""
    return site_entry(cache_home, site.resolve()) / INPUTS_FOLDER


def cache_entries(cache: Path) -> dict[str, list[str]]:
    """The cache's files by entry: its checked rows and problems, its swept partition and figures."""
    entries: dict[str, list[str]] = {}
    for path in sorted(cache.iterdir()):
        key, _, rest = path.name.partition(".")
        entries.setdefault(key, []).append(rest)
    return entries


def test_a_rebuild_from_the_cache_is_the_site_a_fresh_build_makes(tmp_path: Path, cache_home: Path) -> None:
    source = tmp_path / "rows.jsonl"
    write(source, rows(40))
    site = tmp_path / "site"
    build(source, site)
    cache = site_cache(cache_home, site)
    entry = cache_entries(cache)
    assert list(entry.values()) == [["arrow", "json", "kept-000-256.arrow", "kept-000-256.json", "swept.json"]]
    summary = build(source, site)  # read from the cache this time
    assert summary["rows_read"] == 42 and summary["rows_rejected"] == 1
    fresh = tmp_path / "fresh" / "site"
    fresh.parent.mkdir()
    build(source, fresh)
    assert site_bytes(site) == site_bytes(fresh)
    problems = (site / "de" / "problems.html").read_text(encoding="utf-8")
    assert "flag-not-boolean" in problems and "tool-step-without-flag" in problems


def test_a_changed_input_is_read_again(tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    write(source, rows(40))
    site = tmp_path / "site"
    assert build(source, site)["runs"] == 11
    write(source, rows(40, {"run": "new", "sequence": 0, "kind": "llm"}))
    assert build(source, site)["runs"] == 12


def test_an_edit_that_keeps_size_and_time_is_still_seen(tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    write(source, rows(40))
    stat = source.stat()
    site = tmp_path / "site"
    assert build(source, site)["outcomes"]["failed"] == 14
    # ': true' and ':false' have the same length: one failed call becomes ok, the size stays.
    source.write_text(source.read_text(encoding="utf-8").replace(": true", ":false", 1), encoding="utf-8")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert source.stat().st_size == stat.st_size
    assert build(source, site)["outcomes"]["failed"] == 13


def test_entries_of_inputs_no_longer_built_are_pruned(tmp_path: Path, cache_home: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    write(first, rows(8))
    write(second, rows(12))
    site = tmp_path / "site"
    build(first, site)
    build(second, site)
    assert len(cache_entries(site_cache(cache_home, site))) == 1  # the second input's only


# ---------------------------------------------------------------- the first pass kept with the cache


def build_args(out: Path, *inputs: Path, extra: tuple[str, ...] = ()) -> dict:
    result = invoke("build", *map(str, inputs), "--out", str(out), "--servers", "jira_cloud", "--jobs", "1", *extra)
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def counting_sweeps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of inputs each sweep of ranges took, one entry per call."""
    calls: list[int] = []
    sweep_ranges = sweep.sweep_ranges

    def counting(job, *args, **options):  # type: ignore[no-untyped-def]
        calls.append(len(job.inputs))
        return sweep_ranges(job, *args, **options)

    monkeypatch.setattr(sweep, "sweep_ranges", counting)
    return calls


def test_a_new_file_of_new_runs_is_the_only_one_swept_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    write(old, rows(40))
    write(new, [{**row, "run": f"next-{row['run']}"} for row in rows(12)])
    site = tmp_path / "site"
    build_args(site, old)
    calls = counting_sweeps(monkeypatch)
    build_args(site, old, new)
    assert calls == [1]  # the new file; the old one's partitions come from the cache
    fresh = tmp_path / "fresh" / "site"
    fresh.parent.mkdir()
    build_args(fresh, old, new)
    assert site_bytes(site) == site_bytes(fresh)


def test_a_new_file_with_rows_of_an_old_run_is_swept_together_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    write(old, rows(40))
    write(new, [{"run": "run-2", "sequence": 9, "kind": "llm"}, {"run": "run-3", "sequence": 0, "kind": "llm"}])
    site = tmp_path / "site"
    build_args(site, old)
    calls = counting_sweeps(monkeypatch)
    summary = build_args(site, old, new)
    assert calls == [2]  # both files at once: run-2 and run-3 have rows in both
    assert summary["rows_rejected"] == 2  # the flag that is not a boolean, and run-3's repeated step 0
    fresh = tmp_path / "fresh" / "site"
    fresh.parent.mkdir()
    build_args(fresh, old, new)
    assert site_bytes(site) == site_bytes(fresh)
    assert "duplicate-step" in (site / "en" / "problems.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_kept_first_pass_is_not_used_for_another_time_zone_or_when_it_is_damaged(
    tmp_path: Path, cache_home: Path
) -> None:
    source = tmp_path / "rows.jsonl"
    write(source, rows(40))
    site = tmp_path / "site"
    build_args(site, source)
    build_args(site, source, extra=("--timezone", "Pacific/Kiritimati"))
    fresh = tmp_path / "fresh" / "site"
    fresh.parent.mkdir()
    build_args(fresh, source, extra=("--timezone", "Pacific/Kiritimati"))
    assert site_bytes(site) == site_bytes(fresh)
    [record] = site_cache(cache_home, site).glob("*.swept.json")
    record.write_text('{"timezone": "Pacific/Kiritimati", "ranges": [[0, 256]], "partitions": [{"file": "x"}]}')
    build_args(site, source, extra=("--timezone", "Pacific/Kiritimati"))
    for damaged in ('{"timezone": "Pacific/Kiritimati", "ranges": [[0, 256]], "partitions": [{"fi', "[]"):
        record.write_text(damaged)  # cut short, or not a record at all
        build_args(site, source, extra=("--timezone", "Pacific/Kiritimati"))
    assert site_bytes(site) == site_bytes(fresh)
