"""The ADR-191 reading, server resolution and the canonical record."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import check_one, step_row, tool_payload, tool_row

import nrllm_report
from nrllm_report.check.normalize import ABSENT, known_server_order, read_outcome, server_of
from nrllm_report.core.model import Outcome
from nrllm_report.core.schema import Step

# --- the outcome, boolean first (ADR-191 decision 5) ---------------------------------


@pytest.mark.parametrize(
    ("payload", "outcome"),
    [
        pytest.param(tool_payload(toolIsError=True), Outcome.FAILED, id="legacy-true-is-failed"),
        pytest.param(tool_payload(toolIsError=False), Outcome.OK, id="legacy-false-is-ok"),
        pytest.param(tool_payload(toolIsError=True, toolOutcome="cancelled"), Outcome.CANCELLED, id="true-cancelled"),
        pytest.param(tool_payload(toolIsError=True, toolOutcome="failed"), Outcome.FAILED, id="true-failed"),
        pytest.param(tool_payload(toolIsError=False, toolOutcome="ok"), Outcome.OK, id="false-ok"),
        pytest.param(tool_payload(), None, id="no-flag-no-outcome"),
        pytest.param(tool_payload(toolIsError=None, toolOutcome=None), None, id="null-flag-null-outcome"),
    ],
)
def test_outcome_is_read_boolean_first(payload: dict, outcome: Outcome | None) -> None:
    step = check_one(tool_row(payload=payload)).step
    assert step is not None
    assert step.outcome is outcome


@pytest.mark.parametrize(
    ("row", "outcome"),
    [
        pytest.param(tool_row(toolIsError=True, payload=tool_payload()), Outcome.FAILED, id="flag-column-legacy"),
        pytest.param(
            tool_row(toolIsError=True, toolOutcome="cancelled", payload={}), Outcome.CANCELLED, id="both-columns"
        ),
        pytest.param(
            tool_row(toolIsError=True, payload=tool_payload(toolOutcome="cancelled")),
            Outcome.CANCELLED,
            id="flag-column-outcome-payload",
        ),
        pytest.param(
            tool_row(toolOutcome="cancelled", payload=tool_payload(toolIsError=True)),
            Outcome.CANCELLED,
            id="outcome-column-flag-payload",
        ),
        pytest.param(tool_row(tool_is_error=False, payload={}), Outcome.OK, id="snake-case-flag-column"),
    ],
)
def test_flattened_flag_and_outcome_columns_are_read_like_payload_keys(row: dict, outcome: Outcome) -> None:
    step = check_one(row).step
    assert step is not None and step.outcome is outcome


@pytest.mark.parametrize(
    ("flag", "given", "outcome"),
    [
        pytest.param(ABSENT, ABSENT, None, id="nothing"),
        pytest.param(True, ABSENT, Outcome.FAILED, id="legacy-true"),
        pytest.param(False, ABSENT, Outcome.OK, id="legacy-false"),
        pytest.param(True, "cancelled", Outcome.CANCELLED, id="cancelled"),
        pytest.param(True, "failed", Outcome.FAILED, id="failed"),
        pytest.param(False, "ok", Outcome.OK, id="ok"),
    ],
)
def test_read_outcome(flag: object, given: object, outcome: Outcome | None) -> None:
    assert read_outcome(flag, given) is outcome


# --- one enum spells the outcome ---------------------------------------------------------


def test_outcome_enum_values_are_exactly_the_three_strings() -> None:
    assert [outcome.value for outcome in Outcome] == ["ok", "failed", "cancelled"]
    assert {outcome: outcome.is_error for outcome in Outcome} == {
        Outcome.OK: False, Outcome.FAILED: True, Outcome.CANCELLED: True,
    }


@pytest.mark.parametrize("outcome", list(Outcome), ids=lambda outcome: outcome.value)
def test_canonical_record_carries_the_enum_value(outcome: Outcome) -> None:
    payload = tool_payload(toolIsError=outcome.is_error, toolOutcome=outcome.value)
    step = check_one(tool_row(payload=payload)).step
    assert step is not None
    assert step.to_record()["outcome"] == outcome.value
    assert type(step.to_record()["outcome"]) is str


CORE_MODULES = ["check", "readers", "store", "aggregate", "output", "pipeline", "cli.py"]


def _string_literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


@pytest.mark.parametrize("module", CORE_MODULES)
def test_data_core_does_not_spell_outcome_strings_itself(module: str) -> None:
    root = Path(nrllm_report.__file__).parent / module
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    spelled = {str(file.name): _string_literals(file) & {"ok", "failed", "cancelled"} for file in files}
    assert {name: found for name, found in spelled.items() if found} == {}


# --- the server of a tool ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_name", "servers", "server"),
    [
        pytest.param("mcp_github_create_issue", (), "github", id="plain"),
        pytest.param("mcp_docs-search_query", (), "docs-search", id="hyphen-in-server"),
        pytest.param("mcp_jira_cloud_create_issue", (), "jira", id="underscore-unknown-splits-at-first"),
        pytest.param("mcp_jira_cloud_create_issue", ("jira_cloud",), "jira_cloud", id="underscore-known"),
        pytest.param("mcp_jira_cloud_create_issue", ("jira", "jira_cloud"), "jira_cloud", id="longest-known-wins"),
        pytest.param("mcp_jira_cloud_create_issue", ("jira_cloud", "jira"), "jira_cloud", id="longest-wins-any-order"),
        pytest.param("mcp_crm_eu_west_lookup", ("crm", "crm_eu", "crm_eu_west"), "crm_eu_west", id="three-levels"),
        pytest.param(
            "mcp_crm_eu_lookup", ("crm", "crm_eu", "crm_eu_west"), "crm_eu", id="shorter-when-longer-does-not-fit"
        ),
        pytest.param("mcp_jira_search", ("jira_cloud",), "jira", id="known-id-that-does-not-fit"),
        pytest.param("mcp_jira_cloud", ("jira_cloud",), "jira", id="known-id-needs-a-tool-after-it"),
        pytest.param("mcp_github", (), None, id="no-tool-part"),
        pytest.param("mcp_", (), None, id="prefix-only"),
        pytest.param("mcp__tool", (), None, id="empty-server"),
        pytest.param("search_docs", (), None, id="local-tool"),
        pytest.param("search_docs", ("search",), None, id="local-tool-despite-known-id"),
        pytest.param("github_create_issue", ("github",), None, id="no-prefix-no-server"),
    ],
)
def test_server_of_tool_name(tool_name: str, servers: tuple[str, ...], server: str | None) -> None:
    assert server_of(tool_name, known_server_order(servers)) == server


@pytest.mark.parametrize(
    ("row", "servers", "server"),
    [
        pytest.param(tool_row(), (), "github", id="from-payload-name"),
        pytest.param(
            tool_row(payload=tool_payload(toolName="mcp_jira_cloud_search", toolIsError=False)),
            ("jira_cloud",),
            "jira_cloud",
            id="known-servers-given",
        ),
        pytest.param(tool_row(server="gh-enterprise"), (), "gh-enterprise", id="server-column-wins"),
        pytest.param(
            tool_row(payload=tool_payload(server="gh-enterprise", toolIsError=False)),
            (),
            "gh-enterprise",
            id="server-payload-key",
        ),
        pytest.param(
            tool_row(payload=tool_payload(toolName="read_file", toolIsError=False)), (), None, id="local-tool"
        ),
        pytest.param(tool_row(payload=tool_payload(toolName=..., toolIsError=False)), (), None, id="no-tool-name"),
        pytest.param(step_row("llm", payload={"toolName": "mcp_github_x"}), (), None, id="non-tool-step-has-no-server"),
    ],
)
def test_server_of_a_step(row: dict, servers: tuple[str, ...], server: str | None) -> None:
    step = check_one(row, servers=servers).step
    assert step is not None and step.server == server


# --- the canonical record --------------------------------------------------------------------------

REQUIRED_RECORD_KEYS = [
    "run", "sequence", "kind", "round", "durationMs", "crdate", "toolName", "server", "toolIsError", "outcome",
]


def test_canonical_record_has_issue_2_fields_first() -> None:
    step = check_one(tool_row()).step
    assert step is not None
    assert list(step.to_record())[: len(REQUIRED_RECORD_KEYS)] == REQUIRED_RECORD_KEYS


def test_canonical_record_of_a_tool_row() -> None:
    step = check_one(tool_row(run=42, payload=tool_payload(toolIsError=True, toolOutcome="cancelled"))).step
    assert step is not None
    record = step.to_record()
    assert {key: record[key] for key in REQUIRED_RECORD_KEYS} == {
        "run": "42",
        "sequence": 3,
        "kind": "tool",
        "round": 1,
        "durationMs": 12.5,
        "crdate": 1_788_000_000,
        "toolName": "mcp_github_create_issue",
        "server": "github",
        "toolIsError": True,
        "outcome": "cancelled",
    }


def test_missing_optional_columns_get_their_defaults() -> None:
    step = check_one({"run": "a", "sequence": 0, "kind": "context"}).step
    assert step == Step(
        run="a", sequence=0, kind="context", round=0, duration_ms=0.0, crdate=None,
        tool_name=None, server=None, tool_is_error=None, outcome=None, outcome_stated=None,
    )


def test_llm_facts_are_kept_and_lists_become_counts() -> None:
    payload = {
        "finishReason": "tool_calls",
        "promptTokens": 1200,
        "completionTokens": 80,
        "totalTokens": 1280,
        "estimatedCost": 0.0042,
        "requestedToolCalls": [{"name": "mcp_github_x", "arguments": {"q": "SECRET"}}, {"name": "y"}],
        "content": "SECRET answer",
        "thinking": "SECRET thoughts",
        "raw": {"SECRET": True},
    }
    step = check_one(step_row("llm", payload=payload)).step
    assert step is not None
    record = step.to_record()
    assert {key: record[key] for key in ("finishReason", "promptTokens", "completionTokens", "totalTokens",
                                         "estimatedCost", "requestedToolCallCount")} == {
        "finishReason": "tool_calls", "promptTokens": 1200, "completionTokens": 80, "totalTokens": 1280,
        "estimatedCost": 0.0042, "requestedToolCallCount": 2,
    }


@pytest.mark.parametrize(
    ("row", "key", "value"),
    [
        pytest.param(step_row("request", payload={"messagesSent": [{"role": "user", "content": "SECRET"}] * 3,
                                                  "toolSpecs": ["a", "b"]}), "messageCount", 3, id="messages"),
        pytest.param(step_row("assembled", payload={"toolSpecs": ["a", "b"]}), "toolSpecCount", 2, id="tool-specs"),
        pytest.param(step_row("dropped", payload={"droppedSources": ["context#4 too long"]}), "droppedSourceCount", 1,
                     id="dropped"),
        pytest.param(step_row("approval", payload={"approved": True, "decidedBy": 5}), "decidedBy", 5, id="approval"),
        pytest.param(tool_row(payload=tool_payload(toolIsError=False, toolArtifacts=[{"data": "SECRET"}])),
                     "artifactCount", 1, id="artifacts"),
    ],
)
def test_other_facts_are_counted(row: dict, key: str, value: object) -> None:
    step = check_one(row).step
    assert step is not None and step.to_record()[key] == value


@pytest.mark.parametrize("as_text", [False, True], ids=["payload-object", "payload-text"])
def test_content_never_reaches_the_canonical_record(as_text: bool) -> None:
    payload = tool_payload(
        toolIsError=False,
        toolArguments={"query": "SECRET-ARG"},
        toolResult="SECRET-RESULT",
        toolArtifacts=[{"data": "SECRET-ARTIFACT"}],
        futureContentKey="SECRET-FUTURE",
    )
    step = check_one(tool_row(payload=json.dumps(payload) if as_text else payload)).step
    assert step is not None
    assert "SECRET" not in json.dumps(step.to_record())


def test_duration_is_a_float_whichever_spelling() -> None:
    snake = check_one(tool_row(duration_ms=250)).step
    camel = check_one({**tool_row(duration_ms=None), "durationMs": 250}).step
    assert snake is not None and camel is not None
    assert snake.duration_ms == camel.duration_ms == 250.0
    assert type(snake.to_record()["durationMs"]) is float
