"""Latency through the build: a planted slowdown in summary.json and on the server page
(both languages), the slow gate as a real subprocess with its JUnit and Markdown, the figures'
record round trip, the histogram and the p50 / p90 per day against references computed here."""

from __future__ import annotations

import json
import math
import random
import xml.etree.ElementTree as ElementTree
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from command_line import run_cli
from safety_helpers import generator
from site_helpers import REPO, SAMPLE, SAMPLE_SERVERS, build_ok, page, read_jsonl, write_jsonl

from nrllm_report.aggregate.figures import SiteFigures
from nrllm_report.aggregate.latencies import (
    HISTOGRAM_BINS,
    bin_edges_ms,
    bin_of,
    daily_percentiles,
    histogram,
    server_latencies,
)
from nrllm_report.aggregate.latency import LatencySettings, timed_calls
from nrllm_report.aggregate.records import figures_from_record, figures_record

START = date(2026, 9, 1)
DAYS = 20
SLOWER_FROM = 10  # the planted slowdown's first day (0-based)
CALLS_A_DAY = 30
BUDGET_MS = 10_000


def planted_rows(seed: int = 23) -> list[dict[str, Any]]:
    """Two servers, one call per run: ``calm`` always fast; ``slowing`` fast until day 10, then a
    third of its calls over the 10 s latency budget (some near the 20 s timeout)."""
    rng, rows, uid = random.Random(seed), [], 0
    for day in range(DAYS):
        midnight = _epoch(START + timedelta(days=day))
        for call in range(CALLS_A_DAY):
            for server in ("calm", "slowing"):
                uid += 1
                slow = server == "slowing" and day >= SLOWER_FROM and call % 3 == 0
                duration = rng.uniform(12_000, 19_900) if slow else rng.uniform(100, 2_000)
                outcome = "failed" if call % 10 == 9 else "ok"
                payload = {"toolName": f"mcp_{server}_search", "toolIsError": outcome != "ok", "toolOutcome": outcome}
                rows.append({"uid": uid, "run": uid, "sequence": 0, "kind": "tool", "round": 1,
                             "duration_ms": round(duration, 2), "crdate": midnight + 3600 + call * 60,
                             "payload": payload})
    return rows


def _epoch(day: date) -> int:
    return int((day - date(1970, 1, 1)).total_seconds())


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("planted") / "runs.jsonl", planted_rows())


@pytest.fixture(scope="module")
def planted_site(planted: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    build_ok(planted, "--out", out, "--servers", "calm,slowing", "--jobs", "1")
    return out


def test_the_planted_slowdown_is_in_summary_json(planted_site: Path) -> None:
    summary = json.loads((planted_site / "summary.json").read_text(encoding="utf-8"))
    slowing = summary["servers"]["slowing"]["latency"]
    calm = summary["servers"]["calm"]["latency"]
    change_day = (START + timedelta(days=SLOWER_FROM)).isoformat()
    assert [change["direction"] for change in slowing["changes"]] == ["slower"]
    change = slowing["changes"][0]
    assert change["day"] == change_day and change["range"][0] <= change_day <= change["range"][1]
    assert change["probability"] >= 0.8
    current = (DAYS - SLOWER_FROM) * CALLS_A_DAY  # the current period: the days since the change
    assert slowing["calls"] == current and slowing["slow"] == current // 3
    assert slowing["verdict"] == "slow" and slowing["latency_budget_ms"] == BUDGET_MS
    assert slowing["p90_ms"] > BUDGET_MS and slowing["p90_interval_ms"][0] <= slowing["p90_ms"]
    assert calm["changes"] == [] and calm["slow"] == 0 and calm["verdict"] == "within-budget"
    assert calm["calls"] == DAYS * CALLS_A_DAY and calm["p99_ms"] < 2_000
    tool = summary["servers"]["slowing"]["tools"]["mcp_slowing_search"]["latency"]
    assert tool["calls"] == slowing["calls"] and tool["verdict"] == "slow"


@pytest.mark.parametrize(("language", "slower", "verdict"), [("en", "slower", "slow"), ("de", "langsamer", "langsam")])
def test_the_planted_slowdown_is_on_the_server_page(planted_site: Path, language: str, slower: str,
                                                    verdict: str) -> None:
    html = (planted_site / language / "servers" / "slowing.html").read_text(encoding="utf-8")
    assert 'id="latency"' in html and 'class="latency-histogram"' in html and 'class="latency-days"' in html
    latency_part = html[html.index('id="latency"'):html.index('id="tools"')]
    assert f">{slower}<" in latency_part and f'verdict-slow">{verdict}<' in latency_part
    assert "change-mark change-worse" in latency_part  # the change marked on the p50 / p90 per day
    calls = {"en": f"{CALLS_A_DAY} calls</title>", "de": f"{CALLS_A_DAY} Aufrufe</title>"}[language]
    assert latency_part.count(calls) == DAYS  # each day's hover, its calls counted in the page's language
    index = (planted_site / language / "servers" / "index.html").read_text(encoding="utf-8")
    assert f'verdict-slow">{verdict}<' in index and 'verdict-within-budget"' in index
    document = page(planted_site / language / "servers" / "slowing.html")
    assert document.find("table", "tool-latency") is not None


def test_the_slow_gate_fails_in_a_subprocess_with_junit_and_markdown(planted: Path, tmp_path: Path) -> None:
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    result = run_cli("gate", planted, "--servers", "calm,slowing", "--fail-on", "slow", "--junit", junit,
                     "--markdown", markdown)
    assert result.returncode == 1, result.stderr
    assert "gate failed: slowing: slow: slow share" in result.stderr and "calm" not in result.stderr
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failures = {case.get("name"): case.find("failure") for case in suite.iter("testcase")}
    assert failures["calm"] is None and failures["slowing"] is not None
    assert failures["slowing"].get("type") == "slow"
    properties = {prop.get("name"): prop.get("value") for prop in suite.iter("property")}
    assert properties["gate.fail_on"] == "slow"
    text = markdown.read_text(encoding="utf-8")
    assert "| slowing | slow |" in text and "Slow share" in text
    passing = run_cli("gate", planted, "--servers", "calm,slowing", "--fail-on", "down")
    assert passing.returncode == 0, passing.stderr


def test_a_slower_change_fails_the_change_gate(planted: Path, tmp_path: Path) -> None:
    markdown = tmp_path / "gate.md"
    result = run_cli("gate", planted, "--servers", "calm,slowing", "--fail-on-change", "slower",
                     "--change-window", "14", "--markdown", markdown, "--lang", "de")
    assert result.returncode == 1, result.stderr
    change_day = (START + timedelta(days=SLOWER_FROM)).isoformat()
    assert f"slowing: slower since {change_day}" in result.stderr
    assert "Änderung zu langsamer" in markdown.read_text(encoding="utf-8")
    narrow = run_cli("gate", planted, "--servers", "calm,slowing", "--fail-on-change", "slower",
                     "--change-window", "3")
    assert narrow.returncode == 0, narrow.stderr  # the change lies before the window


@pytest.fixture(scope="module")
def sample_summary(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("sample") / "site"
    build_ok("--out", out, "--jobs", "1")
    return json.loads((out / "summary.json").read_text(encoding="utf-8"))["servers"]


def junit_of(path: Path) -> tuple[dict[str, ElementTree.Element | None], dict[str, str]]:
    """Each testcase's failure (None: passed) and the suite's properties."""
    suite = ElementTree.parse(path).getroot().find("testsuite")
    assert suite is not None
    failures = {str(case.get("name")): case.find("failure") for case in suite.iter("testcase")}
    return failures, {str(prop.get("name")): str(prop.get("value")) for prop in suite.iter("property")}


def markdown_rows(text: str, heading: str) -> list[list[str]]:
    """The body rows of the table under ``heading``, cells unescaped."""
    section = text[text.index(heading):].split("\n\n")[1]
    lines = section.splitlines()[2:]
    return [[cell.strip().replace("\\", "") for cell in line.strip("|").split(" | ")] for line in lines]


def test_the_samples_slow_servers_fail_in_junit_and_markdown_with_their_figures(
    sample_summary: dict[str, Any], tmp_path: Path,
) -> None:
    slow = {name for name, server in sample_summary.items() if server["latency"]["verdict"] == "slow"}
    assert {"crm_eu_west", "jira_cloud"} <= slow  # as sample_data/README.md says
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    result = run_cli("gate", "--fail-on", "slow", "--junit", junit, "--markdown", markdown)
    assert result.returncode == 1, result.stderr
    failures, properties = junit_of(junit)
    assert {name for name, failure in failures.items() if failure is not None} == slow
    for name in slow:
        latency, failure = sample_summary[name]["latency"], failures[name]
        assert failure is not None and failure.get("type") == "slow"
        assert f"slow share {100 * latency['slow_rate']:.1f}%" in str(failure.get("message"))
        assert "latency verdict slow" in str(failure.text)
    for name, server in sample_summary.items():
        latency = server["latency"]
        assert properties[f"{name}.latency_verdict"] == latency["verdict"]
        assert float(properties[f"{name}.p90_ms"]) == latency["p90_ms"]
        assert float(properties[f"{name}.slow_rate"]) == latency["slow_rate"]
    text = markdown.read_text(encoding="utf-8")
    gate_rows = markdown_rows(text, "Gate failed")
    assert sorted((row[0], row[1]) for row in gate_rows) == sorted((name, "slow") for name in slow)
    labels = {"slow": "slow", "within-budget": "within budget", "uncertain": "uncertain",
              "too-few-calls": "too few calls"}
    server_rows = {row[0]: row for row in markdown_rows(text, "Servers, worst first")}
    assert set(server_rows) == set(sample_summary)
    for name, server in sample_summary.items():
        assert server_rows[name][5] == labels[server["latency"]["verdict"]]
        assert server_rows[name][7].startswith(f"{100 * server['latency']['slow_rate']:.1f}".rstrip("0").rstrip("."))


def test_the_samples_slower_change_fails_in_junit_and_markdown(sample_summary: dict[str, Any], tmp_path: Path) -> None:
    slower = {name: [change["day"] for change in server["latency"]["changes"] if change["direction"] == "slower"][-1]
              for name, server in sample_summary.items()
              if any(change["direction"] == "slower" for change in server["latency"]["changes"])}
    assert "crm_eu_west" in slower  # its slowdown from 2026-09-15
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    result = run_cli("gate", "--fail-on-change", "slower", "--change-window", "365", "--junit", junit,
                     "--markdown", markdown, "--lang", "de")
    assert result.returncode == 1, result.stderr
    failures, properties = junit_of(junit)
    assert properties["gate.fail_on_change"] == "slower"
    assert {name for name, failure in failures.items() if failure is not None} == set(slower)
    for name, day in slower.items():
        failure = failures[name]
        assert failure is not None and failure.get("type") == "slower"
        assert f"{name}: slower since {day}" in str(failure.get("message"))
    rows = {row[0]: row for row in markdown_rows(markdown.read_text(encoding="utf-8"), "Prüfung nicht bestanden")}
    assert set(rows) == set(slower) and {row[1] for row in rows.values()} == {"Änderung zu langsamer"}


def test_a_per_server_latency_budget_moves_the_verdict(planted: Path, tmp_path: Path) -> None:
    result = run_cli("gate", planted, "--servers", "calm,slowing", "--fail-on", "slow",
                     "--latency-budget", "slowing=25", "--format", "json")
    assert result.returncode == 0, result.stderr
    refused = run_cli("gate", planted, "--latency-budget", "0")
    assert refused.returncode == 2 and "--latency-budget" in refused.stderr


# ---------------------------------------------------------------- the parts, against references


def test_the_figures_record_keeps_the_latency_calls(planted: Path) -> None:
    figures = SiteFigures("UTC")
    figures.latency_calls = pa.table({
        "server": ["a", "a", "b"], "toolName": ["t", "u", ""], "day": [START, None, START + timedelta(days=1)],
        "durationMs": [1.5, 0.0, 20_000.0], "outcome": ["ok", "failed", None], "denied": [False, True, False],
    }, schema=SiteFigures("UTC").latency_calls.schema)
    again = figures_from_record(json.loads(json.dumps(figures_record(figures))))
    assert again.latency_calls.equals(figures.latency_calls)


def test_denied_calls_are_left_out_and_counted() -> None:
    calls = pa.table({"durationMs": [100.0, 200.0, 0.0, 300.0], "outcome": ["ok", "failed", "failed", "cancelled"],
                      "day": pa.array([START] * 4, pa.date32()), "denied": [False, True, False, False]})
    timed, left_out = timed_calls(calls.column("durationMs"), calls.column("outcome"), days=calls.column("day"),
                                  denied=calls.column("denied"))
    assert timed.column("durationMs").to_pylist() == [100.0]
    assert (left_out.denied, left_out.zero_ms, left_out.cancelled) == (1, 1, 1)


def test_the_histogram_bins_match_a_reference() -> None:
    rng = random.Random(5)
    durations = [rng.lognormvariate(7, 2) for _ in range(2000)] + [0.2, 1.0, 10.0 ** 7]
    counts = histogram(pa.array(durations, pa.float64()))
    reference = [0] * HISTOGRAM_BINS
    for value in durations:
        index = 0 if value < 1 else min(HISTOGRAM_BINS - 1, math.floor(math.log10(value) * 4))
        reference[index] += 1
    assert list(counts) == reference and sum(counts) == len(durations)
    for index in (0, 5, HISTOGRAM_BINS - 2):
        low, high = bin_edges_ms(index)
        assert bin_of(low * 1.0001) == index and bin_of(high * 0.9999) == index


def test_daily_percentiles_match_the_nearest_rank_per_day() -> None:
    rng = random.Random(9)
    rows = [(START + timedelta(days=rng.randrange(5)), float(rng.choice([3, 5, 5, 8, 13, 21, 400])))
            for _ in range(300)]
    timed = pa.table({"durationMs": [d for _, d in rows], "is_failed": [False] * len(rows),
                      "day": pa.array([day for day, _ in rows], pa.date32())})
    for figures in daily_percentiles(timed):
        values = sorted(d for day, d in rows if day == figures.day)
        assert figures.calls == len(values)
        assert figures.p50_ms == values[math.ceil(0.5 * len(values)) - 1]
        assert figures.p90_ms == values[math.ceil(0.9 * len(values)) - 1]


def test_tools_are_judged_against_their_servers_settings() -> None:
    calls = pa.table({
        "server": ["s"] * 40, "toolName": ["fast"] * 20 + ["slow"] * 20,
        "day": pa.array([START] * 40, pa.date32()), "durationMs": [10.0] * 20 + [3_000.0] * 20,
        "outcome": ["ok"] * 40, "denied": [False] * 40,
    })
    latencies = server_latencies(calls, lambda server: LatencySettings(latency_budget_ms=1_000))
    tools = latencies["s"].tools
    # 0 slow of 20: the interval still holds the 5 % budget, so uncertain, not within budget
    assert tools["slow"].verdict.value == "slow" and tools["fast"].verdict.value == "uncertain"
    assert latencies["s"].latency.slow.events == 20 and sum(latencies["s"].ok_bins) == 40


# ---------------------------------------------------------------- the sample's slowdown


def test_the_samples_slowdown_is_dated_and_counted_from_its_rows(tmp_path: Path) -> None:
    made = generator()
    out = tmp_path / "site"
    build_ok(SAMPLE, "--servers", ",".join(SAMPLE_SERVERS), "--out", out)
    latency = json.loads((out / "summary.json").read_text(encoding="utf-8"))["servers"][made.SLOWDOWN_SERVER]["latency"]
    start = datetime.fromtimestamp(made.SLOWDOWN_START, timezone.utc).date()
    slower = [change for change in latency["changes"] if change["direction"] == "slower"]
    assert slower and slower[-1]["range"][0] <= start.isoformat() <= slower[-1]["range"][1]
    since = date.fromisoformat(latency["changes"][-1]["day"])
    durations = []
    for row in read_jsonl(SAMPLE):
        payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
        stated = payload.get("toolOutcome") or ({True: "failed", False: "ok"}.get(payload.get("toolIsError")))
        day = datetime.fromtimestamp(int(row["crdate"]), timezone.utc).date()
        if (row["kind"] == "tool" and str(payload.get("toolName", "")).startswith(f"mcp_{made.SLOWDOWN_SERVER}_")
                and stated in ("ok", "failed") and float(row["duration_ms"]) > 0 and day >= since):
            durations.append(float(row["duration_ms"]))
    assert latency["calls"] == len(durations)  # a denied call took 0 ms: left out either way
    assert latency["slow"] == sum(duration > BUDGET_MS for duration in durations)
    assert latency["verdict"] == "slow"


# ---------------------------------------------------------------- diff


def test_diff_finds_the_slower_server(planted: Path, tmp_path: Path) -> None:
    rows = planted_rows()
    cut = _epoch(START + timedelta(days=SLOWER_FROM))
    baseline = write_jsonl(tmp_path / "baseline.jsonl", [row for row in rows if row["crdate"] < cut])
    current = write_jsonl(tmp_path / "current.jsonl", [row for row in rows if row["crdate"] >= cut])
    result = run_cli("diff", "--baseline", baseline, "--current", current, "--servers", "calm,slowing",
                     "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["slower"] == ["slowing"]
    rows_by_server = {row["server"]: row for row in document["slow_servers"]}
    slowing, calm = rows_by_server["slowing"], rows_by_server["calm"]
    assert slowing["decision"] == "slower" and slowing["p_value"] < 0.05
    assert slowing["baseline"]["slow"] == 0 and slowing["current"]["slow"] == (DAYS - SLOWER_FROM) * CALLS_A_DAY // 3
    assert calm["decision"] == "unchanged" and calm["current"]["slow"] == 0
    assert [row["tool"] for row in document["slow_tools"] if row["decision"] == "slower"] == ["mcp_slowing_search"]
    markdown = run_cli("diff", "--baseline", baseline, "--current", current, "--servers", "calm,slowing",
                       "--format", "markdown", "--lang", "de")
    assert "signifikant langsamer" in markdown.stdout


# ---------------------------------------------------------------- providers, from the telemetry


def test_the_providers_latency_is_counted_from_the_telemetry(tmp_path: Path) -> None:
    out = tmp_path / "site"
    telemetry = REPO / "sample_data" / "tx_nrllm_telemetry.jsonl"
    build_ok(SAMPLE, *sorted(SAMPLE.parent.glob("tx_nrllm_*.jsonl")), "--servers", ",".join(SAMPLE_SERVERS),
             "--out", out)
    providers = json.loads((out / "summary.json").read_text(encoding="utf-8"))["providers"]
    runs = {row["run"] for row in read_jsonl(SAMPLE)}
    expected: dict[str, list[float]] = {}
    for row in read_jsonl(telemetry):
        key = f"{row['served_provider'] or row['provider']}/{row['served_model'] or row['model']}"
        if row["correlation_id"] in runs and row["success"] is not None and (row["latency_ms"] or 0) > 0:
            expected.setdefault(key, []).append(float(row["latency_ms"]))
    assert {key: figures["latency"]["calls"] for key, figures in providers.items()} == {
        key: len(values) for key, values in expected.items()}
    for key, values in expected.items():
        ordered = sorted(values)
        assert providers[key]["latency"]["p50_ms"] == ordered[math.ceil(0.5 * len(ordered)) - 1] or \
            providers[key]["latency"]["changes"], key  # a change makes the current period shorter


def test_all_days_ok_and_failed_apart_match_the_definition() -> None:
    rng = random.Random(11)
    days = [START + timedelta(days=rng.randrange(8)) for _ in range(400)]
    durations = [float(rng.choice([50, 80, 120, 700, 3_000, 12_000])) for _ in days]
    outcomes = [rng.choice(["ok", "ok", "ok", "failed", "cancelled"]) for _ in days]
    calls = pa.table({"server": ["s"] * 400, "toolName": ["t"] * 400, "day": pa.array(days, pa.date32()),
                      "durationMs": durations, "outcome": outcomes, "denied": [False] * 400})
    figures = server_latencies(calls, lambda server: LatencySettings())["s"].latency
    for outcome, of in (("ok", figures.all_days_ok), ("failed", figures.all_days_failed)):
        values = sorted(d for d, o in zip(durations, outcomes) if o == outcome)
        assert of is not None and of.calls == len(values)
        assert of.p90.value_ms == values[math.ceil(0.9 * len(values)) - 1]
    assert figures.all_days.calls == sum(o != "cancelled" for o in outcomes)
    # the left-out counts are the current period's: all cancels when no change split the days
    assert figures.since is not None or figures.left_out.cancelled == outcomes.count("cancelled")
