"""The run index's filter data: plain script files a ``<script src>`` loads (issue 22).

The filter runs from ``file://`` under ``script-src 'self'``: no fetch of local files, no
eval. So the runs ship as scripts that hand their data to a registration function
(``nrllmFilter.index``, ``nrllmFilter.shard``) of ``assets/filter.js``. The shards hold
consecutive days (a day with very many runs is split by time), oldest in ``runs-000.js``,
so that a filter of a time range loads only the shards of its days; the index lists each
shard's first and last start with the servers, tools, statuses and configurations.

The data is the same in every language (the page formats it), and compact: a shard whose
runs are all named by a lower-case uuid (with their page named the same) carries their
16 bytes each in base64; starts are differences from the run before (newest first).
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from typing import Any

from ..aggregate.figures import RunSummary
from ..core.resources import resource_path
from ..core.tables import RUN_STATUSES
from . import urls
from .pages import SiteData

SHARD_RUNS = 5_000  # at most this many runs a shard (about 300 kB of script)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
NO_TIME = -1  # the shard of the runs without a time, if any, is loaded only without a time filter


def shards_of(summaries: Sequence[RunSummary], local_day: Callable[[int], date]) -> list[list[RunSummary]]:
    """The runs by shard, oldest shard first, each newest first; the runs without a time last."""
    timed = [summary for summary in summaries if summary.start is not None]
    shards: list[list[RunSummary]] = []
    current: list[RunSummary] = []
    current_day: date | None = None
    for summary in reversed(timed):  # oldest first
        assert summary.start is not None
        day = local_day(summary.start)
        if current and (len(current) >= SHARD_RUNS or (day != current_day and len(current) >= SHARD_RUNS // 2)):
            shards.append(current)
            current = []
        current.append(summary)
        current_day = day
    if current:
        shards.append(current)
    shards = [shard[::-1] for shard in shards]
    untimed = [summary for summary in summaries if summary.start is None]
    return shards + ([untimed] if untimed else [])


def _script(function: str, *arguments: Any) -> str:
    """A call of the registration function with JSON arguments (JSON is a JavaScript expression)."""
    text = ",".join(json.dumps(argument, ensure_ascii=False, separators=(",", ":")) for argument in arguments)
    return f"nrllmFilter.{function}({text});\n"


class Vocabulary:
    """The servers, tools, statuses, reasons and configurations of the site, each a list the
    shards index into."""

    def __init__(self, data: SiteData) -> None:
        self.servers = sorted({server for summary in data.summaries for server in summary.servers})
        self.tools = sorted({tool for summary in data.summaries for tool in summary.tools})
        rows = data.whole.rows if data.whole.runs_known else {}
        statuses = {row.status for row in rows.values() if row.status}
        order = {status: position for position, status in enumerate(RUN_STATUSES)}
        self.statuses = sorted(statuses, key=lambda status: (order.get(status, len(order)), status))
        self.reasons = sorted({row.termination_reason for row in rows.values() if row.termination_reason})
        self.configurations = sorted({row.configuration for row in rows.values() if row.configuration})
        self.position = {name: {value: index for index, value in enumerate(values)} for name, values in (
            ("servers", self.servers), ("tools", self.tools), ("statuses", self.statuses),
            ("reasons", self.reasons), ("configurations", self.configurations))}


def _ids(runs: Sequence[RunSummary]) -> dict[str, Any]:
    """The runs' ids and page names: base64 of the uuids where every one is a uuid named so."""
    if all(UUID.fullmatch(run.run) and run.slug == run.run for run in runs):
        packed = b"".join(uuid.UUID(run.run).bytes for run in runs)
        return {"u": base64.b64encode(packed).decode("ascii")}
    return {"r": [run.run for run in runs], "g": {str(index): run.slug for index, run in enumerate(runs)
                                                    if run.slug != run.run}}


def _duration(milliseconds: float) -> int:
    """As shown: tenths of a millisecond under ten seconds, else minus the tenths of a second."""
    if milliseconds < 10_000:
        return int(round(milliseconds * 10))
    return -int(round(milliseconds / 100))


def _sets(runs: Sequence[RunSummary], of: Callable[[RunSummary], tuple[str, ...]],
          *, position: dict[str, int]) -> tuple[list[list[int]], list[int]]:
    """The distinct sets of names the runs have (as positions), and each run's set."""
    found: dict[tuple[str, ...], int] = {}
    each = [found.setdefault(of(run), len(found)) for run in runs]
    return [[position[name] for name in names] for names in found], each


def shard_record(runs: Sequence[RunSummary], data: SiteData, *, words: Vocabulary) -> dict[str, Any]:
    """One shard's runs, column by column."""
    starts = [run.start for run in runs]
    record: dict[str, Any] = _ids(runs)
    if starts and starts[0] is not None:
        record["t"] = [starts[0]] + [earlier - later for earlier, later in zip(starts, starts[1:])]  # type: ignore[operator]
    record["d"] = [_duration(run.duration_ms) for run in runs]
    record["n"] = [run.steps for run in runs]
    record["c"] = [run.tool_calls for run in runs]
    record["k"] = [run.counts.ok for run in runs]
    record["f"] = [run.counts.failed for run in runs]
    record["x"] = [run.counts.cancelled for run in runs]
    record["S"], record["s"] = _sets(runs, lambda run: run.servers, position=words.position["servers"])
    record["T"], record["w"] = _sets(runs, lambda run: run.tools, position=words.position["tools"])
    if data.whole.runs_known:
        record.update(_run_row_columns(runs, data, words=words))
    return record


def _run_row_columns(runs: Sequence[RunSummary], data: SiteData, *, words: Vocabulary) -> dict[str, Any]:
    """Each run's (status, termination reason) pair as a position in the shard's pairs (``O``; -1
    for a run without a row, a position -1 in a pair for none), its configuration (-1 for none) and
    cost in millionths (as shown: at most six decimals; null for none)."""
    rows, statuses, reasons = data.whole.rows, words.position["statuses"], words.position["reasons"]
    pairs: dict[tuple[int, int], int] = {}
    pair: list[int] = []
    configuration: list[int] = []
    cost: list[int | None] = []
    for run in runs:
        row = rows.get(run.run)
        if row is None:
            pair.append(-1)
            configuration.append(-1)
            cost.append(None)
            continue
        key = (statuses.get(row.status or "", -1), reasons.get(row.termination_reason or "", -1))
        pair.append(pairs.setdefault(key, len(pairs)))
        configuration.append(words.position["configurations"].get(row.configuration or "", -1))
        header = data.header(run.run)
        cost.append(None if header is None or header.cost is None else int(round(header.cost * 1_000_000)))
    return {"O": [list(key) for key in pairs], "o": pair, "q": configuration, "m": cost}


def filter_files(data: SiteData, local_day: Callable[[int], date]) -> Iterator[tuple[str, str]]:
    """The filter's index and shards, as (path, text)."""
    words = Vocabulary(data)
    shards = shards_of(data.summaries, local_day)
    listed = []
    for number, runs in enumerate(shards):
        timed = runs[0].start is not None
        listed.append([urls.filter_shard(number).rsplit("/", 1)[1], runs[-1].start if timed else NO_TIME,
                       runs[0].start if timed else NO_TIME, len(runs)])
        yield urls.filter_shard(number), _script("shard", number, shard_record(runs, data, words=words))
    index = {"runs": len(data.summaries), "shards": listed[::-1], "servers": words.servers, "tools": words.tools,
             "runsKnown": data.whole.runs_known, "statuses": words.statuses, "reasons": words.reasons,
             "configurations": words.configurations}
    yield urls.FILTER_INDEX, _script("index", index)


def filter_script() -> str:
    """The filter's code (``templates/assets/filter.js``): the same for every site."""
    return (resource_path("templates") / "assets" / "filter.js").read_text(encoding="utf-8")
