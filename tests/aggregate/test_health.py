"""A server's health: its verdict on the current period, its changes, cancels and pre-ADR-191 days.

Unit tests on constructed daily series, then one build of rows with a known worse day,
a cancellation surge and a switch from pre-ADR-191 rows, read back from summary.json and
from the server pages in both languages.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from site_helpers import build_ok, calls, cells, page, table_rows, write_jsonl

from nrllm_report.aggregate.figures import OutcomeCounts, ServerStats
from nrllm_report.aggregate.health import recording_switch_day, server_health
from nrllm_report.core.model import Verdict

FIRST_DAY = date(2026, 9, 1)
DAY_SECONDS = 86_400
FIRST_SECOND = 1_788_220_800  # 2026-09-01 00:00:00 UTC


def stats_of(days: list[OutcomeCounts], legacy: int = 0) -> ServerStats:
    """A server whose day ``i`` (from FIRST_DAY) had ``days[i]``; its first ``legacy`` days pre-ADR-191."""
    stats = ServerStats("svc", "svc")
    for index, counts in enumerate(days):
        day = FIRST_DAY + timedelta(days=index)
        stats.days[day] = counts
        stats.counts.absorb(counts)
        if index < legacy:
            stats.legacy_days.add(day)
    return stats


def steady(days: int, ok: int, failed: int, cancelled: int = 0) -> list[OutcomeCounts]:
    return [OutcomeCounts(ok=ok, failed=failed, cancelled=cancelled) for _ in range(days)]


def test_a_clear_step_is_found_and_the_verdict_judges_only_the_days_since() -> None:
    health = server_health(stats_of(steady(14, 98, 2) + steady(14, 70, 30)), budget=0.05, min_calls=10)
    assert [change.direction for change in health.changes] == ["worse"]
    change = health.changes[0]
    assert change.day == FIRST_DAY + timedelta(days=14)
    assert change.earliest <= change.day <= change.latest
    assert change.probability >= 0.95 and not change.recording_changed
    assert health.current.since == change.day
    assert (health.current.ok, health.current.failed) == (14 * 70, 14 * 30)
    assert health.verdict is Verdict.FLAKY


def test_a_server_fixed_since_is_judged_on_its_good_days() -> None:
    health = server_health(stats_of(steady(14, 60, 40) + steady(14, 200, 0)), budget=0.05, min_calls=10)
    assert [change.direction for change in health.changes] == ["better"]
    assert health.verdict is Verdict.RELIABLE
    assert health.failure_rate is not None and health.failure_rate > 0.05  # the whole history would say flaky


def test_a_stationary_series_has_no_change_and_the_whole_data_is_the_current_period() -> None:
    health = server_health(stats_of(steady(30, 95, 5)), budget=0.05, min_calls=10)
    assert health.changes == () and health.cancellation_changes == ()
    assert health.current.since is None
    assert (health.current.ok, health.current.failed) == (30 * 95, 30 * 5)


def test_a_step_in_cancels_only_is_a_cancellation_change_and_leaves_the_failure_rate_alone() -> None:
    health = server_health(stats_of(steady(14, 99, 1, cancelled=1) + steady(14, 99, 1, cancelled=40)), budget=0.05,
                           min_calls=10)
    assert health.changes == ()
    assert [change.direction for change in health.cancellation_changes] == ["worse"]
    assert health.cancellation_changes[0].day == FIRST_DAY + timedelta(days=14)
    assert health.failure_rate == pytest.approx(0.01)
    with_outcome = 28 * 100 + 14 * 1 + 14 * 40
    assert health.cancelled_share == pytest.approx((14 * 1 + 14 * 40) / with_outcome)
    assert health.failure_rate_if_cancels_failed == pytest.approx((28 + 14 + 14 * 40) / with_outcome)


def test_a_step_at_the_switch_from_pre_adr_191_rows_is_labelled_a_recording_change() -> None:
    # Before the switch, cancels were written as failures: the rate drops on the day rows state outcomes.
    health = server_health(stats_of(steady(14, 80, 20) + steady(14, 80, 2, cancelled=18), legacy=14), budget=0.05,
                           min_calls=10)
    assert [change.direction for change in health.changes] == ["better"]
    assert health.changes[0].recording_changed
    assert health.legacy_days == tuple(FIRST_DAY + timedelta(days=index) for index in range(14))


def test_a_change_away_from_the_switch_is_not_a_recording_change() -> None:
    health = server_health(stats_of(steady(10, 98, 2) + steady(10, 98, 2) + steady(10, 60, 40), legacy=5), budget=0.05,
                           min_calls=10)
    assert [change.direction for change in health.changes] == ["worse"]
    assert not health.changes[0].recording_changed


def test_the_switch_day_is_the_first_day_after_the_last_pre_adr_191_day() -> None:
    days = [FIRST_DAY + timedelta(days=index) for index in range(6)]
    assert recording_switch_day(days, {days[0], days[2]}) == days[3]
    assert recording_switch_day(days, set()) is None
    assert recording_switch_day(days, {days[5]}) is None


def test_no_calls_give_no_interval_and_too_few_calls() -> None:
    health = server_health(stats_of(steady(3, 0, 0, cancelled=4)), budget=0.05, min_calls=10)
    assert health.verdict is Verdict.TOO_FEW_CALLS
    assert health.interval is None and health.current.failures.interval is None
    assert health.cancelled_share == 1.0


# ---------------------------------------------------------------- through a build


def day_runs(server: str, day: int, outcomes: list[str], legacy: bool = False) -> list[dict[str, Any]]:
    return calls(f"{server}-{day}", FIRST_SECOND + day * DAY_SECONDS + 3_600, f"mcp_{server}_call", outcomes, legacy)


def history() -> list[dict[str, Any]]:
    """21 days: "worsens" fails 2 % then 30 % from day 10 on; "surges" gets cancelled from day 12 on."""
    rows: list[dict[str, Any]] = []
    for day in range(21):
        rows += day_runs("worsens", day, ["ok"] * 49 + ["failed"] if day < 10 else ["ok"] * 35 + ["failed"] * 15)
        rows += day_runs("surges", day, ["ok"] * 50 + (["cancelled"] * 20 if day >= 12 else []))
    return rows


@pytest.fixture(scope="module")
def history_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("history")
    build_ok(write_jsonl(folder / "rows.jsonl", history()), "--out", folder / "site")
    return folder / "site"


@pytest.mark.slow
def test_summary_says_since_when_a_server_is_worse_and_that_cancels_surged(history_site: Path) -> None:
    servers = json.loads((history_site / "summary.json").read_text(encoding="utf-8"))["servers"]
    worsens, surges = servers["worsens"], servers["surges"]
    assert [(change["day"], change["direction"]) for change in worsens["changes"]] == [("2026-09-11", "worse")]
    assert worsens["current"]["since"] == "2026-09-11"
    assert (worsens["current"]["ok"], worsens["current"]["failed"]) == (11 * 35, 11 * 15)
    assert worsens["verdict"] == "flaky" and worsens["failure_budget"] == 0.05
    assert surges["changes"] == [] and surges["verdict"] == "reliable"
    assert [(change["day"], change["direction"]) for change in surges["cancellation_changes"]] == [
        ("2026-09-13", "worse")
    ]
    assert surges["legacy_days"] == [] and surges["failure_rate"] == 0.0


@pytest.mark.parametrize(
    ("language", "day", "worse_since", "verdict"),
    [
        ("en", "Sep 11, 2026", "worse since Sep 11, 2026", "flaky"),
        ("de", "11.09.2026", "schlechter seit 11.09.2026", "unzuverlässig"),
    ],
)
def test_the_servers_pages_say_it_in_both_languages(
    history_site: Path, language: str, day: str, worse_since: str, verdict: str
) -> None:
    rows = {cells(row)[0]: cells(row) for row in table_rows(page(history_site / language / "servers" / "index.html"),
                                                             "servers")}
    assert list(rows) == ["worsens", "surges"], "worst first"
    assert rows["worsens"][1] == verdict and rows["worsens"][5] == worse_since
    server_page = page(history_site / language / "servers" / "worsens.html")
    failure_changes = table_rows(server_page, "changes")
    assert [cells(row)[0] for row in failure_changes] == [day]
    assert server_page.find("rect", "current-period") is not None
    assert server_page.find("line", "change-worse") is not None


def test_a_failure_budget_per_server_changes_only_that_server(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "rows.jsonl", history())
    build_ok(source, "--out", tmp_path / "site", "--failure-budget", "0.5", "--failure-budget", "surges=0.001")
    servers = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))["servers"]
    assert servers["worsens"]["failure_budget"] == 0.5 and servers["worsens"]["verdict"] == "reliable"
    assert servers["surges"]["failure_budget"] == 0.001 and servers["surges"]["verdict"] == "uncertain"


@pytest.mark.parametrize("value", ["1.5", "-0.1", "abc", "=0.1", "github=", "nan"])
def test_a_failure_budget_that_is_no_rate_is_a_usage_error(tmp_path: Path, value: str) -> None:
    from site_helpers import build

    result = build("--out", tmp_path / "site", "--failure-budget", value)
    assert result.exit_code == 2
    assert "--failure-budget" in result.output and "not a rate" in result.output


@pytest.mark.slow
def test_the_sample_shows_a_dated_worse_server_and_a_cancellation_surge(tmp_path: Path) -> None:
    """The bundled sample: github worse from 2026-09-18, weather's cancels surging from 2026-09-22."""
    build_ok("--out", tmp_path / "site")
    servers = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))["servers"]
    github, weather = servers["github"], servers["weather"]
    assert [(change["day"], change["direction"]) for change in github["changes"]] == [("2026-09-18", "worse")]
    assert github["changes"][0]["earliest"] <= "2026-09-18" <= github["changes"][0]["latest"]
    assert github["current"]["since"] == "2026-09-18" and github["verdict"] == "flaky"
    assert weather["changes"] == []
    assert [(change["day"], change["direction"]) for change in weather["cancellation_changes"]] == [
        ("2026-09-22", "worse")
    ]


@pytest.mark.slow
def test_the_samples_github_cancellation_change_spans_the_switch_and_its_page_says_so(tmp_path: Path) -> None:
    """github's rows before 2026-09-06 could not state a cancel: its cancellation change whose range
    holds that day is labelled a change in how calls were recorded, in both languages."""
    build_ok("--out", tmp_path / "site")
    github = json.loads((tmp_path / "site" / "summary.json").read_text(encoding="utf-8"))["servers"]["github"]
    [change] = github["cancellation_changes"]
    assert change["earliest"] <= "2026-09-06" <= change["latest"] and change["recording_changed"] is True
    assert max(github["legacy_days"]) == "2026-09-05"
    labels = {
        "en": (
            "Changes of the cancellation rate",
            "a change in how calls were recorded, not necessarily in the server",
        ),
        "de": (
            "Änderungen der Abbruchquote",
            "eine Änderung in der Aufzeichnung der Aufrufe, nicht unbedingt im Server",
        ),
    }
    for language, (heading, label) in labels.items():
        page = (tmp_path / "site" / language / "servers" / "github.html").read_text(encoding="utf-8")
        assert page.count(label) == 1 and page.index(label) > page.index(heading), language
