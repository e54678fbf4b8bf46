"""The checked rows of an unchanged input are reused by the next build, and only then."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from nrllm_report.cli import main
from nrllm_report.writer import CACHE_SUFFIX


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
    result = CliRunner().invoke(main, ["build", str(source), "--out", str(out), "--servers", "jira_cloud"])
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def site_bytes(site: Path) -> dict[str, bytes]:
    return {str(path.relative_to(site)): path.read_bytes() for path in sorted(site.rglob("*")) if path.is_file()}


def test_a_rebuild_from_the_cache_is_the_site_a_fresh_build_makes(tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    write(source, rows(40))
    site = tmp_path / "site"
    build(source, site)
    cache = tmp_path / f".site{CACHE_SUFFIX}"
    assert sorted(path.suffix for path in cache.iterdir()) == [".arrow", ".json"]
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


def test_entries_of_inputs_no_longer_built_are_pruned(tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    write(first, rows(8))
    write(second, rows(12))
    site = tmp_path / "site"
    build(first, site)
    build(second, site)
    assert len(list((tmp_path / f".site{CACHE_SUFFIX}").iterdir())) == 2  # one input: its table and its problems
