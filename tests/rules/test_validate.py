"""The rule codes: each one triggered, each one's near-miss kept, first rule wins."""

from __future__ import annotations

import json

import pytest
from conftest import check_one, check_rows, rules_of, step_row, tool_payload, tool_row

from nrllm_report.core.model import KNOWN_KINDS, Outcome, Rule, Severity, Unreadable

# ---------------------------------------------------------------------------
# Every rule code: a row that triggers it, and a near-miss that does not.
# ---------------------------------------------------------------------------

TRIGGERS = [
    # unreadable-row
    pytest.param(
        Unreadable("the line is not valid JSON (column %(column)s)", (("column", "3"),)),
        "unreadable-row",
        id="unreadable-line",
    ),
    pytest.param([tool_row()], "unreadable-row", id="unreadable-array-not-object"),
    pytest.param("run 7 sequence 3", "unreadable-row", id="unreadable-string-not-object"),
    pytest.param(42, "unreadable-row", id="unreadable-number-not-object"),
    pytest.param(None, "unreadable-row", id="unreadable-null-record"),
    # missing-field
    pytest.param({k: v for k, v in tool_row().items() if k != "run"}, "missing-field", id="missing-run"),
    pytest.param(tool_row(run=None), "missing-field", id="missing-run-null"),
    pytest.param({k: v for k, v in tool_row().items() if k != "sequence"}, "missing-field", id="missing-sequence"),
    pytest.param(tool_row(sequence=None), "missing-field", id="missing-sequence-null"),
    pytest.param({k: v for k, v in tool_row().items() if k != "kind"}, "missing-field", id="missing-kind"),
    pytest.param(tool_row(kind=None), "missing-field", id="missing-kind-null"),
    # bad-type
    pytest.param(tool_row(sequence="3.5"), "bad-type", id="bad-sequence-string"),
    pytest.param(tool_row(sequence=-1), "bad-type", id="bad-sequence-negative"),
    pytest.param(tool_row(sequence=1.5), "bad-type", id="bad-sequence-fraction"),
    pytest.param(tool_row(sequence=True), "bad-type", id="bad-sequence-boolean"),
    pytest.param(tool_row(sequence=2**63), "bad-type", id="bad-sequence-past-int64"),
    pytest.param(tool_row(run=""), "bad-type", id="bad-run-empty"),
    pytest.param(tool_row(run=1.5), "bad-type", id="bad-run-float"),
    pytest.param(tool_row(run=True), "bad-type", id="bad-run-boolean"),
    pytest.param(tool_row(run={"uid": 7}), "bad-type", id="bad-run-object"),
    pytest.param(tool_row(kind=3), "bad-type", id="bad-kind-number"),
    pytest.param(tool_row(kind=""), "bad-type", id="bad-kind-empty"),
    pytest.param(tool_row(round=-1), "bad-type", id="bad-round-negative"),
    pytest.param(tool_row(round="1e3"), "bad-type", id="bad-round-string"),
    pytest.param(tool_row(duration_ms=-0.5), "bad-type", id="bad-duration-negative"),
    pytest.param(tool_row(duration_ms="12,5"), "bad-type", id="bad-duration-string"),
    pytest.param(tool_row(duration_ms=float("nan")), "bad-type", id="bad-duration-nan"),
    pytest.param(tool_row(duration_ms=False), "bad-type", id="bad-duration-boolean"),
    pytest.param(tool_row(duration_ms=12.5, durationMs=13), "bad-type", id="bad-duration-spellings-disagree"),
    pytest.param(tool_row(crdate=-1), "bad-type", id="bad-crdate-negative"),
    pytest.param(tool_row(crdate=1.5e9), "bad-type", id="bad-crdate-float"),
    pytest.param(tool_row(payload="{not json"), "bad-type", id="bad-payload-text-not-json"),
    pytest.param(tool_row(payload="[1, 2]"), "bad-type", id="bad-payload-text-array"),
    pytest.param(tool_row(payload=5), "bad-type", id="bad-payload-number"),
    pytest.param(tool_row(payload=tool_payload(toolName=5, toolIsError=False)), "bad-type", id="bad-toolname-number"),
    pytest.param(tool_row(server=["github"]), "bad-type", id="bad-server-column-list"),
    pytest.param(tool_row(server=""), "bad-type", id="bad-server-column-empty"),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=False, server="")), "bad-type", id="bad-server-payload-empty"
    ),
    pytest.param(step_row(payload={"promptTokens": -3}), "bad-type", id="bad-prompt-tokens-negative"),
    pytest.param(step_row(payload={"estimatedCost": "0.01"}), "bad-type", id="bad-cost-string"),
    pytest.param(step_row(payload={"requestedToolCalls": "two"}), "bad-type", id="bad-requested-calls-string"),
    pytest.param(step_row("approval", payload={"approved": "yes"}), "bad-type", id="bad-approved-string"),
    # flag-not-boolean
    pytest.param(tool_row(payload=tool_payload(toolIsError="false")), "flag-not-boolean", id="flag-string-false"),
    pytest.param(tool_row(payload=tool_payload(toolIsError=0)), "flag-not-boolean", id="flag-zero"),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=1, toolOutcome="failed")),
        "flag-not-boolean",
        id="flag-one-with-outcome",
    ),
    pytest.param(tool_row(toolIsError="true"), "flag-not-boolean", id="flag-column-string"),
    # unknown-outcome
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=True, toolOutcome="error")), "unknown-outcome", id="outcome-error"
    ),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=False, toolOutcome="OK")), "unknown-outcome", id="outcome-upper-case"
    ),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=True, toolOutcome="")), "unknown-outcome", id="outcome-empty"
    ),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=True, toolOutcome=2)), "unknown-outcome", id="outcome-number"
    ),
    # outcome-without-flag
    pytest.param(tool_row(payload=tool_payload(toolOutcome="ok")), "outcome-without-flag", id="outcome-alone"),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=None, toolOutcome="cancelled")),
        "outcome-without-flag",
        id="outcome-with-null-flag",
    ),
    pytest.param(
        tool_row(toolOutcome="failed", payload=tool_payload()), "outcome-without-flag", id="outcome-column-alone"
    ),
    # flag-contradicts-outcome
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=True, toolOutcome="ok")), "flag-contradicts-outcome", id="true-but-ok"
    ),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=False, toolOutcome="failed")),
        "flag-contradicts-outcome",
        id="false-but-failed",
    ),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError=False, toolOutcome="cancelled")),
        "flag-contradicts-outcome",
        id="false-but-cancelled",
    ),
    pytest.param(
        tool_row(toolIsError=False, payload=tool_payload(toolOutcome="cancelled")),
        "flag-contradicts-outcome",
        id="column-flag-payload-outcome",
    ),
    # outcome-on-non-tool-step
    pytest.param(step_row("llm", payload={"toolIsError": False}), "outcome-on-non-tool-step", id="llm-with-flag"),
    pytest.param(
        step_row("request", payload={"toolIsError": True, "toolOutcome": "failed"}),
        "outcome-on-non-tool-step",
        id="request-with-outcome",
    ),
    pytest.param(step_row("approval", toolIsError=True), "outcome-on-non-tool-step", id="approval-with-flag-column"),
    # column-contradicts-payload
    pytest.param(
        tool_row(toolName="mcp_jira_search", payload=tool_payload(toolIsError=False)),
        "column-contradicts-payload",
        id="toolname-disagrees",
    ),
    pytest.param(
        tool_row(toolIsError=True, payload=tool_payload(toolIsError=False)),
        "column-contradicts-payload",
        id="flag-disagrees",
    ),
    pytest.param(
        tool_row(toolOutcome="failed", payload=tool_payload(toolIsError=True, toolOutcome="cancelled")),
        "column-contradicts-payload",
        id="outcome-disagrees",
    ),
    pytest.param(
        tool_row(server="github", payload=tool_payload(toolIsError=False, server="gitlab")),
        "column-contradicts-payload",
        id="server-disagrees",
    ),
]


@pytest.mark.parametrize(("raw", "rule"), TRIGGERS)
def test_each_rule_rejects_the_row_that_breaks_it(raw: object, rule: str) -> None:
    result = check_one(raw)
    assert result.step is None
    assert rules_of(result) == [rule]
    assert result.problems[0].severity is Severity.ERROR


NEAR_MISSES = [
    pytest.param(tool_row(), id="plain-adr191-row"),
    pytest.param(tool_row(run=0), id="run-zero-is-present"),
    pytest.param(tool_row(run="0"), id="run-text-zero"),
    pytest.param(tool_row(sequence=0), id="sequence-zero-is-present"),
    pytest.param(tool_row(sequence=2**63 - 1), id="sequence-max-int64"),
    pytest.param(tool_row(round=0), id="round-zero"),
    pytest.param(tool_row(round=None), id="round-null"),
    pytest.param(tool_row(duration_ms=0), id="duration-zero"),
    pytest.param(tool_row(duration_ms=None), id="duration-null"),
    pytest.param(tool_row(duration_ms=12.5, durationMs=12.5), id="duration-spellings-agree"),
    pytest.param(tool_row(crdate=0), id="crdate-zero"),
    pytest.param(tool_row(crdate=None), id="crdate-null"),
    pytest.param(tool_row(payload='{"toolName": "x", "toolIsError": false}'), id="payload-text-object"),
    pytest.param(tool_row(payload=None), id="payload-null"),
    pytest.param(step_row(payload={"promptTokens": 0, "estimatedCost": 0.0}), id="zero-tokens-zero-cost"),
    pytest.param(step_row("approval", payload={"approved": False, "decidedBy": 0}), id="approval-false"),
    pytest.param(tool_row(payload=tool_payload(toolIsError=False)), id="legacy-false"),
    pytest.param(tool_row(payload=tool_payload(toolIsError=True)), id="legacy-true"),
    pytest.param(tool_row(payload=tool_payload(toolIsError=True, toolOutcome="cancelled")), id="true-cancelled"),
    pytest.param(tool_row(payload=tool_payload(toolIsError=True, toolOutcome="failed")), id="true-failed"),
    pytest.param(tool_row(payload=tool_payload(toolIsError=True, toolOutcome=None)), id="outcome-null-is-legacy"),
    pytest.param(step_row("llm", payload={"toolName": "search"}), id="llm-naming-a-tool-states-no-outcome"),
    pytest.param(
        step_row("llm", payload={"toolIsError": None, "toolOutcome": None}), id="llm-with-null-flag-and-outcome"
    ),
    pytest.param(
        tool_row(toolName="mcp_github_create_issue", payload=tool_payload(toolIsError=False)), id="toolname-agrees"
    ),
    pytest.param(
        tool_row(toolIsError=False, toolOutcome="ok", payload=tool_payload(toolIsError=False, toolOutcome="ok")),
        id="flag-and-outcome-agree",
    ),
    pytest.param(tool_row(toolName=None, payload=tool_payload(toolIsError=False)), id="null-column-beside-payload"),
    pytest.param(tool_row(server="github", payload=tool_payload(toolIsError=False)), id="server-column-only"),
]


@pytest.mark.parametrize("raw", NEAR_MISSES)
def test_near_misses_are_kept_without_errors(raw: dict) -> None:
    result = check_one(raw)
    assert result.step is not None
    assert [p for p in result.problems if p.severity is Severity.ERROR] == []


def test_every_rule_code_has_a_trigger_here() -> None:
    triggered = {param.values[1] for param in TRIGGERS}
    warnings = {Rule.TOOL_STEP_WITHOUT_FLAG.value, Rule.UNKNOWN_KIND.value, Rule.DUPLICATE_STEP.value}
    tables = {
        Rule.UNKNOWN_VALUE.value,
        Rule.DUPLICATE_ROW.value,
    }  # the other tables' rules: tests/readers/test_tables.py
    assert triggered | warnings | tables == {rule.value for rule in Rule}


# --- duplicate-step ----------------------------------------------------------


def test_second_row_for_a_run_and_sequence_is_rejected_and_the_first_kept() -> None:
    first, second = check_rows(tool_row(duration_ms=1), tool_row(duration_ms=2))
    assert first.step is not None and first.step.duration_ms == 1
    assert second.step is None
    assert rules_of(second) == ["duplicate-step"]
    assert (second.problems[0].run, second.problems[0].sequence, second.problems[0].row) == ("7", 3, 2)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(tool_row(run=7), tool_row(run=8), id="other-run"),
        pytest.param(tool_row(sequence=3), tool_row(sequence=4), id="other-sequence"),
        pytest.param(tool_row(payload=tool_payload(toolIsError="no")), tool_row(), id="first-was-rejected"),
    ],
)
def test_same_step_key_near_misses_are_not_duplicates(first: dict, second: dict) -> None:
    assert check_rows(first, second)[1].step is not None


def test_a_numeric_run_and_its_decimal_text_are_the_same_run() -> None:
    assert rules_of(check_rows(tool_row(run=7), tool_row(run="7"))[1]) == ["duplicate-step"]


# --- warnings ----------------------------------------------------------------


def test_tool_step_without_flag_is_kept_with_a_warning_and_no_outcome() -> None:
    result = check_one(tool_row(payload=tool_payload()))
    assert result.step is not None and result.step.outcome is None
    assert rules_of(result) == ["tool-step-without-flag"]
    assert result.problems[0].severity is Severity.WARNING


def test_null_flag_is_absent_so_the_tool_step_only_warns() -> None:
    result = check_one(tool_row(payload=tool_payload(toolIsError=None)))
    assert result.step is not None
    assert rules_of(result) == ["tool-step-without-flag"]


@pytest.mark.parametrize("kind", sorted(KNOWN_KINDS - {"tool"}))
def test_non_tool_steps_without_flag_do_not_warn(kind: str) -> None:
    result = check_one(step_row(kind))
    assert result.step is not None and result.problems == ()


@pytest.mark.parametrize("kind", ["thought", "Tool", "tool "])
def test_unknown_kind_is_kept_with_a_warning(kind: str) -> None:
    result = check_one(step_row(kind))
    assert result.step is not None and result.step.kind == kind
    assert rules_of(result) == ["unknown-kind"]
    assert result.problems[0].severity is Severity.WARNING
    assert repr(kind) in result.problems[0].text()


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(tool_row(sequence="3.5", payload=tool_payload()), id="tool-without-flag-bad-sequence"),
        pytest.param(step_row("thought", sequence=-1), id="unknown-kind-bad-sequence"),
        pytest.param(step_row("thought", payload={"toolIsError": True}), id="unknown-kind-with-flag"),
    ],
)
def test_rejected_rows_carry_no_warnings(raw: dict) -> None:
    result = check_one(raw)
    assert result.step is None
    assert len(result.problems) == 1
    assert result.problems[0].severity is Severity.ERROR


def test_duplicate_of_a_flagless_tool_step_gets_only_the_error() -> None:
    flagless = tool_row(payload=tool_payload())
    assert rules_of(check_rows(flagless, flagless)[1]) == ["duplicate-step"]


# --- first rule wins -----------------------------------------------------------

FIRST_RULE_WINS = [
    pytest.param(tool_row(run=None, sequence="x"), "missing-field", id="missing-before-bad-type"),
    pytest.param(
        {"sequence": 1, "kind": "tool", "duration_ms": 1, "durationMs": 2},
        "missing-field",
        id="missing-before-spelling-conflict",
    ),
    pytest.param(
        tool_row(sequence=-1, payload=tool_payload(toolIsError="false")), "bad-type", id="bad-type-before-flag"
    ),
    pytest.param(tool_row(payload='{"toolIsError": "yes"'), "bad-type", id="bad-payload-before-anything-inside"),
    pytest.param(tool_row(payload=tool_payload(toolName=3, toolIsError=0)), "bad-type", id="bad-toolname-before-flag"),
    pytest.param(
        tool_row(payload=tool_payload(toolIsError="true", toolOutcome="bogus")),
        "flag-not-boolean",
        id="flag-before-outcome",
    ),
    pytest.param(
        tool_row(payload=tool_payload(toolOutcome="bogus")), "unknown-outcome", id="unknown-before-without-flag"
    ),
    pytest.param(
        step_row("llm", payload={"toolOutcome": "ok"}), "outcome-without-flag", id="without-flag-before-non-tool"
    ),
    pytest.param(
        step_row("llm", payload={"toolIsError": True, "toolOutcome": "ok"}),
        "flag-contradicts-outcome",
        id="contradiction-before-non-tool",
    ),
    pytest.param(
        step_row("llm", toolName="a", payload={"toolName": "b", "toolIsError": False}),
        "outcome-on-non-tool-step",
        id="non-tool-before-column",
    ),
    pytest.param(
        step_row("llm", toolIsError=1, payload={"toolIsError": True}),
        "flag-not-boolean",
        id="flag-column-one-before-column-check",
    ),
]


@pytest.mark.parametrize(("raw", "rule"), FIRST_RULE_WINS)
def test_a_row_breaking_several_rules_gets_only_the_first(raw: dict, rule: str) -> None:
    result = check_one(raw)
    assert result.step is None
    assert rules_of(result) == [rule]


def test_column_contradiction_wins_over_duplicate() -> None:
    contradicting = tool_row(toolName="mcp_x_y")
    assert rules_of(check_rows(tool_row(), contradicting)[1]) == ["column-contradicts-payload"]


def test_rule_enum_lists_the_codes_in_the_order_of_the_table() -> None:
    assert [rule.value for rule in Rule] == [
        "unreadable-row", "missing-field", "bad-type", "flag-not-boolean", "unknown-outcome",
        "outcome-without-flag", "flag-contradicts-outcome", "outcome-on-non-tool-step",
        "column-contradicts-payload", "duplicate-step", "tool-step-without-flag", "unknown-kind",
        "unknown-value", "duplicate-row",
    ]
    assert [rule.value for rule in Rule if rule.severity is Severity.WARNING] == [
        "tool-step-without-flag", "unknown-kind",
    ]


# --- messages and locations ------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        pytest.param(tool_row(payload=tool_payload(toolIsError="false")),
                     ["toolIsError must be a boolean", "'false'"], id="flag"),
        pytest.param(tool_row(sequence="3.5"), ["sequence", "'3.5'"], id="sequence"),
        pytest.param(tool_row(payload=tool_payload(toolIsError=True, toolOutcome="broken")),
                     ["toolOutcome", "'broken'"], id="outcome"),
        pytest.param(tool_row(toolName="a", payload=tool_payload(toolIsError=False)),
                     ["toolName", "'a'", "'mcp_github_create_issue'"], id="column"),
        pytest.param(tool_row(run=None), ["run"], id="missing"),
    ],
)
def test_messages_name_the_field_and_the_users_value(raw: dict, words: list[str]) -> None:
    message = check_one(raw).problems[0].text()
    for word in words:
        assert word in message
    assert "%(" not in message


def test_problem_knows_its_input_row_run_and_sequence() -> None:
    rows = [tool_row(sequence=1), tool_row(sequence=2, payload=tool_payload(toolIsError=0))]
    problem = check_rows(*rows)[1].problems[0]
    assert problem.to_json() == {
        "input": "rows.jsonl",
        "row": 2,
        "run": "7",
        "sequence": 2,
        "rule": "flag-not-boolean",
        "severity": "error",
        "message": "toolIsError must be a boolean, got 0",
    }


def test_a_huge_value_does_not_make_a_huge_message() -> None:
    message = check_one(tool_row(sequence="9" * 100_000)).problems[0].text()
    assert len(message) < 200


# --- strings are data ---------------------------------------------------------------

HOSTILE_STRINGS = [
    pytest.param("../../etc/passwd", id="path-traversal"),
    pytest.param("..\\..\\windows", id="backslashes"),
    pytest.param("<script>alert(1)</script>", id="script-tag"),
    pytest.param('"><img src=x onerror=alert(1)>', id="attribute-break"),
    pytest.param("CON", id="windows-device-name"),
    pytest.param("index", id="index"),
    pytest.param("bell\x07null\x00esc\x1b[31m", id="control-characters"),
    pytest.param("\u202eevil\u202c", id="bidi-override"),
    pytest.param("Run-A", id="mixed-case"),
    pytest.param("Ame\u0301lie", id="combining-accent"),
    pytest.param("😀" * 10, id="emoji"),
    pytest.param("r" * 5000, id="five-thousand-characters"),
    pytest.param(" ", id="single-space"),
]


@pytest.mark.parametrize("text", HOSTILE_STRINGS)
def test_hostile_run_ids_are_kept_exactly(text: str) -> None:
    result = check_one(tool_row(run=text))
    assert result.step is not None and result.step.run == text
    assert result.problems == ()


@pytest.mark.parametrize("text", HOSTILE_STRINGS)
def test_hostile_tool_names_are_kept_exactly(text: str) -> None:
    name = "mcp_" + text + "_x"
    result = check_one(tool_row(payload=tool_payload(toolName=name, toolIsError=True, toolOutcome="cancelled")))
    assert result.step is not None
    assert result.step.tool_name == name
    assert result.step.outcome is Outcome.CANCELLED


@pytest.mark.parametrize("text", HOSTILE_STRINGS)
def test_hostile_kinds_and_servers_are_kept(text: str) -> None:
    result = check_one(tool_row(server=text, payload=tool_payload(toolIsError=False)))
    assert result.step is not None and result.step.server == text
    assert rules_of(check_one(step_row(text))) in ([], ["unknown-kind"])


# --- text no output can hold ----------------------------------------------------------------------
# JSON's \uXXXX escapes can carry a lone surrogate: not a character, and no UTF-8
# output (JSON report, normalized file, Parquet, page) can write it.


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param(tool_row(run="run-\ud800"), "run", id="run"),
        pytest.param(step_row("\udfff"), "kind", id="kind"),
        pytest.param(
            tool_row(payload=tool_payload(toolName="mcp_\udc80_x", toolIsError=False)), "toolName", id="tool-name"
        ),
        pytest.param(tool_row(server="gh\ud83d"), "server", id="server"),
        pytest.param(step_row("llm", payload={"finishReason": "\ud800"}), "finishReason", id="finish-reason"),
    ],
)
def test_a_lone_surrogate_in_a_kept_string_is_bad_type(raw: dict, field: str) -> None:
    result = check_one(raw)
    assert rules_of(result) == ["bad-type"]
    problem = result.problems[0]
    assert problem.text().startswith(field)
    problem.text().encode("utf-8")
    assert problem.run is None or problem.run.encode("utf-8")


def test_a_lone_surrogate_in_content_is_no_problem() -> None:
    result = check_one(
        tool_row(payload=tool_payload(toolIsError=False, toolResult="\ud800", toolArguments={"\udfff": 1}))
    )
    assert result.step is not None and result.problems == ()


def test_an_astral_character_written_as_a_surrogate_pair_is_text() -> None:
    row = json.loads('{"run": "\\ud83d\\ude00", "sequence": 0, "kind": "llm"}')
    result = check_one(row)
    assert result.step is not None and result.step.run == "😀"
