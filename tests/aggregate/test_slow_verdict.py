"""A reliable server (or tool) whose latency verdict is slow is shown slow: in summary.json, on the
servers index and the server page in both languages, worst
first between flaky and uncertain; a failure verdict keeps precedence, and the gates still read the
failure verdict for ``--fail-on flaky`` and the latency verdict for ``--fail-on slow``."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ElementTree
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from command_line import run_cli
from site_helpers import build_ok, cells, page, table_rows, write_jsonl

from nrllm_report.aggregate.verdicts import shown_verdict
from nrllm_report.core.model import LatencyVerdict, Verdict

START = date(2026, 9, 1)
DAYS = 14
CALLS_A_DAY = 30
SERVERS = ("prompt", "sluggish", "shaky")  # fast and reliable; reliable and slow; flaky and slow


def rows(seed: int = 7) -> list[dict[str, Any]]:
    """One call a run: a third of ``sluggish``'s and ``shaky``'s calls over the 10 s budget, a fifth
    of ``shaky``'s failed; ``prompt`` and ``sluggish`` never fail."""
    rng, result, uid = random.Random(seed), [], 0
    for day in range(DAYS):
        midnight = int((START + timedelta(days=day) - date(1970, 1, 1)).total_seconds())
        for call in range(CALLS_A_DAY):
            for server in SERVERS:
                uid += 1
                slow = server != "prompt" and call % 3 == 0
                outcome = "failed" if server == "shaky" and call % 5 == 1 else "ok"
                payload = {"toolName": f"mcp_{server}_find", "toolIsError": outcome != "ok", "toolOutcome": outcome}
                result.append({"uid": uid, "run": uid, "sequence": 0, "kind": "tool", "round": 1,
                               "duration_ms": round(rng.uniform(12_000, 18_000) if slow else rng.uniform(100, 900), 2),
                               "crdate": midnight + 3600 + call * 60, "payload": payload})
    return result


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("slow") / "runs.jsonl", rows())


@pytest.fixture(scope="module")
def site(export: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    build_ok(export, "--out", out, "--servers", ",".join(SERVERS), "--jobs", "1", "--lang", "en,de")
    return out


@pytest.mark.parametrize(("failure", "latency", "shown"), [
    (Verdict.RELIABLE, LatencyVerdict.SLOW, Verdict.SLOW),
    (Verdict.RELIABLE, LatencyVerdict.UNCERTAIN, Verdict.RELIABLE),
    (Verdict.RELIABLE, None, Verdict.RELIABLE),
    (Verdict.FLAKY, LatencyVerdict.SLOW, Verdict.FLAKY),
    (Verdict.DOWN, LatencyVerdict.SLOW, Verdict.DOWN),
    (Verdict.UNCERTAIN, LatencyVerdict.SLOW, Verdict.UNCERTAIN),
    (Verdict.TOO_FEW_CALLS, LatencyVerdict.SLOW, Verdict.TOO_FEW_CALLS),
], ids=["reliable-slow", "reliable-unsure", "no-calls-timed", "flaky-first", "down-first", "uncertain-first",
        "too-few-first"])
def test_only_a_reliable_server_is_shown_slow(failure: Verdict, latency: LatencyVerdict | None,
                                              shown: Verdict) -> None:
    assert shown_verdict(failure, latency) is shown


@pytest.mark.slow
def test_summary_json_says_slow_where_the_server_is_reliable_and_slow(site: Path) -> None:
    servers = json.loads((site / "summary.json").read_text(encoding="utf-8"))["servers"]
    assert {name: servers[name]["verdict"] for name in SERVERS} == {
        "prompt": "reliable", "sluggish": "slow", "shaky": "flaky"}
    assert {name: servers[name]["latency"]["verdict"] for name in SERVERS} == {
        "prompt": "within-budget", "sluggish": "slow", "shaky": "slow"}
    assert servers["sluggish"]["current"]["failed"] == 0  # slow for its latency alone
    tools = {name: servers[name]["tools"][f"mcp_{name}_find"]["verdict"] for name in SERVERS}
    assert tools == {"prompt": "reliable", "sluggish": "slow", "shaky": "flaky"}


@pytest.mark.parametrize(("language", "slow", "flaky"), [("en", "slow", "flaky"), ("de", "langsam", "unzuverlässig")])
def test_the_servers_index_and_page_show_slow_worst_first(site: Path, language: str, slow: str, flaky: str) -> None:
    index = page(site / language / "servers" / "index.html")
    listed = [cells(row) for row in table_rows(index, "servers")]
    assert [row[0] for row in listed] == ["shaky", "sluggish", "prompt"]  # flaky, slow, reliable
    assert slow in listed[1][1] and flaky in listed[0][1]
    html = (site / language / "servers" / "sluggish.html").read_text(encoding="utf-8")
    head = html[:html.index('id="latency"')]
    assert f'verdict-slow">{slow}<' in head  # the server's own verdict, above its latency section
    tools = html[html.index('id="tools"'):]
    assert f'verdict-slow">{slow}<' in tools


@pytest.mark.slow
def test_the_failure_gate_ignores_the_shown_slow_and_the_slow_gate_reads_the_latency(export: Path,
                                                                                   tmp_path: Path) -> None:
    flaky = run_cli("gate", export, "--servers", ",".join(SERVERS), "--fail-on", "flaky,uncertain",
                    "--format", "json")
    assert flaky.returncode == 1, flaky.stderr
    assert [failure["server"] for failure in json.loads(flaky.stdout)["gate"]["failures"]] == ["shaky"]
    junit = tmp_path / "gate.xml"
    slow = run_cli("gate", export, "--servers", ",".join(SERVERS), "--fail-on", "slow", "--junit", junit)
    assert slow.returncode == 1, slow.stderr
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    failures = {case.get("name"): case.find("failure") for case in suite.iter("testcase")}
    assert {name for name, failure in failures.items() if failure is not None} == {"sluggish", "shaky"}
    assert "(verdict slow)" in failures["sluggish"].get("message", "")
    properties = {prop.get("name"): prop.get("value") for prop in suite.iter("property")}
    assert (properties["verdict.slow"], properties["verdict.flaky"], properties["verdict.reliable"]) == ("1", "1", "1")
