"""Helpers for the site tests: build a site, read its pages as a person sees them, and an oracle.

The oracle computes the figures a site must show from the raw rows with plain
``json`` and the ADR-191 rule (legacy ``true`` is failed, ``false`` is ok, else
``toolOutcome``), independently of the product's normalize and aggregate code.
"""

from __future__ import annotations

import json
import math
import re
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import Result
from command_line import invoke
from markup import Node, norm, parse_html

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data" / "runs.jsonl"
SAMPLE_SERVERS = [
    line.strip() for line in (REPO / "sample_data" / "servers.txt").read_text().splitlines() if line.strip()
]
OUTCOMES = ("ok", "failed", "cancelled")
# The sample's other tables (issue 20), read with its events when a command is given no INPUT.
SAMPLE_TABLES = sorted(SAMPLE.parent.glob("tx_nrllm_*.jsonl"))


def sample_table_rows() -> int:
    """The rows of the sample's other tables: what a build without INPUT reads beside the events."""
    return sum(1 for path in SAMPLE_TABLES for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def sample_rows_read() -> int:
    return len(read_jsonl(SAMPLE)) + sample_table_rows()


def build(*args: Any) -> Result:
    """``nrllm-report build ARGS`` in-process; stdout and stderr kept apart."""
    return invoke("build", *args)


def build_ok(*args: Any) -> Result:
    result = build(*args)
    assert result.exit_code == 0, failure_text(result)
    return result


def failure_text(result: Result) -> str:
    """What a failed in-process command printed, and its traceback if it raised."""
    text = result.output
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        text += "".join(traceback.format_exception(*result.exc_info))
    return text


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def site_files(root: Path) -> dict[str, bytes]:
    """Every file of a site by its path relative to the site root."""
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def html_pages(root: Path) -> list[Path]:
    return sorted(root.rglob("*.html"))


def page(path: Path) -> Node:
    """A page of a built site, parsed as a browser parses it."""
    return parse_html(path.read_text(encoding="utf-8"))


def table_rows(document: Node, table_class: str) -> list[Node]:
    """The body rows of the table with ``table_class``."""
    return document.find("table", table_class).find("tbody").find_all("tr")


def cells(row: Node) -> list[str]:
    return [cell.text() for cell in row.children if isinstance(cell, Node) and cell.tag in ("td", "th")]


def number(text: str, language: str = "en") -> int:
    """An integer as a page of ``language`` writes it."""
    separator = "," if language == "en" else "."
    return int(norm(text).replace(separator, "").replace(" ", ""))


def visible_text(node: Node, language: str, skip_tags: Sequence[str] = ("code", "style", "script")) -> str:
    """The text a reader of a ``language`` page sees as UI: without data in <code>, nor links
    marked as another language (the language switch names its language in that language)."""
    parts: list[str] = []

    def walk(current: Node) -> None:
        if current.tag in skip_tags:
            return
        if current.attrs.get("lang") not in (None, language) and current.tag != "html":
            return
        for name in ("title", "aria-label", "alt", "placeholder"):
            if name in current.attrs and current.tag not in ("meta",):
                parts.append(current.attrs[name])
        for child in current.children:
            if isinstance(child, str):
                parts.append(child)
            else:
                walk(child)

    walk(node)
    return norm(" ".join(parts))


def hrefs(document: Node) -> list[str]:
    """Every href and src value of a page."""
    return [node.attrs[name] for node in document.iter() for name in ("href", "src") if name in node.attrs]


def is_external(link: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link)) or link.startswith("//")


# ---------------------------------------------------------------- the oracle


def payload_of(row: dict[str, Any]) -> dict[str, Any]:
    payload = row.get("payload")
    if isinstance(payload, str):
        payload = json.loads(payload)
    return payload if isinstance(payload, dict) else {}


def flat(row: dict[str, Any], key: str) -> Any:
    """A payload key, or the flattened top-level column of the same name."""
    value = payload_of(row).get(key)
    return row.get(key) if value is None else value


def outcome_of(row: dict[str, Any]) -> str | None:
    """ADR-191 decision 5: the flag says whether, the outcome which; legacy rows by the flag."""
    flag = flat(row, "toolIsError")
    if flag is None:
        return None
    stated = flat(row, "toolOutcome")
    if stated is None:
        return "failed" if flag else "ok"
    return str(stated)


def oracle_valid(row: dict[str, Any]) -> bool:
    """The few invariants the crafted bad rows break; every sample row passes them."""
    if row.get("run") in (None, "") or not isinstance(row.get("sequence"), int) or not row.get("kind"):
        return False
    flag, stated = flat(row, "toolIsError"), flat(row, "toolOutcome")
    if flag is not None and not isinstance(flag, bool):
        return False
    if stated is not None and (stated not in OUTCOMES or flag is None or (stated != "ok") != flag):
        return False
    return True


def server_of(tool_name: str | None, known: Sequence[str] = ()) -> str | None:
    if not tool_name or not tool_name.startswith("mcp_"):
        return None
    rest = tool_name[4:]
    for server in sorted(known, key=len, reverse=True):
        if rest.startswith(server + "_"):
            return server
    head, _, tail = rest.partition("_")
    return head if head and tail else None


@dataclass
class RunFacts:
    run: str
    start: int | None = None
    steps: int = 0
    tool_calls: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))  # failed: not denied
    sequences: list[int] = field(default_factory=list)
    denied: int = 0


@dataclass
class Oracle:
    rows_read: int
    rows_rejected: int
    runs: dict[str, RunFacts]
    outcomes: dict[str, int]  # failed: those not denied
    servers: dict[str, dict[str, int]]
    denied: int = 0

    def newest_first(self) -> list[str]:
        starts = [facts.start for facts in self.runs.values()]
        assert len(set(starts)) == len(starts), "the oracle does not order runs with equal starts"
        return [facts.run for facts in sorted(self.runs.values(), key=lambda facts: -(facts.start or 0))]

    def summary(self, languages: Sequence[str] = ("en", "de")) -> dict[str, Any]:
        """summary.json's counts; ``denied`` only where the rows hold a denial, as the site says it."""
        told = self.denied > 0
        summary = {
            "rows_read": self.rows_read,
            "rows_rendered": self.rows_read - self.rows_rejected,
            "rows_rejected": self.rows_rejected,
            "runs": len(self.runs),
            "outcomes": dict(self.outcomes),
            "denied": self.denied,
            "servers": {
                server: {**{key: value for key, value in counts.items() if told or key != "denied"},
                         "failure_rate": failure_rate(counts["ok"], counts["failed"])}
                for server, counts in sorted(self.servers.items())
            },
            "languages": list(languages),
        }
        if not told:
            del summary["denied"]
        return summary


def failure_rate(ok: int, failed: int) -> float | None:
    return failed / (ok + failed) if ok + failed else None


def oracle(rows: Sequence[dict[str, Any]], known_servers: Sequence[str] = ()) -> Oracle:
    """What the site must say about ``rows``, computed from the rows alone."""
    runs: dict[str, RunFacts] = {}
    outcomes = dict.fromkeys(OUTCOMES, 0)
    servers: dict[str, dict[str, int]] = {}
    valid = [row for row in rows if oracle_valid(row)]
    denied = operator_denied(valid)
    denied_total = 0
    for row in valid:
        run = str(row["run"])
        facts = runs.setdefault(run, RunFacts(run))
        facts.steps += 1
        facts.sequences.append(row["sequence"])
        if row.get("crdate") is not None:
            facts.start = row["crdate"] if facts.start is None else min(facts.start, row["crdate"])
        if row["kind"] != "tool":
            continue
        facts.tool_calls += 1
        outcome = outcome_of(row)
        server = server_of(flat(row, "toolName"), known_servers)
        if server is not None:
            servers.setdefault(server, {**dict.fromkeys(OUTCOMES, 0), "failed_in_0ms": 0, "denied": 0})
        if outcome is None:
            continue
        if (run, row["sequence"]) in denied:  # failed, but the operator's denial: counted apart
            facts.denied += 1
            denied_total += 1
            if server is not None:
                servers[server]["denied"] += 1
            continue
        facts.counts[outcome] += 1
        outcomes[outcome] += 1
        if server is not None:
            servers[server][outcome] += 1
            # a failed call that took 0 ms: what nr-llm records for a call it refused itself
            duration = float(row.get("duration_ms", row.get("durationMs")) or 0)
            servers[server]["failed_in_0ms"] += outcome == "failed" and duration == 0
    return Oracle(len(rows), len(rows) - len(valid), runs, outcomes, servers, denied_total)


def operator_denied(rows: Sequence[dict[str, Any]]) -> set[tuple[str, int]]:
    """(run, sequence) of each failed 0 ms tool step right after an approval with approved: false."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_run.setdefault(str(row["run"]), []).append(row)
    denied = set()
    for run, steps in by_run.items():
        steps.sort(key=lambda row: row["sequence"])
        for before, row in zip(steps, steps[1:]):
            duration = float(row.get("duration_ms", row.get("durationMs")) or 0)
            if (before["kind"] == "approval" and payload_of(before).get("approved") is False
                    and row["kind"] == "tool" and outcome_of(row) == "failed" and duration == 0):
                denied.add((run, row["sequence"]))
    return denied


def wilson(successes: int, trials: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval, written out from its textbook formula."""
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    denominator = 1 + z * z / trials
    return max(0.0, (centre - spread) / denominator), min(1.0, (centre + spread) / denominator)


# ---------------------------------------------------------------- crafted inputs

BASE_TIME = 1_788_000_000  # 2026-08-29 10:40:00 UTC


def tool(run: str | None, sequence: int, name: str, flag: bool | None, outcome: str | None = None,
         crdate: int | None = None, **extra: Any) -> dict[str, Any]:
    """A tool row; ``outcome=None`` writes a legacy row (flag only), ``flag=None`` no flag at all."""
    payload: dict[str, Any] = {"toolName": name}
    if flag is not None:
        payload["toolIsError"] = flag
    if outcome is not None:
        payload["toolOutcome"] = outcome
    return {"uid": 0, "run": run, "sequence": sequence, "kind": "tool", "round": 1, "duration_ms": 100.0,
            "payload": payload, "crdate": crdate, **extra}


def step(run: str, sequence: int, kind: str = "llm", crdate: int | None = None, **extra: Any) -> dict[str, Any]:
    return {"uid": 0, "run": run, "sequence": sequence, "kind": kind, "round": 1, "duration_ms": 0.0,
            "payload": {}, "crdate": crdate, **extra}


def calls(run: str, start: int, name: str, outcomes: Sequence[str], legacy: bool = False) -> list[dict[str, Any]]:
    """A run made of one llm step and the calls of ``name`` with the given outcomes, a second apart."""
    rows = [step(run, 0, "llm", crdate=start)]
    for index, outcome in enumerate(outcomes, 1):
        flag = outcome != "ok"
        stated = None if legacy and outcome != "cancelled" else outcome
        rows.append(tool(run, index, name, flag, stated, crdate=start + index))
    return rows


def crafted_rows() -> list[dict[str, Any]]:
    """Servers with known figures, local tools, legacy rows, a flagless step and rejected rows.

    | server   | ok | failed | cancelled | with --min-calls 5 |
    | bigflaky | 80 | 20     | 0         | flaky, 20 %        |
    | tiny     | 2  | 1      | 0         | too few calls      |
    | steady   | 10 | 0      | 50        | healthy, 0 %       |
    | down     | 0  | 6      | 0         | failing            |
    | eighth   | 7  | 1      | 0         | flaky, 12.5 %      |
    | idle     | 0  | 0      | 3         | too few, rate null |
    """
    hour = 3600
    rows: list[dict[str, Any]] = []
    for block in range(10):  # bigflaky: 10 runs of 8 ok and 2 failed, half of them legacy rows
        outcomes = ["ok"] * 8 + ["failed"] * 2
        rows += calls(f"big-{block}", BASE_TIME + block * hour, "mcp_bigflaky_query", outcomes, legacy=block % 2 == 0)
    rows += calls("tiny-1", BASE_TIME + 11 * hour, "mcp_tiny_ping", ["ok", "failed", "ok"])
    rows += calls("steady-ok", BASE_TIME + 12 * hour, "mcp_steady_get", ["ok"] * 10, legacy=True)
    rows += calls("steady-cancelled", BASE_TIME + 13 * hour, "mcp_steady_get", ["cancelled"] * 50)
    rows += calls("outage-1", BASE_TIME + 14 * hour, "mcp_outage_call", ["failed"] * 6)
    rows += calls("eighth-1", BASE_TIME + 15 * hour, "mcp_eighth_fetch", ["ok"] * 7 + ["failed"])
    rows += calls("idle-1", BASE_TIME + 16 * hour, "mcp_idle_wait", ["cancelled"] * 3)
    mixed = "mixed-run"
    start = BASE_TIME + 17 * hour
    rows += [
        step(mixed, 0, "context", crdate=start),
        tool(mixed, 1, "kb_lookup", False, "ok", crdate=start + 1),
        tool(mixed, 2, "kb_lookup", True, "failed", crdate=start + 2),
        tool(mixed, 3, "current_time", True, "cancelled", crdate=start + 3),
        tool(mixed, 4, "kb_lookup", True, crdate=start + 4),  # legacy: failed
        tool(mixed, 5, "current_time", None, crdate=start + 5),  # no flag: no outcome, a warning
        step(mixed, 6, "llm", crdate=start + 6),
    ]
    rejected = [
        tool("bad-1", 0, "mcp_tiny_ping", "false", crdate=start),  # flag-not-boolean
        tool("bad-2", 0, "mcp_tiny_ping", False, "cancelled", crdate=start),  # flag-contradicts-outcome
        tool(None, 0, "mcp_tiny_ping", True, "failed", crdate=start),  # missing-field (no run)
    ]
    return rows[:40] + rejected + rows[40:]


CRAFTED_REJECTED = {  # row number in crafted.jsonl -> rule code
    41: "flag-not-boolean",
    42: "flag-contradicts-outcome",
    43: "missing-field",
}
