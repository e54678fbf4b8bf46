"""Canonical records (``normalize``'s output) are an input like any other,
read back by every command with the same meaning, in both containers. ADR-191 holds for
them too: ``outcome`` is the outcome the record states, and it must agree with its flag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from command_line import invoke
from conftest import check_one, rules_of
from site_helpers import SAMPLE, SAMPLE_SERVERS, build_ok, failure_text, read_jsonl, site_files, write_jsonl

from nrllm_report.check import fastpath
from nrllm_report.core.schema import CANONICAL_SCHEMA
from nrllm_report.readers import ArrowChunk, resolve_inputs

SERVERS = ",".join(SAMPLE_SERVERS)
CONTAINERS = [pytest.param(".jsonl", id="jsonl"), pytest.param(".parquet", id="parquet")]



def normalized(source: Path, out: Path) -> Path:
    result = invoke("normalize", source, "--out", out, "--servers", SERVERS)
    assert result.exit_code == 0, failure_text(result)
    return out


def comparable(site: Path, input_name: str) -> dict[str, bytes]:
    """Every file a reader sees, the input's name (on the problems pages) written as INPUT."""
    return {
        path: content.replace(input_name.encode(), b"INPUT")
        for path, content in site_files(site).items()
        if not path.startswith(".")
    }


@pytest.fixture(scope="module")
def original_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("original") / "site"
    build_ok(SAMPLE, "--out", out, "--servers", SERVERS)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("suffix", CONTAINERS)
def test_a_site_built_from_canonical_records_is_the_site_of_the_original_export(
    original_site: Path, tmp_path: Path, suffix: str
) -> None:
    records = normalized(SAMPLE, tmp_path / f"records{suffix}")
    build_ok(records, "--out", tmp_path / "site", "--servers", SERVERS)
    summary = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))
    assert summary == json.loads((original_site / "summary.json").read_text(encoding="utf-8"))
    assert summary["outcomes"]["cancelled"] == 22, "the sample's cancelled calls stay cancelled"
    assert comparable(tmp_path / "site", str(records)) == comparable(original_site, str(SAMPLE))


@pytest.mark.slow
@pytest.mark.parametrize("suffix", CONTAINERS)
def test_canonical_records_normalize_to_themselves_and_validate_as_the_original(tmp_path: Path, suffix: str) -> None:
    records = normalized(SAMPLE, tmp_path / f"records{suffix}")
    again = normalized(records, tmp_path / "again.jsonl")
    assert read_jsonl(again) == read_jsonl(normalized(SAMPLE, tmp_path / "first.jsonl"))
    original = json.loads(invoke("validate", SAMPLE, "--format", "json", "--servers", SERVERS).stdout)
    read_back = json.loads(invoke("validate", records, "--format", "json", "--servers", SERVERS).stdout)
    for report in (original, read_back):
        for problem in report["problems"]:
            problem.pop("input")
    assert read_back == original


@pytest.mark.parametrize("suffix", CONTAINERS)
def test_the_single_file_timeline_of_canonical_records_is_the_original_one(tmp_path: Path, suffix: str) -> None:
    records = normalized(SAMPLE, tmp_path / f"records{suffix}")
    run = next(row["run"] for row in read_jsonl(SAMPLE) if '"cancelled"' in row["payload"])
    for name, source in (("original", SAMPLE), ("records", records)):
        result = invoke("timeline", run, source, "--out", tmp_path / f"{name}.html", "--servers", SERVERS)
        assert result.exit_code == 0, failure_text(result)
    assert (tmp_path / "records.html").read_bytes() == (tmp_path / "original.html").read_bytes()


def canonical(**fields: Any) -> dict[str, Any]:
    """A canonical record (every field, nulls included) with ``fields`` set."""
    record: dict[str, Any] = dict.fromkeys(CANONICAL_SCHEMA.names)
    record.update(run="r", sequence=1, kind="tool", round=1, durationMs=250.0, crdate=1_788_000_000,
                  toolName="mcp_github_list", server="github")
    record.update(fields)
    return record


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        pytest.param({"toolIsError": False, "outcome": "cancelled"}, "flag-contradicts-outcome", id="contradiction"),
        pytest.param({"toolIsError": None, "outcome": "cancelled"}, "outcome-without-flag", id="outcome-without-flag"),
        pytest.param({"toolIsError": True, "outcome": "canceled"}, "unknown-outcome", id="unknown-outcome"),
        pytest.param({"kind": "llm", "toolIsError": True, "outcome": "failed"}, "outcome-on-non-tool-step",
                     id="not-a-tool-step"),
        pytest.param({"toolIsError": True, "outcome": "failed", "toolOutcome": "cancelled"}, "bad-type",
                     id="outcome-and-toolOutcome-disagree"),
        pytest.param({"toolIsError": True, "outcome": "failed", "messageCount": "3"}, "bad-type", id="count-as-text"),
        pytest.param({"toolIsError": True, "outcome": "failed", "toolSpecs": "a, b"}, "bad-type", id="names-as-text"),
    ],
)
def test_a_canonical_record_follows_adr_191_like_any_row(fields: dict[str, Any], rule: str) -> None:
    assert rules_of(check_one(canonical(**fields))) == [rule]


@pytest.mark.parametrize(
    ("flag", "outcome"),
    [(False, "ok"), (True, "failed"), (True, "cancelled"), (None, None)],
)
def test_a_canonical_records_outcome_is_the_outcome_it_states(flag: bool | None, outcome: str | None) -> None:
    step = check_one(canonical(toolIsError=flag, outcome=outcome)).step
    assert step is not None
    assert (step.tool_is_error, step.outcome.value if step.outcome else None) == (flag, outcome)


@pytest.mark.parametrize("stated", [True, False])
def test_a_canonical_record_says_whether_its_outcome_was_stated(stated: bool) -> None:
    """A row written before ADR-191 (the flag only) stays one through a round trip: its failures
    may include cancellations, and the servers pages mark its days."""
    step = check_one(canonical(toolIsError=True, outcome="failed", outcomeStated=stated)).step
    assert step is not None and step.outcome_stated is stated
    assert check_one(canonical(toolIsError=None, outcome=None, outcomeStated=stated)).step.outcome_stated is None
    assert rules_of(check_one(canonical(toolIsError=True, outcome="failed", outcomeStated="no"))) == ["bad-type"]


def test_canonical_records_of_the_previous_version_keep_their_counts(tmp_path: Path) -> None:
    """Before issue 10 a record had the counts without the names: they are read as they are."""
    record: dict[str, Any] = dict.fromkeys(CANONICAL_SCHEMA.names[:CANONICAL_SCHEMA.names.index("decidedBy") + 1])
    record.update(run="r", sequence=0, kind="llm", round=1, durationMs=10.0, crdate=1_788_000_000,
                  requestedToolCallCount=3, messageCount=4, promptTokens=900)
    step = check_one(record).step
    assert step is not None
    assert (step.requested_tool_call_count, step.message_count, step.prompt_tokens) == (3, 4, 900)
    assert step.requested_tool_names is None


def test_a_cancelled_call_stays_cancelled_through_both_containers_and_back(tmp_path: Path) -> None:
    rows = [{"run": "r", "sequence": index, "kind": "tool", "round": 1, "duration_ms": 10.0,
             "crdate": 1_788_000_000 + index,
             "payload": {"toolName": "mcp_github_list", "toolIsError": outcome != "ok", "toolOutcome": outcome}}
            for index, outcome in enumerate(["ok", "failed", "cancelled"])]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    parquet = normalized(normalized(source, tmp_path / "a.jsonl"), tmp_path / "b.parquet")
    assert pq.read_table(parquet).column("outcome").to_pylist() == ["ok", "failed", "cancelled"]
    build_ok(parquet, "--out", tmp_path / "site")
    summary = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))
    assert summary["outcomes"] == {"ok": 1, "failed": 1, "cancelled": 1}


@pytest.mark.parametrize("suffix", CONTAINERS)
def test_canonical_records_take_the_fast_path(tmp_path: Path, suffix: str) -> None:
    """Read back in Arrow batches, a clean file of canonical records is vouched for whole."""
    records = normalized(SAMPLE, tmp_path / f"records{suffix}")
    chunks = list(resolve_inputs([str(records)])[0].chunks())
    assert chunks and all(isinstance(chunk, ArrowChunk) for chunk in chunks)
    for chunk in chunks:
        result = fastpath.check_batch(
            chunk.table, input_index=0, rows=chunk.numbers(), known_servers=tuple(SAMPLE_SERVERS)
        )
        assert result.unclean == [] and result.clean.num_rows == chunk.table.num_rows
