"""The filter's shards: every run once, newest first, in shards of consecutive days."""

from __future__ import annotations

import time
from datetime import date, datetime, timezone

from nrllm_report.aggregate.figures import OutcomeCounts, RunSummary, newest_first
from nrllm_report.site import filter_data
from nrllm_report.site.filter_data import SHARD_RUNS, shard_record, shards_of
from nrllm_report.site.pages import SiteData

DAY = 86_400
FIRST = 1_788_220_800  # 2026-09-01 00:00 UTC


def utc_day(moment: int) -> date:
    return datetime.fromtimestamp(moment, timezone.utc).date()


def summaries(count: int, per_day: int, untimed: int = 0) -> list[RunSummary]:
    runs = [RunSummary(f"{number:08x}-0000-4000-8000-000000000000", f"{number:08x}-0000-4000-8000-000000000000",
                       FIRST + (number // per_day) * DAY + number % per_day, None, 1234.5, 5, 2,
                       OutcomeCounts(1, number % 3 == 0, number % 5 == 0), ("github",), ("mcp_github_search",))
            for number in range(count)]
    runs += [RunSummary(f"no-time-{number}", f"no-time-{number}", None, None, 0.0, 1, 0, OutcomeCounts(), (), ())
             for number in range(untimed)]
    return newest_first(runs)


def test_every_run_once_newest_first_and_no_day_split_below_the_limit() -> None:
    runs = summaries(20_000, per_day=1_500, untimed=3)
    shards = shards_of(runs, utc_day)
    assert [run for shard in reversed(shards[:-1]) for run in shard] + shards[-1] == runs
    assert [run.run for run in shards[-1]] == ["no-time-0", "no-time-1", "no-time-2"]
    for shard in shards[:-1]:
        assert len(shard) <= SHARD_RUNS
    days_of = [{utc_day(run.start) for run in shard if run.start is not None} for shard in shards[:-1]]
    for earlier, later in zip(days_of, days_of[1:]):
        assert not earlier & later, "a day of fewer runs than a shard holds is cut in two"


def test_a_day_of_more_runs_than_a_shard_holds_is_split_by_time() -> None:
    shards = shards_of(summaries(12_000, per_day=12_000), utc_day)
    assert [len(shard) for shard in shards] == [SHARD_RUNS, SHARD_RUNS, 12_000 - 2 * SHARD_RUNS]


def test_uuids_are_packed_and_other_ids_kept_with_their_page_names() -> None:
    data = SiteData(summaries(10, per_day=10), [], OutcomeCounts(), [], 0, 0, None, ("en",))
    words = filter_data.Vocabulary(data)
    record = shard_record(data.summaries, data, words=words)
    assert "u" in record and len(record["u"]) == 4 * -(-16 * 10 // 3) and "r" not in record
    other = SiteData([RunSummary("Run 7", "run-7-h0123", FIRST, None, 1.0, 1, 0, OutcomeCounts(), (), ())],
                     [], OutcomeCounts(), [], 0, 0, None, ("en",))
    assert shard_record(other.summaries, other, words=filter_data.Vocabulary(other))["g"] == {"0": "run-7-h0123"}


def test_the_shards_of_fifty_thousand_runs_take_well_under_a_second() -> None:
    data = SiteData(summaries(50_000, per_day=3_000), [], OutcomeCounts(), [], 0, 0, None, ("en",))
    began = time.perf_counter()
    files = list(filter_data.filter_files(data, utc_day))
    assert time.perf_counter() - began < 3.0  # about 0.2 s on a quiet machine; room for a busy one
    assert sum(len(text.encode()) for _path, text in files) < 50_000 * 60
