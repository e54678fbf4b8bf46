"""The build's stages run in the order the pipeline names them, and --timings says each."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from command_line import run_cli
from site_helpers import build_ok

from nrllm_report.pipeline import BUILD_STAGES
from nrllm_report.pipeline.sweep import PARTITION_STEPS
from nrllm_report.site import parallel


def timings_of(stderr: str) -> dict[str, float]:
    [line] = [line for line in stderr.splitlines() if line.startswith("{")]
    return json.loads(line)


def test_a_build_runs_every_stage_in_the_pipelines_order(tmp_path: Path) -> None:
    out, archive = tmp_path / "site", tmp_path / "history.parquet"
    result = run_cli("build", "--out", out, "--archive", archive, "--timings", "--no-cache", "--jobs", "2")
    assert result.returncode == 0, result.stderr
    timings = timings_of(result.stderr)
    ran = [name for name in timings if name in BUILD_STAGES]
    assert ran == list(BUILD_STAGES)  # with an archive, every stage; in the order build runs them
    assert ran.index("sweep") < ran.index("latency") < ran.index("health")  # from the sweep's calls, before verdicts
    for step in PARTITION_STEPS:
        assert timings[f"sweep: {step} (worker seconds)"] >= 0.0  # said, if under a millisecond


def test_without_an_archive_the_archive_stage_is_left_out_and_the_rest_keep_their_order(tmp_path: Path) -> None:
    result = run_cli("build", "--out", tmp_path / "site", "--timings", "--no-cache", "--jobs", "1")
    assert result.returncode == 0, result.stderr
    ran = [name for name in timings_of(result.stderr) if name in BUILD_STAGES]
    assert ran == [stage for stage in BUILD_STAGES if stage != "archive"]


def test_the_run_pages_render_and_write_seconds_are_said_alike_with_and_without_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One job renders in the main process, two in forked workers: --timings names both the same."""
    monkeypatch.setattr(parallel, "PARALLEL_THRESHOLD", 10)  # the sample's pages are enough to fork for
    forked = mock.Mock(wraps=parallel._by_share)
    monkeypatch.setattr(parallel, "_by_share", forked)
    said = {}
    for jobs in ("1", "2"):
        result = build_ok("--out", tmp_path / f"site-{jobs}", "--timings", "--no-cache", "--jobs", jobs)
        said[jobs] = {name for name in timings_of(result.stderr) if name.startswith(("render", "write"))}
        assert forked.call_count == (jobs == "2")
    assert said["1"] == said["2"] == {"render (worker seconds)", "write (worker seconds)"}


def test_the_input_caches_key_follows_the_code_of_the_cached_stages_not_the_site(tmp_path: Path) -> None:
    from nrllm_report.core import resources

    assert "site" not in resources.CACHED_STAGES
    package = tmp_path / "package"
    for stage in (*resources.CACHED_STAGES, "site"):
        (package / stage).mkdir(parents=True)
        (package / stage / "module.py").write_text(f"STAGE = {stage!r}\n", encoding="utf-8")
    roots = [package / stage for stage in resources.CACHED_STAGES]
    before = resources.files_key(roots, {".py"})
    (package / "site" / "module.py").write_text("STAGE = 'a new look'\n", encoding="utf-8")
    assert resources.files_key(roots, {".py"}) == before
    (package / "check" / "module.py").write_text("STAGE = 'a new rule'\n", encoding="utf-8")
    assert resources.files_key(roots, {".py"}) != before
