"""The whole run: the tables besides the events, read in every container, checked,
joined to the runs, and shown as nr-llm's run page shows them. Through the CLI as a subprocess."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from command_line import run_cli

from nrllm_report.core.tables import CALLS_TABLE, GOVERNANCE_TABLE, RUNS_TABLE, SERVERS_TABLE, TABLES, TOOLS_TABLE

RUN_UUID = "5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"
T0 = 1_790_000_000
PHP_EXCEPTION = "Netresearch\\NrLlm\\Exception\\ProviderException"


def event(run: Any, sequence: int, kind: str, crdate: int, payload: dict[str, Any], duration: float = 0.0) -> dict:
    return {"uid": sequence + 1, "run": run, "sequence": sequence, "kind": kind, "round": 1,
            "duration_ms": duration, "payload": json.dumps(payload), "crdate": crdate}


def run_events(run: Any) -> list[dict[str, Any]]:
    """A run as nr-llm writes it: a request, an llm step with tokens, a tool call, the answer."""
    return [
        event(run, 0, "request", T0, {"messagesSentCount": 2}),
        event(run, 1, "llm", T0, {"promptTokens": 100, "completionTokens": 20, "totalTokens": 120,
                                  "estimatedCost": 0.5}, 900.0),
        event(run, 2, "tool", T0 + 1, {"toolName": "mcp_github_list_issues", "toolIsError": False,
                                       "toolOutcome": "ok"}, 40.0),
        event(run, 3, "llm", T0 + 2, {"promptTokens": 150, "completionTokens": 30, "totalTokens": 180,
                                      "estimatedCost": 0.25}, 800.0),
    ]


def run_row(uid: int = 42, uuid: str = RUN_UUID, status: str = "completed", reason: str = "completed",
            **extra: Any) -> dict[str, Any]:
    row = {"uid": uid, "uuid": uuid, "status": status, "termination_reason": reason,
           "configuration_uid": 3, "configuration_identifier": "support-triage", "be_user": 987654321,
           "iterations": 2, "truncated": 0, "total_prompt_tokens": 250, "total_completion_tokens": 50,
           "total_tokens": 300, "estimated_cost": "0.000000", "error_class": "", "started_at": T0,
           "finished_at": T0 + 3, "crdate": T0 - 1, "suspended_state": None, "claimed_by": ""}
    row.update(extra)
    return row


def call_row(uid: int, crdate: int, correlation: str = RUN_UUID, **extra: Any) -> dict[str, Any]:
    row = {"uid": uid, "correlation_id": correlation, "operation": "chat", "provider": "openai", "model": "gpt-4o",
           "served_provider": "openai", "served_model": "gpt-4o", "configuration_identifier": "support-triage",
           "success": 1, "error_class": "", "latency_ms": 900, "time_to_first_token_ms": 120, "cache_hit": 0,
           "fallback_attempts": 0, "provider_retries": 0, "actual_input_tokens": 100, "actual_output_tokens": 20,
           "actual_cost": "0.00120000", "be_user": 0, "crdate": crdate}
    row.update(extra)
    return row


def decision_row(uid: int, crdate: int, decision: str = "content_filter", **extra: Any) -> dict[str, Any]:
    row = {"uid": uid, "decision": decision, "reason": "pii", "tool_name": "", "agentrun_uid": 42,
           "correlation_id": "", "guardrail": "Netresearch\\NrLlm\\Guardrail\\PiiGuardrail",
           "detail": "pattern:email", "be_user": 0, "crdate": crdate}
    row.update(extra)
    return row


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Rows in the container the suffix names, every value as such a tool writes it."""
    name = path.name
    if name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
        text = "".join(json.dumps(row) + "\n" for row in rows).encode()
        path.write_bytes(gzip.compress(text, mtime=0) if name.endswith(".gz") else text)
    elif name.endswith(".json"):
        path.write_text(json.dumps(rows), encoding="utf-8")
    elif name.endswith((".csv", ".tsv")):
        columns = list(dict.fromkeys(key for row in rows for key in row))
        with path.open("w", newline="", encoding="utf-8") as stream:
            writer = csv.writer(stream, delimiter="\t" if name.endswith(".tsv") else ",",
                                quoting=csv.QUOTE_NONE if name.endswith(".tsv") else csv.QUOTE_MINIMAL,
                                escapechar="\\" if name.endswith(".tsv") else None)
            writer.writerow(columns)
            for row in rows:
                writer.writerow(["" if row.get(column) is None else str(row[column]) for column in columns])
    elif name.endswith(".parquet"):
        pq.write_table(pa.Table.from_pylist([{key: None if value is None else str(value) for key, value in row.items()}
                                             for row in rows]), path)
    else:
        raise AssertionError(name)
    return path


def phpmyadmin(path: Path, tables: dict[str, list[dict[str, Any]]]) -> Path:
    """phpMyAdmin's JSON export: every value a string."""
    export: list[dict[str, Any]] = [{"type": "header", "version": "5.2.1"}, {"type": "database", "name": "typo3"}]
    for name, rows in tables.items():
        export.append({"type": "table", "name": name, "database": "typo3",
                       "data": [{key: None if value is None else str(value) for key, value in row.items()}
                                for row in rows]})
    path.write_text(json.dumps(export), encoding="utf-8")
    return path


def build(tmp_path: Path, *inputs: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    out = tmp_path / "site"
    result = run_cli("build", *inputs, "--out", out, "--no-cache", "--force", "--servers", "github", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))


def timeline(tmp_path: Path, run: str, *inputs: Path, language: str = "en", fmt: str = "json") -> Any:
    out = tmp_path / f"timeline-{language}.{fmt}"
    result = run_cli("timeline", run, *inputs, "--out", out, "--lang", language, "--no-cache",
                     "--servers", "github")
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    return json.loads(text) if fmt == "json" else text


CONTAINERS = ["jsonl", "jsonl.gz", "json", "csv", "tsv", "parquet"]


# ---------------------------------------------------------------- recognition


@pytest.mark.parametrize("container", CONTAINERS)
@pytest.mark.parametrize("by", ["name", "columns"])
def test_every_table_is_recognised_in_every_container_by_name_and_by_columns(
    tmp_path: Path, container: str, by: str
) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    samples = {
        RUNS_TABLE: [run_row()], CALLS_TABLE: [call_row(1, T0)], GOVERNANCE_TABLE: [decision_row(1, T0 + 1)],
        TOOLS_TABLE: [{"uid": 1, "server": 7, "tool_name": "mcp_github_list_issues", "remote_name": "list_issues",
                       "orphaned": 0}],
        SERVERS_TABLE: [{"uid": 7, "identifier": "github", "name": "GitHub", "last_contact": T0,
                         "last_latency_ms": 80}],
    }
    files = [write_rows(tmp_path / (f"{table}.{container}" if by == "name" else f"dump-{index}.{container}"), rows)
             for index, (table, rows) in enumerate(samples.items())]
    summary = build(tmp_path, events, *files)
    assert summary["rows_read"] == 4 + 5 and summary["rows_rejected"] == 0
    assert summary["runs_by_status"] == {"completed": 1}
    assert summary["unmatched"] == {RUNS_TABLE: 0, CALLS_TABLE: 0, GOVERNANCE_TABLE: 0}


def test_a_phpmyadmin_dump_of_several_tables_is_read_for_each(tmp_path: Path) -> None:
    dump = phpmyadmin(tmp_path / "typo3.json", {
        "tx_nrllm_agentrun_event": run_events(RUN_UUID), RUNS_TABLE: [run_row()],
        CALLS_TABLE: [call_row(1, T0), call_row(2, T0 + 2)], "be_users": [{"uid": 1}],
    })
    summary = build(tmp_path, dump)
    assert summary["rows_read"] == 4 + 1 + 2
    assert summary["runs_by_status"] == {"completed": 1}


@pytest.mark.parametrize("name", ["orders.csv", "orders.parquet", "orders.jsonl"])
def test_a_file_that_fits_no_table_is_refused_with_exit_2_naming_the_file_and_what_it_lacks(
    tmp_path: Path, name: str
) -> None:
    source = write_rows(tmp_path / name, [{"order_id": 1, "customer": "x", "total": 3}])
    result = run_cli("validate", source)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert str(source) in line and "fits none of nr-llm's tables" in line
    assert "'run', 'sequence', 'kind'" in line and "'order_id'" in line


# ---------------------------------------------------------------- checks


@pytest.mark.slow
def test_table_rows_are_checked_and_listed_with_the_table_file_and_row_and_never_stop_a_build(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [
        run_row(), run_row(status="exploded"), run_row(uid=43, uuid="other", iterations="many"), run_row(),
    ])
    governance = write_rows(tmp_path / "tx_nrllm_governance_event.csv", [decision_row(1, T0, decision="shrug")])
    result = run_cli("validate", events, runs, governance)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert (
        f"{runs}:2: unknown-value: tx_nrllm_agentrun: status is 'exploded', which nr-llm does not write there" in lines
    )
    assert f"{runs}:3: bad-type: tx_nrllm_agentrun: iterations must be an integer" in lines
    assert any(
        line.startswith(f"{runs}:4: duplicate-row: tx_nrllm_agentrun: uid 42 is also in row 1") for line in lines
    )
    assert any(line.startswith(f"{governance}:1: unknown-value: tx_nrllm_governance_event: decision") for line in lines)
    summary = build(tmp_path, events, runs, governance)
    assert summary["rows_rejected"] == 4
    page = (tmp_path / "site" / "en" / "problems.html").read_text(encoding="utf-8")
    assert "tx_nrllm_agentrun: status is" in page and "duplicate-row" in page
    german = (tmp_path / "site" / "de" / "problems.html").read_text(encoding="utf-8")
    assert "was nr-llm dort nicht schreibt" in german


# ---------------------------------------------------------------- joins


@pytest.mark.slow
@pytest.mark.parametrize("events_name_runs_by", ["uid", "uuid"])
def test_events_join_their_run_row_by_uid_or_uuid_and_the_page_is_named_by_the_uuid(
    tmp_path: Path, events_name_runs_by: str
) -> None:
    run = 42 if events_name_runs_by == "uid" else RUN_UUID
    events = write_rows(tmp_path / "events.jsonl", run_events(run))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row(), run_row(uid=43, uuid="gone-run")])
    calls = write_rows(tmp_path / "tx_nrllm_telemetry.jsonl", [
        call_row(1, T0), call_row(2, T0 + 2), call_row(3, T0, correlation=""), call_row(4, T0, correlation="x-y")])
    decisions = write_rows(tmp_path / "tx_nrllm_governance_event.jsonl", [
        decision_row(1, T0 + 1), decision_row(2, T0 + 1, agentrun_uid=0, correlation_id=RUN_UUID),
        decision_row(3, T0, agentrun_uid=999)])
    summary = build(tmp_path, events, runs, calls, decisions)
    assert summary["unmatched"] == {RUNS_TABLE: 1, CALLS_TABLE: 2, GOVERNANCE_TABLE: 1}
    assert (tmp_path / "site" / "en" / "runs" / f"{RUN_UUID}.html").is_file()
    for asked in ("42", RUN_UUID):
        document = timeline(tmp_path, asked, events, runs, calls, decisions)
        assert document["header"]["uid"] == 42 and document["header"]["uuid"] == RUN_UUID
        sources = [entry["source"] for entry in document["entries"]]
        assert sources.count("call") == 2 and sources.count("governance") == 2 and sources.count("step") == 4


def test_without_a_run_row_the_header_is_null_and_the_page_keeps_the_events_id(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events("run-7"))
    document = timeline(tmp_path, "run-7", events)
    assert document["header"] is None
    assert [entry["source"] for entry in document["entries"]] == ["step"] * 4


# ---------------------------------------------------------------- the header


@pytest.mark.parametrize(("status", "reason", "row_totals"), [
    ("completed", "completed", (250, 50, 300)),
    ("failed", "provider_failed", (0, 0, 0)),  # nr-llm's failed settle writes 0 rounds, tokens and cost
    ("cancelled", "cancelled", (0, 0, 0)),  # a cancel keeps what the row had: usually 0
])
def test_the_header_has_the_rows_fields_and_what_was_spent_beside_them(
    tmp_path: Path, status: str, reason: str, row_totals: tuple[int, int, int]
) -> None:
    prompt, completion, total = row_totals
    error = PHP_EXCEPTION if status == "failed" else ""
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row(
        status=status, reason=reason, total_prompt_tokens=prompt, total_completion_tokens=completion,
        total_tokens=total, iterations=0 if status != "completed" else 2, error_class=error)])
    header = timeline(tmp_path, RUN_UUID, events, runs)["header"]
    assert header["status"] == status and header["terminationReason"] == reason
    assert header["configuration"] == "support-triage" and header["created"] == T0 - 1
    assert header["finished"] == T0 + 3 and header["truncated"] is False
    assert header["tokens"] == {"prompt": prompt, "completion": completion, "total": total}
    assert header["errorClass"] == (error or None)
    # Without telemetry, what the llm steps add up to: 100 + 150 prompt, 20 + 30 completion.
    assert header["spent"] == {"tokens": {"prompt": 250, "completion": 50, "total": 300}, "cost": 0.75}
    assert header["cost"] == 0.75 and header["costSource"] == "steps"
    page = timeline(tmp_path, RUN_UUID, events, runs, fmt="md")
    spent_said = "Spent, by the steps" in page
    assert spent_said == (status != "completed")  # beside the row's totals only where they differ
    assert (PHP_EXCEPTION.replace("\\", "\\\\") in page) == (status == "failed")


@pytest.mark.slow
def test_cost_comes_from_the_provider_calls_else_the_steps_else_the_run_row(tmp_path: Path) -> None:
    steps_without_cost = [
        {**row, "payload": json.dumps({key: value for key, value in json.loads(row["payload"]).items()
                                       if key != "estimatedCost"})} for row in run_events(RUN_UUID)]
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    bare = write_rows(tmp_path / "bare.jsonl", steps_without_cost)
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row(estimated_cost="0.250000")])
    calls = write_rows(tmp_path / "tx_nrllm_telemetry.jsonl", [
        call_row(1, T0), call_row(2, T0 + 2, actual_cost=None)])  # the second unpriced
    from_calls = timeline(tmp_path, RUN_UUID, events, runs, calls)["header"]
    assert (from_calls["cost"], from_calls["costSource"]) == (pytest.approx(0.0012), "telemetry")
    assert "1 of 2 calls priced" in timeline(tmp_path, RUN_UUID, events, runs, calls, fmt="md")
    from_steps = timeline(tmp_path, RUN_UUID, events, runs)["header"]
    assert (from_steps["cost"], from_steps["costSource"]) == (0.75, "steps")
    from_row = timeline(tmp_path, RUN_UUID, bare, runs)["header"]
    assert (from_row["cost"], from_row["costSource"]) == (0.25, "run")


# ---------------------------------------------------------------- the merged timeline


def test_the_timeline_merges_as_nr_llm_orders_it_rows_without_sequence_last_in_their_second(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row()])
    # Upstream writes a call's row when the call returns, in the same second as its llm step,
    # and a decision in the second it was made; neither has a sequence.
    calls = write_rows(tmp_path / "tx_nrllm_telemetry.jsonl", [
        call_row(1, T0 + 2, served_provider="anthropic", served_model="claude-sonnet", fallback_attempts=1),
        call_row(2, T0)])
    decisions = write_rows(tmp_path / "tx_nrllm_governance_event.jsonl", [
        decision_row(1, T0), decision_row(2, T0 + 1, decision="tool_denied", tool_name="mcp_github_list_issues")])
    entries = timeline(tmp_path, RUN_UUID, events, runs, calls, decisions)["entries"]
    assert [(entry["source"], entry["time"], entry["sequence"]) for entry in entries] == [
        ("step", T0, 0), ("step", T0, 1), ("call", T0, None), ("governance", T0, None),
        ("step", T0 + 1, 2), ("governance", T0 + 1, None),
        ("step", T0 + 2, 3), ("call", T0 + 2, None),
    ]
    fallback = entries[-1]
    assert fallback["details"]["servedProvider"] == "anthropic" and fallback["details"]["fallbackAttempts"] == 1
    assert fallback["kind"] == "chat" and fallback["durationMs"] == 900 and fallback["outcome"] == "ok"
    assert "servedProvider" not in entries[2]["details"]  # not swapped: not said
    assert entries[5]["kind"] == "tool_denied" and entries[5]["outcome"] == "failed"
    assert entries[5]["details"]["tool"] == "mcp_github_list_issues"


@pytest.mark.slow
@pytest.mark.parametrize(("language", "words"), [
    ("en", ["Source", "Provider call", "Governance", "Completed (completed)", "Served by", "Configurations"]),
    ("de", ["Quelle", "Provider-Aufruf", "Governance", "Abgeschlossen (abgeschlossen)", "Bedient von",
            "Konfigurationen"]),
])
def test_the_run_page_says_its_header_and_sources_in_both_languages(
    tmp_path: Path, language: str, words: list[str]
) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row()])
    calls = write_rows(tmp_path / "tx_nrllm_telemetry.jsonl", [
        call_row(1, T0 + 2, served_provider="anthropic", served_model="claude", fallback_attempts=1)])
    decisions = write_rows(tmp_path / "tx_nrllm_governance_event.jsonl", [decision_row(1, T0)])
    build(tmp_path, events, runs, calls, decisions)
    page = (tmp_path / "site" / language / "runs" / f"{RUN_UUID}.html").read_text(encoding="utf-8")
    for word in words:
        assert word in page
    assert "987654321" not in page and "987,654,321" not in page and "987.654.321" not in page
    index = (tmp_path / "site" / language / "index.html").read_text(encoding="utf-8")
    assert "support-triage" in index
    configurations = (tmp_path / "site" / language / "configurations.html").read_text(encoding="utf-8")
    assert "support-triage" in configurations


def test_backend_user_ids_show_only_when_asked_and_as_ids(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row()])
    build(tmp_path, events, runs, extra=("--show-users", "--lang", "de"))
    page = (tmp_path / "site" / "de" / "runs" / f"{RUN_UUID}.html").read_text(encoding="utf-8")
    assert "987654321" in page and "987.654.321" not in page


def test_the_configurations_figures_count_the_runs_rows(tmp_path: Path) -> None:
    other = "0b0b0b0b-0000-4000-8000-000000000000"
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID) + run_events(other))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [
        run_row(), run_row(uid=43, uuid=other, status="failed", reason="retries_exhausted", total_tokens=0)])
    summary = build(tmp_path, events, runs)
    figures = summary["configurations"]["support-triage"]
    assert figures["runs"] == 2
    assert figures["runs_by_status"] == {"completed": 1, "failed": 1}
    assert figures["runs_by_termination_reason"] == {"completed": 1, "retries_exhausted": 1}
    assert figures["tool_calls"] == {"ok": 2, "failed": 0, "cancelled": 0}
    assert figures["tokens"] == 600  # what the steps spent, for the failed run too (its row says 0)
    assert summary["runs_by_status"] == {"completed": 1, "failed": 1}


# ---------------------------------------------------------------- archive and byte-identity


@pytest.mark.slow
def test_an_archived_run_keeps_its_header_and_merged_timeline_after_its_rows_left_the_export(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row(status="failed", reason="provider_failed")])
    calls = write_rows(tmp_path / "tx_nrllm_telemetry.jsonl", [call_row(1, T0 + 2, success=0,
                                                                         error_class=PHP_EXCEPTION)])
    archive = tmp_path / "history.parquet"
    first = tmp_path / "first"
    assert run_cli("build", events, runs, calls, "--out", first, "--archive", archive, "--no-cache").returncode == 0
    later = write_rows(tmp_path / "later.jsonl", run_events("later-run"))  # nr-llm purged the first run's rows
    second = tmp_path / "second"
    result = run_cli("build", later, "--out", second, "--archive", archive, "--no-cache")
    assert result.returncode == 0, result.stderr
    page = (second / "en" / "runs" / f"{RUN_UUID}.html").read_text(encoding="utf-8")
    assert "Failed (provider failed)" in page and "source-call" in page and "ProviderException" in page
    assert json.loads((second / "summary.json").read_text())["runs_by_status"] == {"failed": 1}


def test_an_events_only_site_has_no_whole_run_page_column_or_summary_key(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    summary = build(tmp_path, events)
    for key in ("runs_by_status", "runs_by_termination_reason", "unmatched", "configurations"):
        assert key not in summary
    assert not (tmp_path / "site" / "en" / "configurations.html").exists()
    page = (tmp_path / "site" / "en" / "runs" / f"{RUN_UUID}.html").read_text(encoding="utf-8")
    assert "run-header" not in page and "Source" not in page


def test_the_bundled_sample_reads_its_tables_and_shows_every_status(tmp_path: Path) -> None:
    out = tmp_path / "site"
    result = run_cli("build", "--out", out, "--no-cache")
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    sample = Path(__file__).resolve().parents[2] / "sample_data"
    rows = [json.loads(line) for line in (sample / "tx_nrllm_agentrun.jsonl").read_text().splitlines()]
    events_runs = {json.loads(line)["run"] for line in (sample / "runs.jsonl").read_text().splitlines()}
    shown = [row for row in rows if row["uuid"] in events_runs]
    expected: dict[str, int] = {}
    for row in shown:
        expected[row["status"]] = expected.get(row["status"], 0) + 1
    assert summary["runs_by_status"] == {status: expected[status] for status in summary["runs_by_status"]}
    assert sum(summary["runs_by_status"].values()) == len(shown)
    assert summary["unmatched"][RUNS_TABLE] == len(rows) - len(shown)
    assert set(TABLES) <= {path.stem for path in sample.glob("tx_nrllm_*.jsonl")}


@pytest.mark.slow
def test_normalize_keeps_the_other_tables_beside_the_steps_and_they_read_back_as_those_tables(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.csv", [run_row()])
    calls = write_rows(tmp_path / "tx_nrllm_telemetry.parquet", [call_row(1, T0)])
    out = tmp_path / "records" / "all.jsonl"
    out.parent.mkdir()
    result = run_cli("normalize", events, runs, calls, "--out", out)
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in out.parent.iterdir()) == [
        "all.jsonl", "tx_nrllm_agentrun.all.jsonl", "tx_nrllm_telemetry.all.jsonl"]
    original = build(tmp_path, events, runs, calls)
    again = build(tmp_path, *sorted(out.parent.iterdir()))
    assert again["runs_by_status"] == {"completed": 1} and again["unmatched"][CALLS_TABLE] == 0
    assert again == original


@pytest.mark.slow
def test_the_fast_path_keeps_its_share_of_the_events_with_every_table_beside_them(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row()])
    calls = write_rows(tmp_path / "tx_nrllm_telemetry.jsonl", [call_row(1, T0)])
    shares = []
    for inputs in ((events,), (events, runs, calls)):
        result = run_cli("build", *inputs, "--out", tmp_path / "site", "--force", "--no-cache", "--timings")
        assert result.returncode == 0, result.stderr
        [line] = [line for line in result.stderr.splitlines() if line.startswith("{")]
        shares.append(json.loads(line)["fast path rows"])
    assert shares == [4, 4]  # every event row through the Arrow path, with the tables or without


# ---------------------------------------------------------------- truer server figures, from files


def catalogue_files(tmp_path: Path) -> list[Path]:
    tools = write_rows(tmp_path / "tx_nrllm_mcp_tool.jsonl", [
        {"uid": 1, "server": 7, "tool_name": "mcp_jira_cloud_search", "remote_name": "search", "orphaned": 0},
        {"uid": 2, "server": 7, "tool_name": "mcp_jira_cloud_old", "remote_name": "old", "orphaned": 1}])
    servers = write_rows(tmp_path / "tx_nrllm_mcp_server.jsonl", [
        {"uid": 7, "identifier": "jira_cloud", "name": "Jira Cloud", "last_contact": T0, "last_latency_ms": 90}])
    return [tools, servers]


def jira_events(run: str) -> list[dict[str, Any]]:
    return [
        event(
            run, 0, "tool", T0, {"toolName": "mcp_jira_cloud_search", "toolIsError": False, "toolOutcome": "ok"}, 30.0
        ),
        event(
            run,
            1,
            "tool",
            T0 + 1,
            {"toolName": "mcp_jira_cloud_search", "toolIsError": True, "toolOutcome": "failed"},
            0.0,
        ),
        event(
            run,
            2,
            "tool",
            T0 + 2,
            {"toolName": "mcp_jira_cloud_search", "toolIsError": True, "toolOutcome": "failed"},
            25.0,
        ),
    ]


@pytest.mark.slow
def test_the_catalogue_names_a_tools_server_over_a_wrong_guess_from_its_name(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", jira_events(RUN_UUID))
    out = tmp_path / "guessed"
    assert run_cli("build", events, "--out", out, "--no-cache").returncode == 0
    guessed = json.loads((out / "summary.json").read_text())
    assert set(guessed["servers"]) == {"jira"}  # the name rule splits at the first "_" without --servers
    told = build(tmp_path, events, *catalogue_files(tmp_path))
    assert set(told["servers"]) == {"jira_cloud"}
    assert told["servers"]["jira_cloud"]["tools"]["mcp_jira_cloud_search"]["orphaned"] is False
    page = (tmp_path / "site" / "en" / "runs" / f"{RUN_UUID}.html").read_text(encoding="utf-8")
    assert "../servers/jira_cloud.html" in page


@pytest.mark.slow
def test_a_governance_denial_keeps_the_call_out_of_the_servers_failure_rate(tmp_path: Path) -> None:
    events = write_rows(tmp_path / "events.jsonl", jira_events(RUN_UUID))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row(status="failed", reason="policy_denied")])
    decisions = write_rows(tmp_path / "tx_nrllm_governance_event.jsonl", [decision_row(
        1, T0 + 1, decision="tool_denied", tool_name="mcp_jira_cloud_search", reason="not_permitted")])
    without = build(tmp_path, events, *catalogue_files(tmp_path))["servers"]["jira_cloud"]
    assert (without["failed"], without["denied"], without["failure_rate"]) == (2, 0, 2 / 3)
    figures = build(tmp_path, events, runs, decisions, *catalogue_files(tmp_path))["servers"]["jira_cloud"]
    assert (figures["ok"], figures["failed"], figures["denied"]) == (1, 1, 1)
    assert figures["failure_rate"] == 1 / 2  # the denied call is no server's failure, like a cancel
    document = timeline(tmp_path, RUN_UUID, events, runs, decisions, *catalogue_files(tmp_path))
    assert document["denials"] == [{"sequence": 1, "toolName": "mcp_jira_cloud_search", "denial": "policy"}]
    german = (tmp_path / "site" / "de" / "runs" / f"{RUN_UUID}.html").read_text(encoding="utf-8")
    assert "durch Richtlinie verweigert" in german


@pytest.mark.slow
def test_a_rebuild_renders_again_only_the_run_pages_whose_other_rows_changed(tmp_path: Path) -> None:
    other = "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    events = write_rows(tmp_path / "events.jsonl", run_events(RUN_UUID) + run_events(other))
    runs = write_rows(tmp_path / "tx_nrllm_agentrun.jsonl", [run_row(), run_row(uid=43, uuid=other)])
    calls_path = tmp_path / "tx_nrllm_telemetry.jsonl"
    out = tmp_path / "site"

    def rebuilt(calls: list[dict[str, Any]]) -> str:
        write_rows(calls_path, calls)
        result = run_cli("build", events, runs, calls_path, "--out", out, "--no-cache", "--force",
                         "--servers", "github")
        assert result.returncode == 0, result.stderr
        return result.stdout + result.stderr

    assert "(4 run pages rendered, 0 reused)" in rebuilt([call_row(1, T0), call_row(2, T0, correlation=other)])
    assert "(0 run pages rendered, 4 reused)" in rebuilt([call_row(1, T0), call_row(2, T0, correlation=other)])
    # One call of the second run says another latency: its two pages (en, de) change, nothing else.
    changed = rebuilt([call_row(1, T0), call_row(2, T0, correlation=other, latency_ms=1500)])
    assert "(2 run pages rendered, 2 reused)" in changed
    page = (out / "en" / "runs" / f"{other}.html").read_text(encoding="utf-8")
    assert "1,500\u00a0ms" in page
