"""diff: two sets of exports compared per server and per tool, with a known worse server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from command_line import invoke, run_cli
from site_helpers import BASE_TIME, failure_text, tool, write_jsonl

from nrllm_report.aggregate.compare import Decision
from nrllm_report.aggregate.diff import Presence, diff_exports
from nrllm_report.aggregate.figures import OutcomeCounts, ServerStats, ToolStats
from nrllm_report.cli import spelled_out


def calls_of(
    prefix: str, server: str, ok: int, failed: int, cancelled: int = 0, name: str = "call"
) -> list[dict[str, Any]]:
    """One run per call of ``mcp_<server>_<name>``: ``ok`` ok, ``failed`` failed, ``cancelled`` cancelled."""
    outcomes = ["ok"] * ok + ["failed"] * failed + ["cancelled"] * cancelled
    return [tool(f"{prefix}-{server}-{name}-{index}", 0, f"mcp_{server}_{name}", outcome != "ok", outcome,
                 crdate=BASE_TIME + index * 60)
            for index, outcome in enumerate(outcomes)]


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Baseline and current: ``worsening`` 5 % → 25 % at 200 calls a side, ``stable`` 5 % on both,
    ``gone`` only in the baseline, ``fresh`` only in the current export."""
    folder = tmp_path_factory.mktemp("diff")
    baseline = (calls_of("b", "worsening", 190, 10) + calls_of("b", "stable", 190, 10, 20)
                + calls_of("b", "gone", 40, 2))
    current = (calls_of("c", "worsening", 150, 50) + calls_of("c", "stable", 190, 10, 3)
               + calls_of("c", "fresh", 30, 0))
    return {
        "baseline": write_jsonl(folder / "baseline.jsonl", baseline),
        "current": write_jsonl(folder / "current.jsonl", current),
        "stable-only": write_jsonl(folder / "stable.jsonl", calls_of("s", "stable", 190, 10)),
    }


def diff(*args: Any) -> Result:
    return invoke("diff", *args)


def diff_json(*args: Any) -> dict[str, Any]:
    result = diff(*args, "--format", "json")
    assert result.exit_code == 0, failure_text(result)
    return json.loads(result.stdout)


def test_the_worse_server_is_worse_and_the_stable_one_unchanged(exports: dict[str, Path]) -> None:
    document = diff_json("--baseline", exports["baseline"], "--current", exports["current"])
    servers = {row["server"]: row for row in document["servers"]}
    assert document["worse"] == ["worsening"]
    assert servers["worsening"]["decision"] == "worse" and servers["worsening"]["p_value"] < 0.05
    assert servers["worsening"]["change"] == pytest.approx(0.20)
    assert servers["stable"]["decision"] == "unchanged" and servers["stable"]["change"] == 0
    assert servers["stable"]["baseline"] == {
        "calls": 220,
        "ok": 190,
        "failed": 10,
        "cancelled": 20,
        "failure_rate": 0.05,
        "interval": servers["stable"]["baseline"]["interval"],
    }
    low, high = servers["stable"]["baseline"]["interval"]
    assert low < 0.05 < high
    assert document["appeared"] == ["fresh"] and document["vanished"] == ["gone"]
    assert servers["fresh"]["presence"] == "appeared" and servers["fresh"]["decision"] is None
    assert servers["gone"]["current"]["calls"] == 0 and servers["gone"]["current"]["failure_rate"] is None
    assert [row["server"] for row in document["servers"]] == ["worsening", "fresh", "gone", "stable"]


@pytest.mark.slow
def test_tools_are_compared_too(exports: dict[str, Path]) -> None:
    document = diff_json("--baseline", exports["baseline"], "--current", exports["current"])
    tools = {(row["server"], row["tool"]): row for row in document["tools"]}
    assert tools[("worsening", "mcp_worsening_call")]["decision"] == "worse"
    assert tools[("fresh", "mcp_fresh_call")]["presence"] == "appeared"
    assert tools[("gone", "mcp_gone_call")]["presence"] == "vanished"


@pytest.mark.slow
def test_the_json_schema(exports: dict[str, Path]) -> None:
    document = diff_json("--baseline", exports["baseline"], "--current", exports["current"])
    assert list(document) == ["method", "level", "baseline", "current", "worse", "better", "appeared", "vanished",
                              "servers", "tools", "slower", "slow_servers", "slow_tools"]
    assert document["method"] == "fisher-exact-two-sided" and document["level"] == 0.05
    assert document["baseline"] == {"inputs": [str(exports["baseline"])], "rows_read": 462, "rows_rejected": 0}
    row = document["servers"][0]
    assert list(row) == ["server", "presence", "baseline", "current", "change", "p_value", "decision"]
    assert list(row["baseline"]) == ["calls", "ok", "failed", "cancelled", "failure_rate", "interval"]
    assert list(document["tools"][0])[:2] == ["server", "tool"]


def test_several_inputs_a_side(exports: dict[str, Path]) -> None:
    document = diff_json("--baseline", exports["baseline"], exports["stable-only"], "--current", exports["current"])
    assert document["baseline"]["inputs"] == [str(exports["baseline"]), str(exports["stable-only"])]
    stable = next(row for row in document["servers"] if row["server"] == "stable")
    assert stable["baseline"]["ok"] == 380


def test_the_text_table_names_each_result(exports: dict[str, Path]) -> None:
    result = diff("--baseline", exports["baseline"], "--current", exports["current"])
    assert result.exit_code == 0, failure_text(result)
    lines = result.stdout.splitlines()
    assert "1 significantly worse" in lines[1]
    worsening = next(line for line in lines if line.startswith("worsening "))
    assert worsening.endswith("worse") and "+20.0 pts" in worsening


@pytest.mark.parametrize(("language", "words"), [
    ("en", ["1 server is significantly worse.", "**significantly worse**", "appeared", "vanished", "unchanged"]),
    ("de", ["1 Server ist signifikant schlechter.", "**signifikant schlechter**", "neu hinzugekommen",
            "weggefallen", "+20 Prozentpunkte"]),
])
def test_markdown_in_the_first_language(exports: dict[str, Path], tmp_path: Path, language: str,
                                        words: list[str]) -> None:
    out = tmp_path / "diff.md"
    result = diff("--baseline", exports["baseline"], "--current", exports["current"], "--markdown", out,
                  "--lang", f"{language},en", "--format", "markdown")
    assert result.exit_code == 0, failure_text(result)
    text = out.read_text(encoding="utf-8")
    assert text == result.stdout
    for word in words:
        assert word in text


@pytest.mark.slow
@pytest.mark.parametrize(("sides", "flag", "code"), [
    (("baseline", "current"), "--fail-on-worse", 1),
    (("baseline", "current"), None, 0),
    (("stable-only", "stable-only"), "--fail-on-worse", 0),
    (("current", "baseline"), "--fail-on-worse", 0),  # the reverse is better, never worse
], ids=["worse-fails", "worse-without-the-flag", "stable-passes", "better-passes"])
def test_exit_codes_as_a_real_command(exports: dict[str, Path], sides: tuple[str, str], flag: str | None,
                                      code: int) -> None:
    completed = run_cli("diff", "--baseline", exports[sides[0]], "--current", exports[sides[1]],
                        *([flag] if flag else []))
    assert completed.returncode == code, completed.stderr


@pytest.mark.parametrize("arguments", [
    ["--baseline", "{baseline}"],
    ["--current", "{current}"],
    ["--baseline", "--current", "{current}"],
    ["--baseline", "-", "--current", "-"],
    ["--baseline", "{baseline}", "--current", "{current}", "--format", "xml"],
    ["--baseline", "missing.jsonl", "--current", "{current}"],
], ids=["no-current", "no-baseline", "empty-baseline", "stdin-twice", "bad-format", "missing-input"])
def test_usage_errors_exit_2(exports: dict[str, Path], arguments: list[str]) -> None:
    completed = run_cli("diff", *[argument.format(**{k: str(v) for k, v in exports.items()}) for argument in arguments])
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr


def stats(server: str, ok: int, failed: int, tools: dict[str, tuple[int, int]] | None = None) -> ServerStats:
    made = ServerStats(server, server, OutcomeCounts(ok, failed))
    for name, (tool_ok, tool_failed) in (tools or {}).items():
        made.tools[name] = ToolStats(name, OutcomeCounts(tool_ok, tool_failed))
    return made


def test_diff_exports_on_constructed_figures() -> None:
    baseline = {"a": stats("a", 195, 5, {"t1": (195, 5)}), "b": stats("b", 170, 30, {"t2": (170, 30)})}
    current = {"a": stats("a", 170, 30, {"t1": (170, 30)}), "b": stats("b", 195, 5, {"t3": (195, 5)})}
    result = diff_exports(baseline, current)
    decisions = {row.server: row.decision for row in result.servers}
    assert decisions == {"a": Decision.WORSE, "b": Decision.BETTER}
    assert result.worse_servers == ["a"]
    presence = {row.tool: row.presence for row in result.tools}
    assert presence == {"t1": Presence.BOTH, "t2": Presence.VANISHED, "t3": Presence.APPEARED}


def test_a_side_with_only_cancelled_calls_is_unchanged() -> None:
    baseline = {"a": ServerStats("a", "a", OutcomeCounts(0, 0, 12))}
    current = {"a": stats("a", 10, 10)}
    row = diff_exports(baseline, current).servers[0]
    assert row.presence is Presence.BOTH and row.decision is Decision.UNCHANGED and row.change is None


def test_a_markdown_file_in_a_missing_folder_is_refused(exports: dict[str, Path], tmp_path: Path) -> None:
    result = diff("--baseline", exports["baseline"], "--current", exports["current"],
                  "--markdown", tmp_path / "missing" / "diff.md")
    assert result.exit_code == 2
    assert "missing" in result.stderr and result.stdout == ""


@pytest.mark.parametrize(("arguments", "spelled"), [
    (["--baseline", "a", "b", "--current", "c"], ["--baseline", "a", "--baseline", "b", "--current", "c"]),
    (["--baseline=a", "b", "--current", "c"], ["--baseline=a", "--baseline", "b", "--current", "c"]),
    (["--baseline", "-", "b", "--current", "c"], ["--baseline", "-", "--baseline", "b", "--current", "c"]),
    (["--baseline", "a", "--format", "json", "x"], ["--baseline", "a", "--format", "json", "x"]),
    (["--baseline", "a", "--", "-b"], ["--baseline", "a", "--", "-b"]),
], ids=["two-values", "equals-form", "stdin-then-file", "other-option-ends-the-list", "double-dash-ends-options"])
def test_inputs_after_an_option_are_spelled_out_each_with_it(arguments: list[str], spelled: list[str]) -> None:
    assert spelled_out(arguments, {"--baseline", "--current"}) == spelled


def test_the_equals_form_takes_every_following_input_too(exports: dict[str, Path]) -> None:
    document = diff_json(f"--baseline={exports['baseline']}", exports["stable-only"], "--current", exports["current"])
    assert document["baseline"]["inputs"] == [str(exports["baseline"]), str(exports["stable-only"])]
    assert document["current"]["inputs"] == [str(exports["current"])]


def test_standard_input_is_one_of_a_sides_inputs(exports: dict[str, Path]) -> None:
    with exports["current"].open("rb") as current:
        completed = run_cli("diff", "--baseline", exports["baseline"], "--current", "-", exports["stable-only"],
                            "--format", "json", stdin=current)
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)
    assert document["current"]["inputs"] == ["-", str(exports["stable-only"])]
    assert document["current"]["rows_read"] == document_rows(exports["current"]) + document_rows(exports["stable-only"])


def document_rows(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
