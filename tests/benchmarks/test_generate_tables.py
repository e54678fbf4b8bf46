"""The generator's other tables: the events stay as they were, and the tables agree with them.

Every expectation is counted from the rows themselves; no figure of the sample is pinned here.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.parquet as pq
import pytest
import safety_helpers

from nrllm_report.check.normalize import server_of
from nrllm_report.core.tables import (
    CALLS_TABLE,
    GOVERNANCE_TABLE,
    RUN_STATUSES,
    RUNS_TABLE,
    SERVERS_TABLE,
    TABLES,
    TERMINAL_STATUSES,
    TERMINATION_REASONS,
    TOOL_DENIED,
    TOOLS_TABLE,
)

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data"
# The sample's own command line (sample_data/README.md): 120 runs, seed 191, a cancel in every 5, metadata every 2.
SAMPLE_ARGS = {"runs": 120, "seed": 191, "cancel_every": 5, "metadata_every": 2}
FORMATS = [".jsonl", ".jsonl.gz", ".parquet"]
SERVER_IDENTIFIER = re.compile(r"^[a-z0-9_]{1,32}$")


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return safety_helpers.generator()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A table file's rows, whatever its format."""
    if path.name.endswith(".parquet"):
        return pq.read_table(path).to_pylist()
    if path.name.endswith(".gz"):
        return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()]
    return read_jsonl(path)


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def sample(generator: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sample regenerated with its tables: the events, their payloads, and every table's rows."""
    folder = tmp_path_factory.mktemp("sample")
    events_path = folder / "runs.jsonl"
    generator.write_export(events_path, **SAMPLE_ARGS, tables=True)
    events = read_jsonl(events_path)
    # The same runs with every payload in full (the privacy level is chosen by position, drawing nothing).
    full_args = dict(SAMPLE_ARGS, metadata_every=0)
    full = [dict(row, payload=json.loads(row["payload"])) for row in generator.generate_rows(**full_args)]
    tables = {table: read_jsonl(path) for table, path in generator.table_paths(events_path).items()}
    return {"folder": folder, "events": events, "full": full, "tables": tables}


def steps_by_run(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in events:
        payload = row["payload"]
        runs[row["run"]].append(dict(row, payload=json.loads(payload) if isinstance(payload, str) else payload))
    return runs


# ------------------------------------------------------------------ the events stay as they were


def test_the_sample_regenerates_byte_for_byte_with_and_without_tables(
    generator: ModuleType, sample: dict[str, Any], tmp_path: Path
) -> None:
    committed = (SAMPLE / "runs.jsonl").read_bytes()
    generator.write_export(tmp_path / "runs.jsonl", **SAMPLE_ARGS)
    assert (tmp_path / "runs.jsonl").read_bytes() == committed
    assert (sample["folder"] / "runs.jsonl").read_bytes() == committed, "--tables changed the events"


def test_the_committed_sample_tables_are_what_the_generator_writes(sample: dict[str, Any]) -> None:
    for name, data in folder_bytes(sample["folder"]).items():
        assert (SAMPLE / name).read_bytes() == data, f"sample_data/{name} is stale: regenerate it (README)"


@pytest.mark.parametrize("suffix", FORMATS, ids=lambda suffix: suffix.lstrip("."))
def test_tables_leave_the_events_file_as_it_was(generator: ModuleType, tmp_path: Path, suffix: str) -> None:
    plain, with_tables = tmp_path / "plain" / f"runs{suffix}", tmp_path / "tables" / f"runs{suffix}"
    rows = generator.write_export(plain, 45, 3, cancel_every=5, metadata_every=3)
    assert generator.write_export(with_tables, 45, 3, cancel_every=5, metadata_every=3, tables=True) == rows
    assert with_tables.read_bytes() == plain.read_bytes()
    assert sorted(path.name for path in plain.parent.iterdir()) == [plain.name]
    assert sorted(path.name for path in with_tables.parent.iterdir()) == sorted(
        [with_tables.name] + [f"{table}{suffix}" for table in TABLES])


def test_the_cli_flag_writes_the_tables_beside_the_events(generator: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "export" / "events.jsonl.gz"
    assert generator.main(["--runs", "12", "--seed", "5", "--out", str(out), "--tables"]) == 0
    assert all(path.is_file() for path in generator.table_paths(out).values())
    assert set(generator.table_paths(out)) == set(TABLES)


# ------------------------------------------------------------------ determinism


@pytest.mark.parametrize("suffix", FORMATS, ids=lambda suffix: suffix.lstrip("."))
def test_the_same_seed_gives_the_same_bytes_for_every_table(generator: ModuleType, tmp_path: Path, suffix: str) -> None:
    for name in ("a", "b"):
        generator.write_export(tmp_path / name / f"runs{suffix}", 60, 17, cancel_every=4, tables=True)
    generator.write_tables(tmp_path / "alone" / f"runs{suffix}", 60, 17, cancel_every=4)
    first = folder_bytes(tmp_path / "a")
    assert folder_bytes(tmp_path / "b") == first
    alone = folder_bytes(tmp_path / "alone")
    assert alone == {name: data for name, data in first.items() if name != f"runs{suffix}"}, \
        "write_tables without the events writes the same tables"


@pytest.mark.parametrize("suffix", FORMATS[1:], ids=lambda suffix: suffix.lstrip("."))
def test_every_format_holds_the_same_rows(generator: ModuleType, tmp_path: Path, suffix: str) -> None:
    generator.write_export(tmp_path / "jsonl" / "runs.jsonl", 30, 9, tables=True)
    generator.write_export(tmp_path / "other" / f"runs{suffix}", 30, 9, tables=True)
    for table in TABLES:
        assert read_rows(tmp_path / "other" / f"{table}{suffix}") == read_jsonl(tmp_path / "jsonl" / f"{table}.jsonl")


# ------------------------------------------------------------------ columns and values


def test_columns_are_the_ones_the_tool_reads_plus_internal_ones(sample: dict[str, Any]) -> None:
    for table, rows in sample["tables"].items():
        assert rows, f"{table} is empty"
        spec = TABLES[table]
        for row in rows:
            assert set(spec.columns) <= set(row), f"{table} lacks {set(spec.columns) - set(row)}"
    internal = {"suspended_state": None, "queued_request": None, "requeue_count": 0, "pending_effect": "", "pid": 0}
    for row in sample["tables"][RUNS_TABLE]:
        assert {key: row[key] for key in internal} == internal
        assert isinstance(row["tstamp"], int) and isinstance(row["lease_expires"], int)
        assert row["claimed_by"] == "" or row["status"] == "running"


def test_values_are_as_mysql_returns_them(sample: dict[str, Any]) -> None:
    kinds = {table: spec.columns for table, spec in TABLES.items()}
    for table, rows in sample["tables"].items():
        for row in rows:
            for column, kind in kinds[table].items():
                value = row[column]
                if kind.value in ("integer", "flag"):
                    assert type(value) is int, (table, column, value)
                if kind.value == "flag":
                    assert value in (0, 1), (table, column, value)
                if kind.value == "text":
                    assert isinstance(value, str), (table, column, value)
    runs = sample["tables"][RUNS_TABLE]
    assert all(type(row["estimated_cost"]) is float and row["estimated_cost"] == 0 for row in runs)
    costs = [row["actual_cost"] for row in sample["tables"][CALLS_TABLE]]
    assert all(cost is None or type(cost) is float for cost in costs)
    assert None in costs and any(isinstance(cost, float) and cost > 0 for cost in costs), "priced and unpriced calls"


def test_no_content_reaches_the_tables(sample: dict[str, Any], generator: ModuleType) -> None:
    content: set[str] = set()
    for row in sample["full"]:
        payload = row["payload"]
        for key in generator.CONTENT_KEYS:
            if key in payload:
                content.update(text for text in re.findall(r'"((?:[^"\\]|\\.){12,})"', json.dumps(payload[key])))
    for config in generator.CONFIGURATIONS:
        content.update((config.system_prompt, *config.user_prompts))
    content -= set(generator.TOOLS)  # a requested call's name is no content (the allow-list keeps it)
    for table, rows in sample["tables"].items():
        for row in rows:
            for value in row.values():
                if isinstance(value, str) and len(value) >= 12:
                    assert not any(text in value for text in content), (table, value)


# ------------------------------------------------------------------ runs


def test_the_sample_has_every_status_and_every_termination_reason(sample: dict[str, Any]) -> None:
    runs = sample["tables"][RUNS_TABLE]
    assert set(RUN_STATUSES) <= {row["status"] for row in runs}
    assert set(TERMINATION_REASONS) <= {row["termination_reason"] for row in runs}
    for row in runs:
        if row["termination_reason"]:
            assert TERMINATION_REASONS[row["termination_reason"]] == row["status"], row
        else:
            assert row["status"] not in TERMINAL_STATUSES and row["finished_at"] == 0, row
        assert row["truncated"] == int(row["termination_reason"] in ("max_iterations", "budget_exhausted",
                                                                      "context_truncated")), row
        assert (row["error_class"] != "") == (row["status"] == "failed"), row
        assert row["error_class"] == "" or row["error_class"].startswith("Netresearch\\NrLlm\\"), row
        if row["status"] == "queued":
            assert row["started_at"] == 0


def test_one_run_row_per_run_of_the_events(sample: dict[str, Any]) -> None:
    runs = sample["tables"][RUNS_TABLE]
    by_uuid = {row["uuid"]: row for row in runs}
    assert len(by_uuid) == len(runs) and len({row["uid"] for row in runs}) == len(runs)
    steps = steps_by_run(sample["events"])
    assert set(steps) <= set(by_uuid)
    without_steps = [row for row in runs if row["uuid"] not in steps]
    assert without_steps and all(row["status"] in ("queued", "waiting_for_approval", "waiting_for_input")
                                 for row in without_steps), "only runs opened after the events' dump lack steps"
    for uuid, run_steps in steps.items():
        row = by_uuid[uuid]
        assert row["configuration_identifier"] == run_steps[0]["payload"]["configurationIdentifier"]
        assert row["started_at"] <= run_steps[0]["crdate"] and row["crdate"] <= row["started_at"]
        assert row["finished_at"] == 0 or row["finished_at"] >= run_steps[-1]["crdate"]


def test_status_agrees_with_the_events(sample: dict[str, Any], generator: ModuleType) -> None:
    steps = steps_by_run(sample["full"])
    latest_open = max(run_steps[-1]["crdate"] for run_steps in steps.values() if run_steps[-1]["kind"] != "tool")
    for row in sample["tables"][RUNS_TABLE]:
        if row["uuid"] not in steps:
            continue
        last = steps[row["uuid"]][-1]
        cut_off = last["kind"] == "tool" and last["payload"].get("toolResult") == generator.CANCEL_RESULT
        assert (row["status"] == "cancelled") == cut_off, row
        if row["status"] in ("completed", "running"):
            assert last["kind"] == "llm" and last["payload"]["finishReason"] == "stop", row
    running = [row for row in sample["tables"][RUNS_TABLE] if row["status"] == "running"]
    assert len(running) == 1 and steps[running[0]["uuid"]][-1]["crdate"] == latest_open, "the open run is written last"


def test_failed_runs_have_zero_totals_and_completed_runs_their_steps_tokens(sample: dict[str, Any]) -> None:
    steps = steps_by_run(sample["events"])
    counted = Counter()
    for row in sample["tables"][RUNS_TABLE]:
        totals = (row["iterations"], row["total_prompt_tokens"], row["total_completion_tokens"], row["total_tokens"])
        if row["status"] != "completed":
            assert totals == (0, 0, 0, 0), row
            continue
        llm = [step["payload"] for step in steps[row["uuid"]] if step["kind"] == "llm"]
        assert row["total_prompt_tokens"] == sum(payload["promptTokens"] for payload in llm)
        assert row["total_completion_tokens"] == sum(payload["completionTokens"] for payload in llm)
        assert row["total_tokens"] == sum(payload["totalTokens"] for payload in llm)
        assert row["iterations"] == max(step["round"] for step in steps[row["uuid"]])
        counted[row["status"]] += 1
    assert counted["completed"] > 0


# ------------------------------------------------------------------ provider calls


def test_one_provider_call_per_llm_step_in_its_second(sample: dict[str, Any]) -> None:
    calls = sample["tables"][CALLS_TABLE]
    by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for call in calls:
        by_run[call["correlation_id"]].append(call)
    for uuid, run_steps in steps_by_run(sample["events"]).items():
        llm = [step for step in run_steps if step["kind"] == "llm"]
        succeeded = [call for call in by_run[uuid] if call["success"] == 1]
        assert [call["crdate"] for call in succeeded] == [step["crdate"] for step in llm]
        for call, step in zip(succeeded, llm):
            assert call["latency_ms"] == round(step["duration_ms"])
            assert call["actual_input_tokens"] == step["payload"]["promptTokens"]
            assert call["actual_output_tokens"] == step["payload"]["completionTokens"]
            assert 0 < call["time_to_first_token_ms"] <= call["latency_ms"]
    assert [call["uid"] for call in calls] == list(range(1, len(calls) + 1))
    assert [call["crdate"] for call in calls] == sorted(call["crdate"] for call in calls)


def test_a_fallback_swaps_the_served_provider_and_model(sample: dict[str, Any]) -> None:
    calls = sample["tables"][CALLS_TABLE]
    fallbacks = [call for call in calls if call["fallback_attempts"] >= 1]
    assert fallbacks, "the sample has a provider fallback"
    for call in calls:
        swapped = (call["served_provider"], call["served_model"]) != (call["provider"], call["model"])
        assert swapped == (call["fallback_attempts"] >= 1), call


def test_failed_calls_belong_to_runs_a_provider_failed(sample: dict[str, Any]) -> None:
    runs = {row["uuid"]: row for row in sample["tables"][RUNS_TABLE]}
    failed = [call for call in sample["tables"][CALLS_TABLE] if call["success"] == 0]
    assert failed
    for call in failed:
        run = runs[call["correlation_id"]]
        assert run["termination_reason"] in ("provider_failed", "retries_exhausted", "not_retryable")
        assert call["error_class"] == run["error_class"] != ""
        assert call["crdate"] == run["finished_at"]
    provider_failures = {uuid for uuid, run in runs.items() if run["termination_reason"] == "provider_failed"}
    assert provider_failures and provider_failures <= {call["correlation_id"] for call in failed}
    assert all(call["error_class"] == "" for call in sample["tables"][CALLS_TABLE] if call["success"] == 1)


def test_unpriced_calls_are_the_local_models(sample: dict[str, Any]) -> None:
    for call in sample["tables"][CALLS_TABLE]:
        assert (call["actual_cost"] is None) == (call["served_provider"] == "ollama"), call


def test_calls_of_no_run_are_there_on_purpose(sample: dict[str, Any]) -> None:
    runs = {row["uuid"] for row in sample["tables"][RUNS_TABLE]}
    event_runs = {row["run"] for row in sample["events"]}
    correlations = Counter(call["correlation_id"] for call in sample["tables"][CALLS_TABLE])
    unmatched = {correlation for correlation in correlations if correlation and correlation not in runs}
    assert correlations[""] > 0, "calls outside runs (another extension's) have no correlation id"
    assert unmatched, "calls of a run the export does not have"
    assert not unmatched & event_runs
    assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", correlation)
               for correlation in unmatched)


# ------------------------------------------------------------------ governance


def test_a_policy_denial_explains_a_failed_tool_step_of_a_policy_denied_run(sample: dict[str, Any]) -> None:
    runs = {row["uuid"]: row for row in sample["tables"][RUNS_TABLE]}
    steps = steps_by_run(sample["events"])
    denials = [row for row in sample["tables"][GOVERNANCE_TABLE] if row["decision"] == TOOL_DENIED]
    assert denials
    for denial in denials:
        run = runs[denial["correlation_id"]]
        assert denial["agentrun_uid"] == run["uid"]
        assert (run["status"], run["termination_reason"]) == ("failed", "policy_denied")
        failed = [step for step in steps[run["uuid"]] if step["kind"] == "tool"
                  and step["payload"].get("toolName") == denial["tool_name"]
                  and step["payload"].get("toolIsError") is True and step["crdate"] == denial["crdate"]]
        assert len(failed) == 1, denial
    policy_denied = {uuid for uuid, run in runs.items() if run["termination_reason"] == "policy_denied"}
    assert policy_denied == {denial["correlation_id"] for denial in denials}


def test_other_decisions_name_their_run_and_carry_metadata_only(sample: dict[str, Any]) -> None:
    runs = {row["uuid"]: row for row in sample["tables"][RUNS_TABLE]}
    decisions = sample["tables"][GOVERNANCE_TABLE]
    assert {"tool_denied", "response_blocked", "content_filter", "approval_required"} <= {
        row["decision"] for row in decisions}
    for row in decisions:
        assert runs[row["correlation_id"]]["uid"] == row["agentrun_uid"]
        assert row["reason"] and row["guardrail"].startswith("Netresearch\\NrLlm\\")
        assert re.fullmatch(r"[a-z_]+:[a-z_]+", row["detail"]), row["detail"]
    for row in decisions:
        if row["decision"] == "approval_required":
            assert runs[row["correlation_id"]]["termination_reason"] == "approval_denied"


def test_the_operator_denial_is_kept(sample: dict[str, Any]) -> None:
    runs = {row["uuid"]: row for row in sample["tables"][RUNS_TABLE]}
    denied = []
    for uuid, run_steps in steps_by_run(sample["events"]).items():
        for step, following in zip(run_steps, run_steps[1:]):
            if step["kind"] == "approval" and step["payload"]["approved"] is False:
                assert following["kind"] == "tool" and following["duration_ms"] == 0
                assert following["payload"]["toolIsError"] is True
                denied.append(uuid)
    assert denied, "the sample has an operator's Deny"
    assert all(runs[uuid]["status"] == "completed" for uuid in denied), "a Deny fails the call, not the run"


# ------------------------------------------------------------------ MCP catalogue


def test_the_catalogue_covers_every_mcp_tool_of_a_valid_server(sample: dict[str, Any], generator: ModuleType) -> None:
    servers = {row["uid"]: row for row in sample["tables"][SERVERS_TABLE]}
    tools = {row["tool_name"]: row for row in sample["tables"][TOOLS_TABLE]}
    assert all(SERVER_IDENTIFIER.fullmatch(row["identifier"]) for row in servers.values())
    used = {step["payload"]["toolName"] for step in sample["full"] if step["kind"] == "tool"}
    mcp = {name for name in used if name.startswith("mcp_")}
    uncovered = mcp - set(tools)
    # "docs-search" is no valid identifier: nr-llm could not have registered it, so its tools stay uncovered.
    assert uncovered and all(not SERVER_IDENTIFIER.fullmatch(generator.TOOLS[name].server) for name in uncovered)
    for name, row in tools.items():
        server = servers[row["server"]]["identifier"]
        assert name == f"mcp_{server}_{row['remote_name']}"
        assert row["orphaned"] == int(name not in used), row
        if name in used:
            assert server == generator.TOOLS[name].server
    assert sum(row["orphaned"] for row in tools.values()) == 1


def test_the_catalogue_knows_servers_the_name_rule_splits_wrongly(sample: dict[str, Any]) -> None:
    servers = {row["uid"]: row["identifier"] for row in sample["tables"][SERVERS_TABLE]}
    tools = sample["tables"][TOOLS_TABLE]
    wrong_without_list = [row for row in tools if server_of(row["tool_name"]) != servers[row["server"]]]
    assert wrong_without_list, "ids with '_' (jira_cloud, crm_eu_west) are split at their first '_'"
    known = sorted(servers.values(), key=lambda server: (-len(server), server))
    assert all(server_of(row["tool_name"], known) == servers[row["server"]] for row in tools)


def test_a_servers_last_contact_is_its_last_successful_call(sample: dict[str, Any], generator: ModuleType) -> None:
    last: dict[str, tuple[int, int]] = {}
    for step in sample["full"]:
        payload = step["payload"]
        if step["kind"] != "tool" or payload.get("toolIsError") is not False:
            continue
        server = generator.TOOLS[payload["toolName"]].server
        if server is not None and step["crdate"] > last.get(server, (0, 0))[0]:
            last[server] = (step["crdate"], round(step["duration_ms"]))
    for row in sample["tables"][SERVERS_TABLE]:
        assert (row["last_contact"], row["last_latency_ms"]) == last[row["identifier"]]


@pytest.mark.parametrize("runs", [0, 1, 2], ids=["no-run", "one-run", "two-runs"])
@pytest.mark.parametrize("suffix", FORMATS, ids=lambda suffix: suffix.lstrip("."))
def test_tiny_exports_write_every_table(generator: ModuleType, tmp_path: Path, runs: int, suffix: str) -> None:
    events = tmp_path / f"runs{suffix}"
    generator.write_export(events, runs, 4, tables=True)
    rows = {table: read_rows(path) for table, path in generator.table_paths(events).items()}
    run_uuids = {row["run"] for row in read_rows(events)} if runs else set()
    assert run_uuids <= {row["uuid"] for row in rows[RUNS_TABLE]}
    assert all(row["status"] in RUN_STATUSES for row in rows[RUNS_TABLE])
    assert sum(row["orphaned"] for row in rows[TOOLS_TABLE]) == 1, "the orphaned tool is there even without runs"
