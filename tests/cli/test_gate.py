"""Gates: --fail-on and --fail-on-change on build and gate, one evaluation for the
printed lines, the exit code, summary.json, the JUnit file and the Markdown summary."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import xmlschema
from command_line import invoke, run_cli
from site_helpers import BASE_TIME, crafted_rows, failure_text, tool, write_jsonl

from nrllm_report.aggregate.changepoints import Change, Direction
from nrllm_report.aggregate.gate import Reason, evaluate_gate
from nrllm_report.aggregate.health import CurrentPeriod, ServerHealth
from nrllm_report.aggregate.verdicts import Proportion, wilson_interval
from nrllm_report.cli import main
from nrllm_report.core.model import LatencyVerdict, Problem, Rule, Verdict
from nrllm_report.core.options import GATE_VERDICTS, BuildOptions
from nrllm_report.pipeline import report_kit
from nrllm_report.reports.gate_report import GateReport, gate_markdown, junit_xml
from nrllm_report.site.markdown import MARKDOWN_LIMIT

JUNIT_XSD = Path(__file__).resolve().parents[1] / "data" / "junit.xsd"
LAST_DAY = date(2026, 9, 30)


def change(day: date, direction: Direction = Direction.WORSE, before: int = 2, after: int = 30) -> Change[date]:
    """A change from ``before`` to ``after`` failed calls of 100."""
    return Change(day=day, earliest=day - timedelta(days=1), latest=day, direction=direction,
                  before=Proportion(before, 100), after=Proportion(after, 100), probability=0.99)


def health(server: str, verdict: Verdict, changes: tuple[Change[date], ...] = (), ok: int = 90, failed: int = 10,
           budget: float = 0.05, last_day: date | None = LAST_DAY) -> ServerHealth:
    """A server whose whole data and current period are ``ok`` and ``failed`` calls."""
    failures = Proportion(failed, ok + failed)
    return ServerHealth(
        server=server, verdict=verdict, failure_budget=budget, failure_rate=failures.rate, interval=failures.interval,
        current=CurrentPeriod(changes[-1].day if changes else None, ok, failed),
        changes=changes, cancellation_changes=(), cancelled_share=0.0, failure_rate_if_cancels_failed=failures.rate,
        legacy_days=(), last_day=last_day,
    )


SERVERS = [
    health("steady", Verdict.RELIABLE, ok=100, failed=0),
    health("broken", Verdict.DOWN, ok=0, failed=20),
    health("shaky", Verdict.FLAKY, ok=80, failed=20),
    health("unsure", Verdict.UNCERTAIN, ok=95, failed=5),
    health("quiet", Verdict.TOO_FEW_CALLS, ok=1, failed=1),
]


# ---------------------------------------------------------------- the evaluation


def test_the_gate_verdicts_are_verdicts() -> None:
    assert set(GATE_VERDICTS) <= {verdict.value for verdict in Verdict} | {LatencyVerdict.SLOW.value}


def test_without_options_the_gate_passes() -> None:
    result = evaluate_gate(SERVERS)
    assert result.passed and result.failures == ()
    assert result.to_json() == {"passed": True, "failures": []}
    assert [server.server for server in result.servers] == ["broken", "shaky", "unsure", "quiet", "steady"]


@pytest.mark.parametrize(("fail_on", "failing"), [
    (("down",), ["broken"]),
    (("flaky",), ["shaky"]),
    (("down", "flaky"), ["broken", "shaky"]),
    (("down", "flaky", "uncertain"), ["broken", "shaky", "unsure"]),
], ids=["down", "flaky", "down-flaky", "all-three"])
def test_a_listed_verdict_fails_the_gate(fail_on: tuple[str, ...], failing: list[str]) -> None:
    result = evaluate_gate(SERVERS, fail_on=fail_on)
    assert [failure.server for failure in result.failures] == failing
    assert all(failure.reason is Reason.VERDICT and failure.change_day is None for failure in result.failures)
    assert not result.passed


def test_a_verdict_failure_carries_the_current_rate_interval_and_budget() -> None:
    failure = evaluate_gate([health("shaky", Verdict.FLAKY, ok=80, failed=20, budget=0.01)],
                            fail_on=["flaky"]).failures[0]
    assert failure.to_json() == {"server": "shaky", "reason": "verdict", "verdict": "flaky", "failure_rate": 0.2,
                                 "interval": list(wilson_interval(20, 100)), "failure_budget": 0.01, "change_day": None}


@pytest.mark.parametrize(("days_before_last", "window", "fails"), [
    (0, 7, True), (6, 7, True), (7, 7, False), (0, 1, True), (1, 1, False), (29, 30, True),
], ids=["last-day", "window-start", "day-before-window", "window-1-last-day", "window-1-day-before", "window-30"])
def test_a_worse_change_fails_within_the_last_days_of_the_data(days_before_last: int, window: int, fails: bool) -> None:
    server = health("stepper", Verdict.UNCERTAIN, (change(LAST_DAY - timedelta(days=days_before_last)),))
    result = evaluate_gate([server], fail_on=(), fail_on_change="worse", change_window=window)
    assert result.passed is not fails
    if fails:
        failure = result.failures[0]
        assert failure.reason is Reason.CHANGE
        assert failure.change_day == LAST_DAY - timedelta(days=days_before_last)
        assert (failure.failures.rate, failure.failures.interval) == (0.3, wilson_interval(30, 100))


def test_the_window_ends_on_the_last_day_of_the_whole_data() -> None:
    """A server quiet for the last week is judged against the data's last day, not its own."""
    quiet = health(
        "quiet", Verdict.UNCERTAIN, (change(LAST_DAY - timedelta(days=8)),), last_day=LAST_DAY - timedelta(days=8)
    )
    busy = health("busy", Verdict.RELIABLE, last_day=LAST_DAY)
    assert evaluate_gate([quiet, busy], fail_on=(), fail_on_change="worse", change_window=7).passed
    assert not evaluate_gate([quiet], fail_on=(), fail_on_change="worse",
                             change_window=7).passed  # alone, its own last day is the data's
    assert evaluate_gate([quiet], fail_on=(), fail_on_change="worse", change_window=7, last_day=LAST_DAY).passed


def test_a_better_change_never_fails_nor_does_a_change_without_the_option() -> None:
    better = health("mended", Verdict.RELIABLE, (change(LAST_DAY, Direction.BETTER, 30, 1),))
    worse = health("stepper", Verdict.UNCERTAIN, (change(LAST_DAY),))
    assert evaluate_gate([better], fail_on=(), fail_on_change="worse").passed
    assert evaluate_gate([worse], fail_on=("down",)).passed


def test_a_server_failing_for_both_is_one_failure_with_the_change_day() -> None:
    both = health("stepper", Verdict.FLAKY, (change(LAST_DAY - timedelta(days=2)),))
    result = evaluate_gate([both], fail_on=("flaky",), fail_on_change="worse")
    assert len(result.failures) == 1
    assert result.failures[0].reason is Reason.VERDICT
    assert result.failures[0].change_day == LAST_DAY - timedelta(days=2)


@pytest.mark.parametrize(("arguments", "message"), [
    ({"fail_on_change": "better"}, "--fail-on-change"),
    ({"change_window": 0}, "change window"),
    ({"fail_on": ("wobbly",)}, "wobbly"),
])
def test_the_evaluation_refuses_what_the_command_line_refuses(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evaluate_gate(SERVERS, **arguments)


# ---------------------------------------------------------------- JUnit


def report_of(result: Any, problems: tuple[Problem, ...] = ()) -> GateReport:
    return GateReport(result, 1000, len(problems), problems, 10)


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(JUNIT_XSD))


@pytest.mark.parametrize("servers", [
    SERVERS, [], [health("a|b<c>&\"d'", Verdict.FLAKY)], [health("a\x01\x1b[31mb\ufffe", Verdict.FLAKY)],
], ids=["five", "none", "markup-in-id", "controls-in-id"])
def test_the_junit_file_validates_against_the_xsd(schema: xmlschema.XMLSchema, servers: list[ServerHealth]) -> None:
    text = junit_xml(report_of(evaluate_gate(servers, fail_on=("down", "flaky"), fail_on_change="worse")))
    schema.validate(text)


def test_the_junit_file_has_one_testcase_per_server() -> None:
    text = junit_xml(report_of(evaluate_gate(SERVERS, fail_on=("down", "flaky"))))
    suites = ElementTree.fromstring(text).findall("testsuite")
    assert [suite.get("name") for suite in suites] == ["mcp-servers"]
    suite = suites[0]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "5",
        "2",
        "0",
        "1",
    )
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert set(cases) == {"steady", "broken", "shaky", "unsure", "quiet"}
    assert {case.get("classname") for case in cases.values()} == {"nrllm.servers"}
    failure = cases["shaky"].find("failure")
    assert failure is not None
    assert failure.get("message") == "shaky: verdict flaky, failure rate 20.0% (13.3%-28.9%), budget 5.0%"
    assert cases["quiet"].find("skipped") is not None and cases["quiet"].find("failure") is None
    assert cases["steady"].find("failure") is None and cases["steady"].find("skipped") is None
    properties = {prop.get("name"): prop.get("value") for prop in suite.find("properties")}
    assert properties["shaky.ok"] == "80" and properties["shaky.failed"] == "20"
    assert properties["gate.passed"] == "false" and properties["verdict.flaky"] == "1"


# ---------------------------------------------------------------- Markdown


def many_servers(count: int) -> list[ServerHealth]:
    name = "srv_|`*" + "x" * 300
    return [health(f"{name}{index}", Verdict.FLAKY, (change(LAST_DAY - timedelta(days=index % 5)),))
            for index in range(count)]


@pytest.mark.parametrize("language", ["en", "de"])
def test_markdown_stays_under_64_kb_whatever_the_data(language: str) -> None:
    problems = tuple(Problem("in|put`.jsonl" * 20, row, Rule.BAD_TYPE, "sequence must be an integer ≥ 0, got %(value)s",
                             (("value", "'|`" * 500),)) for row in range(3000))
    result = evaluate_gate(many_servers(3000), fail_on=("flaky",), fail_on_change="worse")
    text = gate_markdown(report_kit(BuildOptions(languages=(language,))), report_of(result, problems))
    assert len(text.encode("utf-8")) < MARKDOWN_LIMIT
    left_out = "more rows are not shown." if language == "en" else "weitere Zeilen werden nicht gezeigt."
    assert text.count(left_out) >= 3  # failures, servers, changes (and problems when room is left)
    assert text.startswith("## ❌")


def test_markdown_puts_the_gate_first_then_servers_changes_and_rejected_rows() -> None:
    result = evaluate_gate(SERVERS + [health("stepper", Verdict.UNCERTAIN, (change(LAST_DAY),))], fail_on=("down",),
                           fail_on_change="worse")
    problem = Problem("rows.jsonl", 14, Rule.FLAG_NOT_BOOLEAN, "toolIsError must be a boolean, got %(value)s",
                      (("value", "'false'"),))
    text = gate_markdown(report_kit(BuildOptions(languages=("de", "en"))), report_of(result, (problem,)))
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == ["## ❌ Prüfung nicht bestanden: 2 Server fallen durch", "### Server, der schlechteste zuerst",
                        "### Letzte Änderungen", "### Abgelehnte Zeilen"]
    assert "| broken | Urteil |" in text
    assert "flag-not-boolean" in text and "rows\\.jsonl" in text


# ---------------------------------------------------------------- the commands


def stepped_rows() -> list[dict[str, Any]]:
    """``stepper``: 20 days at 2 % then 10 days at 40 % failed, 50 calls a day; ``calm`` 0 % throughout."""
    rows = []
    for day in range(30):
        failed = 1 if day < 20 else 20
        for index in range(50):
            crdate = BASE_TIME + day * 86_400 + index * 60
            outcome = "failed" if index < failed else "ok"
            rows.append(tool(f"s-{day}-{index}", 0, "mcp_stepper_call", outcome == "failed", outcome, crdate=crdate))
            rows.append(tool(f"c-{day}-{index}", 0, "mcp_calm_call", False, "ok", crdate=crdate))
    return rows


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("gate")
    return {"crafted": write_jsonl(folder / "crafted.jsonl", crafted_rows()),
            "stepped": write_jsonl(folder / "stepped.jsonl", stepped_rows())}


def test_build_fails_the_gate_with_exit_1_writes_the_site_and_says_why(inputs: dict[str, Path], tmp_path: Path) -> None:
    out, junit, markdown = tmp_path / "site", tmp_path / "junit.xml", tmp_path / "summary.md"
    completed = run_cli("build", inputs["crafted"], "--out", out, "--min-calls", "5", "--fail-on", "down,flaky",
                        "--junit", junit, "--markdown", markdown, "--lang", "de,en")
    assert completed.returncode == 1, completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.startswith("gate failed: ")]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert (out / "en" / "index.html").is_file()
    failures = summary["gate"]["failures"]
    assert summary["gate"]["passed"] is False
    assert [failure["server"] for failure in failures] == [line.split()[2].rstrip(":") for line in lines]
    assert {failure["server"]: failure["verdict"] for failure in failures} == {"outage": "down", "bigflaky": "flaky"}
    assert all(failure["reason"] == "verdict" and failure["failure_budget"] == 0.05 for failure in failures)
    cases = ElementTree.parse(junit).getroot().find("testsuite")
    assert cases is not None and cases.get("failures") == "2"
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))
    assert markdown.read_text(encoding="utf-8").startswith("## ❌ Prüfung nicht bestanden: 2 Server fallen durch")


def test_build_passes_without_a_gate_option_and_summary_has_the_gate(inputs: dict[str, Path], tmp_path: Path) -> None:
    result = invoke("build", str(inputs["crafted"]), "--out", str(tmp_path / "site"), "--min-calls", "5")
    assert result.exit_code == 0, failure_text(result)
    summary = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))
    assert summary["gate"] == {"passed": True, "failures": []}


def test_strict_and_the_gate_both_apply(inputs: dict[str, Path], tmp_path: Path) -> None:
    strict_only = run_cli("gate", inputs["crafted"], "--strict")  # crafted has rejected rows
    assert strict_only.returncode == 1
    assert "gate failed" not in strict_only.stderr
    neither = run_cli("gate", inputs["crafted"], "--fail-on", "down", "--min-calls", "50")
    assert neither.returncode == 0, neither.stderr


@pytest.mark.slow
def test_gate_and_build_agree_on_a_worse_change(inputs: dict[str, Path], tmp_path: Path) -> None:
    gate = run_cli("gate", inputs["stepped"], "--fail-on-change", "worse", "--change-window", "14", "--format", "json")
    assert gate.returncode == 1, gate.stderr
    document = json.loads(gate.stdout)
    failures = document["gate"]["failures"]
    assert [failure["server"] for failure in failures] == ["stepper"]
    assert failures[0]["reason"] == "change"
    change_day = date.fromisoformat(failures[0]["change_day"])
    assert abs((change_day - date(2026, 9, 18)).days) <= 2  # BASE_TIME's day + 20
    build = run_cli("build", inputs["stepped"], "--out", tmp_path / "site", "--fail-on-change", "worse",
                    "--change-window", "14")
    assert build.returncode == 1
    assert json.loads((tmp_path / "site" / "summary.json").read_text())["gate"] == document["gate"]
    assert [line for line in build.stderr.splitlines() if line.startswith("gate failed")] == \
        [line for line in gate.stderr.splitlines() if line.startswith("gate failed")]
    short_window = run_cli("gate", inputs["stepped"], "--fail-on-change", "worse", "--change-window", "3")
    assert short_window.returncode == 0, short_window.stderr


def test_gate_prints_a_table(inputs: dict[str, Path]) -> None:
    result = invoke("gate", str(inputs["crafted"]), "--min-calls", "5", "--fail-on", "down")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "server",
        "verdict",
        "current",
        "rate",
        "interval",
        "budget",
        "latest",
        "change",
        "gate",
    ]
    down = next(line for line in lines if line.startswith("outage "))
    assert down.split()[1] == "down" and down.endswith("FAIL")
    assert lines[-1].startswith("Gate failed: 1 of ")
    assert result.stderr.strip().startswith("gate failed: outage: verdict down, failure rate 100.0%")


@pytest.mark.parametrize("arguments", [
    ["--fail-on", "wobbly"], ["--fail-on", "reliable"], ["--fail-on-change", "better"], ["--change-window", "0"],
    ["--format", "xml"],
], ids=["unknown-verdict", "reliable-not-allowed", "better", "window-0", "format"])
def test_gate_usage_errors_exit_2(arguments: list[str]) -> None:
    completed = run_cli("gate", *arguments)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr


def test_build_and_gate_share_their_option_definitions() -> None:
    build_options = {param.name: param for param in main.commands["build"].params}
    gate_options = {param.name: param for param in main.commands["gate"].params}
    # What only a build that writes a site has: its folder, the input cache it keeps (issue 12) and
    # whether its pages name who approved (issue 10); gate reads --archive (and --keep-days) as build
    # does, and never replaces the archive.
    assert set(build_options) - set(gate_options) == {"out", "force", "cache_dir", "no_cache", "show_approvers"}
    assert {"archive", "keep_days"} <= set(gate_options)
    assert set(gate_options) - set(build_options) == {"output_format"}
    for name in set(build_options) & set(gate_options):
        assert build_options[name].help == gate_options[name].help  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", ["build", "gate"])
def test_a_report_file_in_a_missing_folder_is_refused_before_any_work(tmp_path: Path, command: str) -> None:
    out = tmp_path / "site"
    arguments = [command, "--junit", str(tmp_path / "no-such-folder" / "junit.xml"), "--fail-on", "flaky"]
    result = invoke(*arguments + (["--out", str(out)] if command == "build" else []))
    assert result.exit_code == 2, failure_text(result)
    assert "no-such-folder" in result.stderr
    assert not out.exists()


def test_control_characters_in_an_id_reach_no_terminal(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "controls.jsonl", [
        tool("r1", 0, "mcp_a\x1b[31m\x01b_call", True, "failed", crdate=BASE_TIME)])
    junit = tmp_path / "junit.xml"
    result = invoke("gate", str(source), "--min-calls", "1", "--fail-on", "down", "--junit", str(junit))
    assert result.exit_code == 1, failure_text(result)
    assert "\x1b" not in result.stdout + result.stderr and "\x01" not in result.stdout + result.stderr
    assert "gate failed: a\\x1b[31m\\x01b: verdict down" in result.stderr
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))


@pytest.mark.slow
def test_gate_reads_the_archive_as_build_does_and_never_replaces_it(inputs: dict[str, Path], tmp_path: Path) -> None:
    archive = tmp_path / "history.parquet"
    gate_options = ["--fail-on-change", "worse", "--change-window", "14"]
    built = run_cli("build", inputs["stepped"], "--out", tmp_path / "site", "--archive", archive, *gate_options)
    assert built.returncode == 1, built.stderr
    kept = archive.read_bytes()
    summary = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))
    alone = run_cli("gate", "--archive", archive, *gate_options, "--format", "json")
    assert alone.returncode == 1, alone.stderr
    assert json.loads(alone.stdout)["gate"] == summary["gate"] and summary["gate"]["failures"]
    again = run_cli("gate", inputs["stepped"], "--archive", archive, *gate_options, "--format", "json")
    assert json.loads(again.stdout)["gate"] == summary["gate"]
    assert archive.read_bytes() == kept
    missing = run_cli("gate", "--archive", tmp_path / "no-such-folder" / "history.parquet")
    assert missing.returncode == 2
