"""The archive carried from build to build (``build --archive``, ``--keep-days``).

A history fed as overlapping exports gives the site of the whole history at once; a run
in the newer export wins; the archive is refused when it is not one, and left byte for
byte as it was by a build that fails or is interrupted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from build_faults import fail_on_template, fail_to_swap_the_site_in, fail_writes
from click.testing import Result
from command_line import invoke
from safety_helpers import DAY, FIRST_CRDATE, content_hashes, parse_page, run_rows, write_jsonl

from nrllm_report.core.schema import ARCHIVE_MARKER_KEY, CANONICAL_SCHEMA

SERVERS = "github,jira_cloud"
OUTCOME_CYCLE = (("ok",), ("ok", "failed"), ("cancelled",), ("ok", "ok"), ("failed", "cancelled"))
ARCHIVE_NOTE = re.compile(r'<p class="archive-note">[^<]*</p>\n')
CHANGED_RUN = "run-day20-a"
MARKER = ".nrllm-report-site.json"


def build(*args: object) -> Result:
    return invoke("build", *args, "--servers", SERVERS, "--jobs", "1")


def day_runs(day: int) -> list[dict[str, Any]]:
    """Two runs a day on two servers, with every outcome across the days."""
    rows = []
    for letter, tool in (("a", "mcp_github_create_issue"), ("b", "mcp_jira_cloud_search")):
        outcomes = OUTCOME_CYCLE[(day * 2 + (letter == "b")) % len(OUTCOME_CYCLE)]
        rows += run_rows(f"run-day{day:02d}-{letter}", day=day, tool=tool, outcomes=outcomes)
    return rows


def history(days: Iterable[int], newer: bool = False) -> list[dict[str, Any]]:
    """The runs of ``days``. CHANGED_RUN (day 20) has an ok and a failed call, written before
    ADR-191 (the flag alone); ``newer``: the newer export restates the failure as cancelled
    and has a step more."""
    rows = [row for day in days for row in day_runs(day) if row["run"] != CHANGED_RUN]
    if 20 not in days:
        return rows
    changed = run_rows(CHANGED_RUN, day=20, outcomes=("ok", "failed"))
    changed[2]["payload"] = {"toolName": changed[2]["payload"]["toolName"], "toolIsError": True}
    if newer:
        changed[2]["payload"]["toolOutcome"] = "cancelled"
        changed.append({"run": CHANGED_RUN, "sequence": 4, "kind": "llm", "round": 3, "duration_ms": 5.0,
                        "crdate": FIRST_CRDATE + 20 * DAY + 90, "payload": {"finishReason": "length"}})
    return rows + changed


def without_archive_note(site: Path) -> dict[str, str]:
    """Every file's hash, the one sentence on the archive taken out of the pages that carry it; the
    marker left out, as it holds the content keys of those pages with the sentence."""
    hashes = content_hashes(site)
    del hashes[MARKER]
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if ARCHIVE_NOTE.search(text):
            stripped = ARCHIVE_NOTE.sub("", text).encode("utf-8")
            hashes[page.relative_to(site).as_posix()] = hashlib.sha256(stripped).hexdigest()
    return hashes


def run_page_counts(page: Path) -> dict[str, int]:
    """The ok / failed / cancelled counts a run page's summary shows."""
    text = page.read_text(encoding="utf-8")
    return {outcome: int(re.search(rf'outcome-{outcome}">.*?</dt><dd>(\d+)</dd>', text).group(1))  # type: ignore[union-attr]
            for outcome in ("ok", "failed", "cancelled")}


def archive_runs(archive: Path) -> set[str]:
    return set(pq.read_table(archive, columns=["run"]).column("run").to_pylist())


@pytest.fixture
def exports(tmp_path: Path) -> dict[str, Path]:
    """Two overlapping 30-day exports of a 45-day history, and the 45 days in one export."""
    return {
        "older": write_jsonl(tmp_path / "days-00-29.jsonl", history(range(0, 30))),
        "newer": write_jsonl(tmp_path / "days-15-44.jsonl", history(range(15, 45), newer=True)),
        "whole": write_jsonl(tmp_path / "days-00-44.jsonl", history(range(0, 45), newer=True)),
    }


def test_two_overlapping_exports_with_the_archive_give_the_site_of_the_whole_history(
    tmp_path: Path, exports: dict[str, Path]
) -> None:
    archive, nightly, at_once = tmp_path / "history.parquet", tmp_path / "nightly", tmp_path / "at-once"
    assert build(exports["older"], "--out", nightly, "--archive", archive).exit_code == 0
    result = build(exports["newer"], "--out", nightly, "--archive", archive)
    assert result.exit_code == 0, result.output
    assert build(exports["whole"], "--out", at_once).exit_code == 0

    assert (nightly / "summary.json").read_bytes() == (at_once / "summary.json").read_bytes()
    assert json.loads((nightly / "summary.json").read_text())["runs"] == 90
    assert without_archive_note(nightly) == {name: digest for name, digest in content_hashes(at_once).items()
                                             if name != MARKER}
    assert len(archive_runs(archive)) == 90
    for language, words in (("en", "30 runs"), ("de", "30 Läufe")):
        for page in (nightly / language / "index.html", nightly / language / "servers" / "index.html"):
            [note] = parse_page(page).text_by_class["archive-note"]
            assert note.startswith(words), note


def test_a_run_changed_in_the_newer_export_shows_its_new_rows(tmp_path: Path, exports: dict[str, Path]) -> None:
    archive, site = tmp_path / "history.parquet", tmp_path / "site"
    assert build(exports["older"], "--out", site, "--archive", archive).exit_code == 0
    page = site / "en" / "runs" / f"{CHANGED_RUN}.html"
    assert run_page_counts(page) == {"ok": 1, "failed": 1, "cancelled": 0}

    assert build(exports["newer"], "--out", site, "--archive", archive).exit_code == 0

    assert run_page_counts(page) == {"ok": 1, "failed": 0, "cancelled": 1}
    assert "length" in page.read_text(encoding="utf-8")  # the step the newer export added
    archived = pq.read_table(archive).to_pylist()
    changed = [row for row in archived if row["run"] == CHANGED_RUN]
    assert len(changed) == 5 and [row["outcome"] for row in changed if row["kind"] == "tool"] == ["ok", "cancelled"]


def test_building_twice_with_the_same_export_changes_nothing(tmp_path: Path, exports: dict[str, Path]) -> None:
    archive, site = tmp_path / "history.parquet", tmp_path / "site"
    assert build(exports["older"], "--out", site, "--archive", archive).exit_code == 0
    archive_bytes, site_hashes = archive.read_bytes(), content_hashes(site)

    assert build(exports["older"], "--out", site, "--archive", archive).exit_code == 0

    assert archive.read_bytes() == archive_bytes
    assert content_hashes(site) == site_hashes


def test_the_same_runs_give_the_same_archive_bytes_however_they_came(tmp_path: Path, exports: dict[str, Path]) -> None:
    """From an export and an archive, or from one export, with or without the input cache."""
    merged, whole = tmp_path / "merged.parquet", tmp_path / "whole.parquet"
    assert build(exports["older"], "--out", tmp_path / "a", "--archive", merged).exit_code == 0
    assert build(exports["newer"], "--out", tmp_path / "a", "--archive", merged).exit_code == 0
    assert build(exports["whole"], "--out", tmp_path / "b", "--archive", whole, "--no-cache").exit_code == 0
    assert merged.read_bytes() == whole.read_bytes()


def test_keep_days_drops_runs_older_than_the_newest_step_by_more(tmp_path: Path, exports: dict[str, Path]) -> None:
    archive, site = tmp_path / "history.parquet", tmp_path / "site"
    assert build(exports["older"], "--out", site, "--archive", archive).exit_code == 0

    result = build(exports["newer"], "--out", site, "--archive", archive, "--keep-days", "10")

    assert result.exit_code == 0, result.output
    # The newest step is day 44's last; a run's last step is 60 s after its day begins.
    kept_days = range(34, 45)
    expected = {f"run-day{day:02d}-{letter}" for day in kept_days for letter in "ab"}
    assert archive_runs(archive) == expected
    assert json.loads((site / "summary.json").read_text())["runs"] == len(expected)
    assert not (site / "en" / "runs" / "run-day33-a.html").exists()
    assert (site / "en" / "runs" / "run-day34-a.html").exists()


def test_without_keep_days_nothing_is_dropped(tmp_path: Path, exports: dict[str, Path]) -> None:
    archive, site = tmp_path / "history.parquet", tmp_path / "site"
    assert build(exports["older"], "--out", site, "--archive", archive).exit_code == 0
    assert (
        build(write_jsonl(tmp_path / "late.jsonl", day_runs(400)), "--out", site, "--archive", archive).exit_code == 0
    )
    assert len(archive_runs(archive)) == 62


# --------------------------------------------------------------------------- an archive that is not one


def foreign_parquet(path: Path) -> None:
    pq.write_table(pa.table({"run": ["1"], "sequence": [0], "kind": ["llm"]}), path)


def newer_archive(path: Path) -> None:
    schema = CANONICAL_SCHEMA.with_metadata({ARCHIVE_MARKER_KEY: b"2"})
    pq.write_table(pa.Table.from_pylist([], schema=schema), path)


def corrupt_file(path: Path) -> None:
    path.write_bytes(b"PAR1 this is not what it claims to be")


@pytest.mark.parametrize("make, words", [
    pytest.param(foreign_parquet, "not an nrllm-report archive", id="another-tools-parquet"),
    pytest.param(corrupt_file, "cannot be read as Parquet", id="corrupt"),
    pytest.param(newer_archive, "newer nrllm-report", id="newer-version"),
])
def test_a_file_that_is_not_an_archive_is_refused_and_left_untouched(
    tmp_path: Path, exports: dict[str, Path], make: Any, words: str
) -> None:
    archive, site = tmp_path / "history.parquet", tmp_path / "site"
    make(archive)
    before = archive.read_bytes()
    beside = sorted(os.listdir(tmp_path))

    result = build(exports["older"], "--out", site, "--archive", archive)

    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(archive) in lines[0] and words in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert archive.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == beside  # no site, no staging, no temporary archive


# --------------------------------------------------------------------------- a build that fails


@pytest.mark.parametrize("break_build", [
    pytest.param(lambda monkeypatch: fail_on_template(monkeypatch, "servers.html"), id="rendering"),
    pytest.param(lambda monkeypatch: fail_writes(monkeypatch, lambda path: "/en/" in str(path)), id="disk-full"),
    pytest.param(fail_to_swap_the_site_in, id="swapping-the-site-in"),
])
def test_a_failed_build_leaves_the_archive_as_it_was_and_nothing_beside_the_site(
    tmp_path: Path, exports: dict[str, Path], monkeypatch: pytest.MonkeyPatch, break_build: Any
) -> None:
    archive, site = tmp_path / "history.parquet", tmp_path / "site"
    assert build(exports["older"], "--out", site, "--archive", archive).exit_code == 0
    before, beside = archive.read_bytes(), sorted(os.listdir(tmp_path))
    os.utime(archive, ns=(0, 0))
    break_build(monkeypatch)

    result = build(exports["newer"], "--out", site, "--archive", archive)

    assert result.exit_code != 0
    assert archive.read_bytes() == before and archive.stat().st_mtime_ns == 0
    assert sorted(os.listdir(tmp_path)) == beside


def test_a_missing_archive_in_a_missing_folder_is_refused(tmp_path: Path, exports: dict[str, Path]) -> None:
    result = build(exports["older"], "--out", tmp_path / "site", "--archive", tmp_path / "no" / "history.parquet")
    assert result.exit_code == 2 and "does not exist" in result.stderr
    assert not (tmp_path / "site").exists()


# --------------------------------------------------------------------------- an input like any other

OUTCOME_COLUMNS = ["run", "sequence", "kind", "round", "durationMs", "crdate", "toolName", "server", "toolIsError",
                   "outcome"]


def normalized_again(archive: Path, folder: Path) -> tuple[pa.Table, pa.Table]:
    """The archive read as an input and written by ``normalize``, beside the archive itself."""
    normalized = folder / "again.parquet"
    assert invoke("normalize", str(archive), "--out", str(normalized)).exit_code == 0
    order = [("run", "ascending"), ("sequence", "ascending")]
    return pq.read_table(normalized).sort_by(order), pq.read_table(archive).sort_by(order)


def test_the_archive_is_an_input_like_any_other(tmp_path: Path, exports: dict[str, Path]) -> None:
    archive = tmp_path / "history.parquet"
    assert build(exports["older"], "--out", tmp_path / "site", "--archive", archive).exit_code == 0

    validated = invoke("validate", str(archive), "--format", "json")
    assert validated.exit_code == 0, validated.output
    assert json.loads(validated.stdout)["rows_valid"] == pq.ParquetFile(archive).metadata.num_rows

    single = tmp_path / "timeline.html"
    timeline = invoke("timeline", "run-day02-a", str(archive), "--out", str(single), "--no-cache")
    assert timeline.exit_code == 0, timeline.output
    assert run_page_counts(single) == {"ok": 0, "failed": 1, "cancelled": 1}  # from the archive alone

    again, archived = normalized_again(archive, tmp_path)
    assert again.select(OUTCOME_COLUMNS).equals(archived.select(OUTCOME_COLUMNS))  # cancelled stays cancelled


def test_the_archive_read_as_an_input_is_its_canonical_records_and_its_cache_entry(
    tmp_path: Path, exports: dict[str, Path]
) -> None:
    """Every canonical field reads back, and the entry a build keeps of the archive it wrote is what
    reading the archive gives: the same site."""
    archive = tmp_path / "history.parquet"
    assert build(exports["older"], "--out", tmp_path / "first", "--archive", archive).exit_code == 0
    again, archived = normalized_again(archive, tmp_path)
    copy = tmp_path / "copy.parquet"
    copy.write_bytes(archive.read_bytes())
    assert build("--out", tmp_path / "cached", "--archive", archive).exit_code == 0
    assert build("--out", tmp_path / "read", "--archive", copy, "--no-cache").exit_code == 0
    assert content_hashes(tmp_path / "cached") == content_hashes(tmp_path / "read")
    assert again.select(CANONICAL_SCHEMA.names).equals(archived.select(CANONICAL_SCHEMA.names))


def test_the_archive_holds_canonical_records_only(tmp_path: Path) -> None:
    rows = run_rows("secret-run", day=1)
    rows[0]["payload"]["messagesSent"] = [{"role": "user", "content": "PROMPT-SECRET-42"}]
    rows[1]["payload"]["toolResult"] = "RESULT-SECRET-42"
    archive = tmp_path / "history.parquet"
    assert (
        build(write_jsonl(tmp_path / "rows.jsonl", rows), "--out", tmp_path / "site", "--archive", archive).exit_code
        == 0
    )
    assert pq.read_schema(archive).names == CANONICAL_SCHEMA.names
    text = json.dumps(pq.read_table(archive).to_pylist())
    assert "SECRET" not in text
    assert b"SECRET" not in archive.read_bytes()


def files_with_inodes(site: Path) -> dict[str, tuple[str, int]]:
    """Each file of a site (less the marker, which names the build) by its bytes' hash and its inode."""
    return {name: (digest, (site / name).stat().st_ino) for name, digest in content_hashes(site).items()
            if name != MARKER}


def test_a_nightly_build_with_a_new_day_rewrites_only_the_files_that_changed(tmp_path: Path) -> None:
    """Yesterday's export (days 0 to 9), today's (days 1 to 10: day 0 is in the archive alone), and
    today's again. Every page names the site's time range, so a new day changes every list; a
    run's page and the files that name no time stay as they were."""
    archive, site, fresh = tmp_path / "history.parquet", tmp_path / "site", tmp_path / "fresh"
    yesterday = write_jsonl(tmp_path / "days-00-09.jsonl", [row for day in range(10) for row in day_runs(day)])
    today = write_jsonl(tmp_path / "days-01-10.jsonl", [row for day in range(1, 11) for row in day_runs(day)])
    assert build(yesterday, "--out", site, "--archive", archive).exit_code == 0
    archive_of_yesterday = tmp_path / "history-of-yesterday.parquet"
    shutil.copyfile(archive, archive_of_yesterday)
    before = files_with_inodes(site)

    result = build(today, "--out", site, "--archive", archive)
    assert result.exit_code == 0, result.output
    assert build(today, "--out", fresh, "--archive", archive_of_yesterday).exit_code == 0

    after = files_with_inodes(site)
    assert {name: digest for name, (digest, _inode) in after.items()} == {
        name: digest for name, (digest, _inode) in files_with_inodes(fresh).items()}
    unchanged = {name for name, (digest, _inode) in after.items() if name in before and before[name][0] == digest}
    assert [name for name in unchanged if after[name][1] != before[name][1]] == [], "rewritten, yet the same bytes"
    new_day = datetime.fromtimestamp(FIRST_CRDATE + 10 * DAY, timezone.utc).date().isoformat()
    assert {"assets/style.css", "assets/filter.js"} <= unchanged
    for language in ("en", "de"):
        assert f"{language}/runs/run-day03-a.html" in unchanged and f"{language}/runs/run-day00-a.html" in unchanged
        assert {f"{language}/days/{new_day}.html", f"{language}/index.html", f"{language}/runs/run-day10-a.html",
                f"{language}/servers/github/runs.html",
                f"{language}/servers/github/tools/mcp_github_create_issue/runs.html"}.isdisjoint(unchanged)

    again = build(today, "--out", site, "--archive", archive)
    assert again.exit_code == 0, again.output
    assert files_with_inodes(site) == after, "a rebuild of the same rows rewrote files"
