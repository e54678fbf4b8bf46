"""The validate and normalize commands: output formats, exit codes, error paths."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import Result
from command_line import run_cli
from conftest import jsonl_bytes, step_row, tool_payload, tool_row

GOOD = [
    tool_row(sequence=0, payload=tool_payload(toolIsError=False)),
    tool_row(sequence=1, payload=tool_payload(toolIsError=True, toolOutcome="cancelled")),
    tool_row(sequence=2, payload=tool_payload(toolName="mcp_jira_cloud_search", toolIsError=True)),
]
FLAGLESS = tool_row(sequence=3, payload=tool_payload(toolName="read_file"))
BAD_FLAG = tool_row(sequence=4, payload=tool_payload(toolIsError="false"))
BAD_SEQUENCE = tool_row(sequence="5.5")

Cli = Callable[..., Result]


def _assert_one_line_error(result: Result, exit_code: int, *words: str) -> None:
    assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    for word in words:
        assert word in lines[0]


# --- validate: exit codes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "exit_code"),
    [
        pytest.param(GOOD, 0, id="all-valid"),
        pytest.param(GOOD + [FLAGLESS, step_row("thought", sequence=9)], 0, id="warnings-only"),
        pytest.param(GOOD + [BAD_FLAG], 1, id="one-error"),
        pytest.param([], 0, id="empty"),
    ],
)
def test_validate_exit_code(cli: Cli, write_rows: Callable[..., Path], rows: list, exit_code: int) -> None:
    assert cli("validate", write_rows("rows.jsonl", rows)).exit_code == exit_code


# --- validate: text format -------------------------------------------------------------------------------


def test_validate_text_lists_each_problem_then_a_summary(cli: Cli, write_rows: Callable[..., Path]) -> None:
    path = write_rows("rows.jsonl", GOOD + [FLAGLESS, BAD_FLAG, BAD_SEQUENCE])
    result = cli("validate", path)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        f"{path}:4: tool-step-without-flag: the tool step has no toolIsError, so it states no outcome; it is kept",
        f"{path}:5: flag-not-boolean: toolIsError must be a boolean, got 'false'",
        f"{path}:6: bad-type: sequence must be an integer ≥ 0, got '5.5'",
        "6 rows read: 4 valid, 2 rejected, 1 warning.",
    ]


def test_validate_text_of_a_clean_file_is_only_the_summary(cli: Cli, write_rows: Callable[..., Path]) -> None:
    result = cli("validate", write_rows("rows.jsonl", GOOD))
    assert result.stdout.splitlines() == ["3 rows read: 3 valid, 0 rejected, 0 warnings."]


# --- validate: json format -------------------------------------------------------------------------------


def test_validate_json_has_exactly_the_fields_of_issue_2(cli: Cli, write_rows: Callable[..., Path]) -> None:
    path = write_rows("rows.jsonl", GOOD + [FLAGLESS, BAD_FLAG])
    result = cli("validate", path, "--format", "json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "rows_read": 5,
        "rows_valid": 4,
        "rows_rejected": 1,
        "problems": [
            {
                "input": str(path),
                "row": 4,
                "run": "7",
                "sequence": 3,
                "rule": "tool-step-without-flag",
                "severity": "warning",
                "message": "the tool step has no toolIsError, so it states no outcome; it is kept",
            },
            {
                "input": str(path),
                "row": 5,
                "run": "7",
                "sequence": 4,
                "rule": "flag-not-boolean",
                "severity": "error",
                "message": "toolIsError must be a boolean, got 'false'",
            },
        ],
    }


def test_validate_json_names_inputs_as_given_and_rows_per_input(
    cli: Cli, write_rows: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_rows("a.jsonl", [BAD_SEQUENCE])
    write_rows("sub/b.json", [tool_row(run="x", sequence=0), {"kind": "tool"}])
    monkeypatch.chdir(tmp_path)
    result = cli("validate", "a.jsonl", "./sub/b.json", "-", "--format", "json",
                 input=jsonl_bytes(["not json"]))
    report = json.loads(result.stdout)
    assert [(p["input"], p["row"], p["rule"]) for p in report["problems"]] == [
        ("a.jsonl", 1, "bad-type"),
        ("./sub/b.json", 2, "missing-field"),
        ("-", 1, "unreadable-row"),
    ]
    assert (report["rows_read"], report["rows_valid"], report["rows_rejected"]) == (4, 1, 3)


def test_validate_json_problem_without_run_has_null_run(cli: Cli, write_rows: Callable[..., Path]) -> None:
    result = cli("validate", write_rows("rows.jsonl", ["{oops"]), "--format", "json")
    problem = json.loads(result.stdout)["problems"][0]
    assert (problem["run"], problem["sequence"], problem["rule"]) == (None, None, "unreadable-row")


def test_validate_servers_option_is_accepted(cli: Cli, write_rows: Callable[..., Path]) -> None:
    result = cli("validate", write_rows("rows.jsonl", GOOD), "--servers", "jira_cloud, crm_eu_west,")
    assert result.exit_code == 0


# --- error paths: exit 2, one line naming the file, no traceback ------------------------------------------


def test_missing_path_is_exit_2_naming_it(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    _assert_one_line_error(cli("validate", missing), 2, str(missing), "no such file")


def test_missing_path_fails_before_any_other_input_is_read(
    cli: Cli, write_rows: Callable[..., Path], tmp_path: Path
) -> None:
    result = cli("validate", write_rows("rows.jsonl", GOOD), tmp_path / "typo.jsonl", "--format", "json")
    _assert_one_line_error(result, 2, "typo.jsonl")
    assert result.stdout == ""


@pytest.mark.parametrize("name", ["rows.xml", "rows.txt", "rows", "rows.gz", "rows.parquet.zip"])
def test_unknown_format_is_exit_2_naming_the_file(cli: Cli, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b'{"run": 1, "sequence": 0, "kind": "llm"}\n')
    _assert_one_line_error(cli("validate", path), 2, str(path), "unknown format")


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        pytest.param(
            "rows.json", b'[{"run": 1, "sequence": 0, "kind": "llm"},', ["not a valid JSON array"], id="cut-json-array"
        ),
        pytest.param("rows.json", b"[\xff\xfe", ["not a valid JSON array"], id="json-array-not-utf8-and-cut"),
        pytest.param("rows.json", b"[1, 2] [3]", ["not a valid JSON array"], id="json-array-trailing-data"),
        pytest.param("rows.parquet", b"PAR1 but not really", ["Parquet"], id="fake-parquet"),
        pytest.param("rows.jsonl.gz", b"\x1f\x8b\x08\x00garbage", ["gzip"], id="corrupt-gzip"),
        pytest.param("rows.jsonl.gz", b"plain text, not gzip\n", ["gzip"], id="not-gzip-at-all"),
    ],
)
def test_unreadable_file_is_exit_2_naming_it(
    cli: Cli, tmp_path: Path, name: str, content: bytes, words: list[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    _assert_one_line_error(cli("validate", path), 2, str(path), *words)


# Root reads any file: its reading overrides (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) are dropped from
# the command's bounding set by util-linux's setpriv, so the command reads as any other user would.
ROOT_READS_AS_A_USER = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def test_file_without_read_permission_is_exit_2(write_rows: Callable[..., Path]) -> None:
    path = write_rows("rows.jsonl", GOOD)
    path.chmod(0)
    as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    try:
        completed = run_cli("validate", path, prefix=ROOT_READS_AS_A_USER if as_root else ())
    finally:
        path.chmod(0o644)
    assert completed.returncode == 2, completed.stderr
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in completed.stderr, completed.stderr
    assert str(path) in lines[0] and "permission" in lines[0]


def test_folder_without_parquet_files_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "rows.jsonl"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    _assert_one_line_error(cli("validate", folder), 2, str(folder), "without Parquet files")


def test_stdin_twice_is_exit_2(cli: Cli) -> None:
    _assert_one_line_error(cli("validate", "-", "-", input=b""), 2, "-", "only once")


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["validate"], id="validate-without-input"),
        pytest.param(["validate", "x.jsonl", "--format", "xml"], id="unknown-output-format"),
        pytest.param(["normalize", "x.jsonl"], id="normalize-without-out"),
        pytest.param(["frobnicate"], id="unknown-command"),
    ],
)
def test_usage_errors_are_exit_2(cli: Cli, args: list[str]) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output


# --- normalize ---------------------------------------------------------------------------------------------------


def _jsonl_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_normalize_to_jsonl_writes_every_row_without_an_error(
    cli: Cli, write_rows: Callable[..., Path], tmp_path: Path
) -> None:
    source = write_rows("rows.jsonl", GOOD + [FLAGLESS, BAD_FLAG])
    out = tmp_path / "out.jsonl"
    result = cli("normalize", source, "--out", out, "--servers", "jira_cloud")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"{source}:5: flag-not-boolean:" in result.stderr
    assert "5 rows read: 4 valid, 1 rejected, 1 warning." in result.stderr
    records = _jsonl_records(out)
    assert [(r["sequence"], r["server"], r["toolIsError"], r["outcome"]) for r in records] == [
        (0, "github", False, "ok"),
        (1, "github", True, "cancelled"),
        (2, "jira_cloud", True, "failed"),
        (3, None, None, None),
    ]
    assert records[0] == {
        "run": "7",
        "sequence": 0,
        "kind": "tool",
        "round": 1,
        "durationMs": 12.5,
        "crdate": 1_788_000_000,
        "toolName": "mcp_github_create_issue",
        "server": "github",
        "toolIsError": False,
        "outcome": "ok",
        "outcomeStated": False,
        "finishReason": None,
        "promptTokens": None,
        "completionTokens": None,
        "totalTokens": None,
        "estimatedCost": None,
        "requestedToolCallCount": None,
        "messageCount": None,
        "toolSpecCount": None,
        "artifactCount": None,
        "droppedSourceCount": None,
        "approved": None,
        "decidedBy": None,
        "requestedToolNames": None,
        "toolSpecs": None,
        "toolArtifactTypes": None,
        "contentLength": None,
        "thinkingLength": None,
        "toolResultLength": None,
        "contentRedacted": None,
        "droppedSources": None,
    }


def test_normalize_without_servers_splits_at_the_first_underscore(
    cli: Cli, write_rows: Callable[..., Path], tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    assert cli("normalize", write_rows("rows.jsonl", GOOD), "--out", out).exit_code == 0
    assert [record["server"] for record in _jsonl_records(out)] == ["github", "github", "jira"]


def test_normalize_to_parquet(cli: Cli, write_rows: Callable[..., Path], tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    result = cli("normalize", write_rows("rows.json", GOOD + [FLAGLESS]), "--out", out)
    assert result.exit_code == 0
    table = pq.read_table(out)
    assert table.column_names[:10] == [
        "run", "sequence", "kind", "round", "durationMs", "crdate", "toolName", "server", "toolIsError", "outcome",
    ]
    assert table.column("outcome").to_pylist() == ["ok", "cancelled", "failed", None]
    assert table.column("run").to_pylist() == ["7"] * 4


def test_normalize_parquet_and_jsonl_hold_the_same_records(
    cli: Cli, write_rows: Callable[..., Path], tmp_path: Path
) -> None:
    source = write_rows("rows.jsonl", GOOD + [FLAGLESS, step_row("llm", sequence=8, payload={"promptTokens": 5})])
    cli("normalize", source, "--out", tmp_path / "out.jsonl")
    cli("normalize", source, "--out", tmp_path / "out.parquet")
    assert pq.read_table(tmp_path / "out.parquet").to_pylist() == _jsonl_records(tmp_path / "out.jsonl")


def test_normalize_reads_stdin(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    result = cli("normalize", "-", "--out", out, input=jsonl_bytes(GOOD))
    assert result.exit_code == 0
    assert len(_jsonl_records(out)) == 3


def test_normalize_output_can_be_validated_again(cli: Cli, write_rows: Callable[..., Path], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    cli("normalize", write_rows("rows.jsonl", GOOD), "--out", out)
    result = cli("validate", out, "--format", "json")
    assert json.loads(result.stdout)["rows_valid"] == 3


@pytest.mark.parametrize(
    ("out_name", "words"),
    [
        pytest.param("out.csv", ["out.csv", "unknown output format"], id="unknown-suffix"),
        pytest.param("missing/out.jsonl", ["does not exist"], id="missing-folder"),
    ],
)
def test_normalize_refuses_an_output_it_cannot_write(
    cli: Cli, write_rows: Callable[..., Path], tmp_path: Path, out_name: str, words: list[str]
) -> None:
    result = cli("normalize", write_rows("rows.jsonl", GOOD), "--out", tmp_path / out_name)
    _assert_one_line_error(result, 2, *words)
    assert not (tmp_path / out_name).exists()


def test_normalize_of_an_unreadable_input_leaves_no_output_behind(
    cli: Cli, write_rows: Callable[..., Path], tmp_path: Path
) -> None:
    good = write_rows("a.jsonl", GOOD)
    broken = tmp_path / "b.jsonl.gz"
    broken.write_bytes(write_rows("c.jsonl.gz", GOOD * 50).read_bytes()[:-20])
    out_folder = tmp_path / "out"
    out_folder.mkdir()
    result = cli("normalize", good, broken, "--out", out_folder / "out.jsonl")
    _assert_one_line_error(result, 2, str(broken))
    assert list(out_folder.iterdir()) == []


def test_normalize_keeps_the_previous_output_when_an_input_fails(
    cli: Cli, write_rows: Callable[..., Path], tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("previous\n")
    fake = tmp_path / "fake.parquet"
    fake.write_bytes(b"nope")
    assert cli("normalize", write_rows("a.jsonl", GOOD), fake, "--out", out).exit_code == 2
    assert out.read_text() == "previous\n"


# --- a real process --------------------------------------------------------------------------------------------------


def test_subprocess_validate_json_and_exit_code(write_rows: Callable[..., Path]) -> None:
    path = write_rows("rows.jsonl.gz", GOOD + [BAD_FLAG])
    process = run_cli("validate", path, "--format", "json")
    assert process.returncode == 1
    report = json.loads(process.stdout)
    assert (report["rows_read"], report["rows_rejected"], report["problems"][0]["rule"]) == (4, 1, "flag-not-boolean")


def test_subprocess_reads_stdin(tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    process = run_cli("normalize", "-", "--out", out, input=jsonl_bytes(GOOD).decode())
    assert process.returncode == 0, process.stderr
    assert pq.read_table(out).num_rows == 3


@pytest.mark.parametrize("name", ["missing.jsonl", "rows.xlsx"])
def test_subprocess_error_is_one_line_without_traceback(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name.endswith(".xlsx"):
        path.write_bytes(b"PK")
    process = run_cli("validate", path)
    assert process.returncode == 2
    assert process.stderr.count("\n") == 1 and str(path) in process.stderr
    assert "Traceback" not in process.stderr
    assert process.stdout == ""
