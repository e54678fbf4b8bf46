"""Generate a realistic, seeded nr-llm ``tx_nrllm_agentrun_event`` export of any size.

The same ``--runs`` and ``--seed`` always give the same rows, and byte-identical
``.jsonl`` / ``.jsonl.gz`` files. It makes the bundled sample (``sample_data/``)
and the benchmark input (50,000 runs, about a million rows)::

    python scripts/generate_export.py --runs 120 --seed 191 --cancel-every 5 --metadata-every 2 \\
        --out sample_data/runs.jsonl --tables

What the rows show on purpose:

* MCP tools ``mcp_<server>_<tool>`` on ``github``, ``jira_cloud``, ``docs-search``,
  ``weather`` and ``crm_eu_west`` (two server ids with ``_``), and local tools;
  ``jira_cloud`` is flaky, the other servers are healthy;
* one run in every 20 is cancelled by an operator while an MCP call is in flight,
  often on a healthy server;
* runs before 2026-09-06 UTC are written before ADR-191: ``toolIsError`` only, so
  their cancels read as failures; later rows carry ``toolOutcome`` as well;
* one run in every 28 has a tool step without ``toolIsError`` (a warning, still valid);
* an operator denies about 7 % of the approvals, and surely the first one asked from
  2026-09-29 (UTC) on (``DENIAL_START``); a denied call is recorded as nr-llm records it:
  a failed tool step of 0 ms that never reached the tool;
* pages fetched from the docs server come with an artifact (``toolArtifacts``);
* with ``--metadata-every N``, one run in every N is stored at nr-llm's default privacy
  level, "metadata": sizes and names instead of content (``RunStepPrivacyFilter``);
* ``github`` gets worse on a known day: from 2026-09-18 (UTC) on, 35 % of its calls fail
  (``INCIDENT_*``), a change the servers pages date;
* ``crm_eu_west`` gets slower on a known day: from 2026-09-15 (UTC) on, 40 % of its ok calls
  take 11 to 19 s (``SLOWDOWN_*``), over the default latency budget of 10 s, a change of the
  slow share the server page dates;
* ``weather`` sees a surge of cancels: from 2026-09-22 (UTC) on, an operator cuts off 30 %
  of the runs that call it there (``SURGE_*``), a cancellation change that is no failure.

With ``--tables`` (``write_export(..., tables=True)``, or ``write_tables`` alone) the other
tables nr-llm keeps go beside the events, named so that the tool knows them by file name:
``tx_nrllm_agentrun``, ``tx_nrllm_telemetry``, ``tx_nrllm_governance_event``,
``tx_nrllm_mcp_tool`` and ``tx_nrllm_mcp_server``, each with the events' suffix. They are
made from the runs the events were made of and from a stream of their own
(``Random(seed * 7919 + 20)``), so the events are the same bytes with or without them:

* one run row per run: cut off by an operator, ``cancelled``; the run whose last step is the
  export's latest, ``running`` (dumped before its settle); one run in every 20 ``failed``, the
  reasons taking turns (``provider_failed``, ``retries_exhausted``, ``not_retryable``, each
  with a failed provider call after the run's last step, and ``approval_denied``, with a
  guardrail's ``approval_required``); in every 40, the run whose failed MCP call a policy
  denied, ``failed``/``policy_denied`` with a ``tool_denied`` decision in that call's second;
  one in every 20 completed truncated (``max_iterations``, ``context_truncated`` on a run
  with a ``dropped`` step, ``budget_exhausted``); the rest ``completed``. An operator's Deny
  fails the call, not the run: that run stays completed. Every non-cancelled run's steps end
  with an answer, so a failed run's failure shows only in its row and its other tables;
* three run rows without steps, opened after the events were dumped: ``queued`` (started_at
  0), ``waiting_for_approval``, ``waiting_for_input``;
* totals as nr-llm writes them: a completed run's from its llm steps, 0 for the others;
* one provider call per llm step (its second, its duration), a fallback in one run of every
  25 (``served_*`` differ), the local model ``ollama`` unpriced (``actual_cost`` NULL), and in
  every 40 runs two calls of no run: one without a correlation id, one of a uuid no run has;
* guardrail decisions with metadata only (``pattern:credit_card``, never content);
* the MCP catalogue: the servers with a valid identifier (``^[a-z0-9_]{1,32}$``; not
  ``docs-search``, whose tools the catalogue therefore lacks), every MCP tool the runs call,
  and one orphaned tool no run calls.
"""

# No ``from __future__ import annotations``: the dataclasses then need the module in
# sys.modules, and a test loading this file with importlib would have to know that.
import argparse
import gzip
import io
import json
import re
import sys
import time
import uuid
from calendar import timegm
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any, TextIO

COLUMNS: tuple[str, ...] = (
    "uid", "run", "sequence", "kind", "round", "duration_ms", "payload", "crdate",
)
Row = tuple[int, str, int, str, int, float, str, int]

FIRST_UID = 1
START = timegm((2026, 8, 20, 0, 0, 0))
END = timegm((2026, 10, 1, 0, 0, 0))
ADR_191_DATE = timegm((2026, 9, 6, 0, 0, 0))
# Leaves room for a run's own steps so that its last row is still in September.
RUN_SPREAD = END - START - 4 * 3600
# One run in every CANCEL_BLOCK_RUNS is cancelled by an operator (5 %), and one in
# every FLAGLESS_BLOCK_RUNS has a tool step without toolIsError (about 0.5 % of tool steps).
CANCEL_BLOCK_RUNS = 20
# A server that gets worse on a known day, and one whose calls an operator starts cutting off.
INCIDENT_SERVER, INCIDENT_START, INCIDENT_RATE = "github", timegm((2026, 9, 18, 0, 0, 0)), 0.35
SURGE_SERVER, SURGE_START, SURGE_SHARE = "weather", timegm((2026, 9, 22, 0, 0, 0)), 0.30
# From this day on, 40 % of the server's ok calls take 11 to 19 s: over the 10 s latency budget,
# below the 20 s call timeout (issue 23). The same one draw per call as before: nothing else moves.
SLOWDOWN_SERVER, SLOWDOWN_START, SLOWDOWN_SHARE = "crm_eu_west", timegm((2026, 9, 15, 0, 0, 0)), 0.40
SLOWDOWN_MS = (11_000, 19_000)
FLAGLESS_BLOCK_RUNS = 28
# Chance alone may deny no approval in a small export: the first one asked from here on is denied.
DENIAL_START = timegm((2026, 9, 29, 0, 0, 0))
PARQUET_BATCH_ROWS = 65_536
JSONL_CHUNK_ROWS = 8_192

_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_dumps = _JSON.encode


# --- what tools exist ---------------------------------------------------------

Args = Callable[[Random], dict[str, Any]]
Result = Callable[[Random, dict[str, Any]], str]


@dataclass(frozen=True)
class Tool:
    """A tool as the agent sees it: its registered name, how its calls look, how it fails."""

    name: str
    server: str | None
    failure_rate: float
    arguments: Args
    result: Result
    writes: bool = False
    slow_ms: tuple[int, int] = (40, 1800)


REPOS = ("netresearch/t3x-nr-llm", "netresearch/t3x-nr-mcp", "acme/intranet-site")
JIRA_KEYS = ("SUP", "OPS", "WEB")
CITIES = ("Leipzig", "Berlin", "Hamburg", "Wien", "Zürich", "München")
TIMEZONES = ("Europe/Berlin", "Europe/Vienna", "UTC")
DOC_QUERIES = (
    "rate limit mcp server", "ADR-191 cancelled tool call", "Fluid escaping",
    "scheduler task timeout", "site configuration languages", "Caching framework tags",
)
# Page text as a docs server returns it: markup that a report must escape, never render.
PAGES = (
    "<h1>Decision</h1><p>A tool result states its outcome; the boolean stays.</p>",
    "Context: the transport raises its own exception for a cut-off call.",
    "<p>Use <code>f:format.raw</code> only for trusted text.</p><script>alert(1)</script>",
)
ISSUE_TITLES = (
    "Cache warmup fails after deploy", "Backend login slow", "Translate checkout form",
    "Image processing times out", "Menü zeigt falsche Sprache", "Scheduler task hangs",
)


def _issue(rng: Random) -> str:
    return f"{rng.choice(JIRA_KEYS)}-{rng.randint(100, 2400)}"


def _titles(rng: Random, count: int) -> str:
    return "; ".join(f"#{rng.randint(10, 900)} {rng.choice(ISSUE_TITLES)}" for _ in range(count))


def _local_tools() -> list[Tool]:
    return [
        Tool("current_time", None, 0.0,
             lambda r: {"timezone": r.choice(TIMEZONES)},
             lambda r, a: f"2026-09-{r.randint(1, 30):02d}T{r.randint(7, 19):02d}:00:00 {a['timezone']}",
             slow_ms=(1, 15)),
        Tool("kb_lookup", None, 0.004,
             lambda r: {"query": r.choice(DOC_QUERIES), "limit": 3},
             lambda r, a: f"3 articles for {a['query']!r}: KB-{r.randint(10, 99)}, KB-{r.randint(100, 299)}",
             slow_ms=(5, 120)),
    ]


def _github_tools() -> list[Tool]:
    return [
        Tool("mcp_github_list_issues", "github", 0.004,
             lambda r: {"repo": r.choice(REPOS), "state": "open", "perPage": 10},
             lambda r, a: f"{r.randint(2, 40)} open issues in {a['repo']}: {_titles(r, 2)}"),
        Tool("mcp_github_get_pull_request", "github", 0.004,
             lambda r: {"repo": r.choice(REPOS), "number": r.randint(20, 900)},
             lambda r, a: f"PR #{a['number']} '{r.choice(ISSUE_TITLES)}': {r.randint(1, 30)} files, checks green"),
        Tool("mcp_github_create_issue_comment", "github", 0.004,
             lambda r: {"repo": r.choice(REPOS), "number": r.randint(20, 900),
                        "body": "Reproduced on 13.4, see log excerpt."},
             lambda r, a: f"Comment {r.randint(10**6, 10**7)} created on #{a['number']}",
             writes=True),
    ]


def _jira_tools() -> list[Tool]:
    return [
        Tool("mcp_jira_cloud_search_issues", "jira_cloud", 0.18,
             lambda r: {"jql": f"project = {r.choice(JIRA_KEYS)} AND status = Open", "maxResults": 20},
             lambda r, a: f"{r.randint(0, 25)} issues: {_issue(r)}, {_issue(r)}",
             slow_ms=(300, 6000)),
        Tool("mcp_jira_cloud_get_issue", "jira_cloud", 0.18,
             lambda r: {"issueKey": _issue(r)},
             lambda r, a: f"{a['issueKey']} '{r.choice(ISSUE_TITLES)}' status In Progress, assignee: support team",
             slow_ms=(300, 6000)),
        Tool("mcp_jira_cloud_add_comment", "jira_cloud", 0.18,
             lambda r: {"issueKey": _issue(r), "body": "Kunde informiert, Fix folgt mit dem nächsten Release."},
             lambda r, a: f"Comment added to {a['issueKey']}",
             writes=True, slow_ms=(300, 6000)),
    ]


def _other_mcp_tools() -> list[Tool]:
    return [
        Tool("mcp_docs-search_query", "docs-search", 0.004,
             lambda r: {"query": r.choice(DOC_QUERIES), "limit": 5},
             lambda r, a: f"5 hits for {a['query']!r}; best: docs.typo3.org/p/netresearch/nr-llm/{r.randint(1, 80)}",
             slow_ms=(80, 1500)),
        Tool("mcp_docs-search_fetch_page", "docs-search", 0.004,
             lambda r: {"url": f"https://docs.typo3.org/permalink/netresearch/nr-llm:adr-{r.randint(150, 191)}"},
             lambda r, a: r.choice(PAGES),
             slow_ms=(80, 2500)),
        Tool("mcp_weather_current", "weather", 0.0,
             lambda r: {"city": r.choice(CITIES)},
             lambda r, a: f"{a['city']}: {r.randint(8, 29)} °C, wind {r.randint(2, 40)} km/h",
             slow_ms=(60, 700)),
        Tool("mcp_weather_forecast", "weather", 0.0,
             lambda r: {"city": r.choice(CITIES), "days": r.randint(1, 5)},
             lambda r, a: f"{a['days']}-day forecast for {a['city']}: mostly dry, {r.randint(10, 26)} °C",
             slow_ms=(60, 900)),
        Tool("mcp_crm_eu_west_find_contact", "crm_eu_west", 0.004,
             lambda r: {"email": f"buyer{r.randint(1, 400)}@example.org"},
             lambda r, a: f"Contact CT-{r.randint(1000, 9999)} ({a['email']}), account ACC-{r.randint(100, 999)}",
             slow_ms=(120, 2500)),
        Tool("mcp_crm_eu_west_get_account", "crm_eu_west", 0.004,
             lambda r: {"accountId": f"ACC-{r.randint(100, 999)}"},
             lambda r, a: f"{a['accountId']}: {r.randint(1, 12)} open opportunities, tier {r.choice('ABC')}",
             slow_ms=(120, 2500)),
    ]


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in _local_tools() + _github_tools() + _jira_tools() + _other_mcp_tools()
}

FAILURE_RESULTS: dict[str | None, tuple[str, ...]] = {
    "jira_cloud": (
        "McpTransportException: upstream timed out after 30000 ms",
        "McpTransportException: HTTP 502 Bad Gateway from jira_cloud",
        "McpTransportException: HTTP 429 rate limited, retry after 60 s",
    ),
}
DEFAULT_FAILURES = ("McpTransportException: connection reset by peer", "Tool error: invalid arguments")
CANCEL_RESULT = "McpTransportException: call cancelled by operator (run cancelled)"
DENIED_RESULT = "The operator denied this tool call."
# Tools whose results carry an artifact (ADR-108: a list of {type, label, data}).
ARTIFACT_TYPES = {"mcp_docs-search_fetch_page": "text"}


@dataclass(frozen=True)
class Configuration:
    """An agent configuration: its identifier, its prompt and the tools it offers."""

    identifier: str
    system_prompt: str
    user_prompts: tuple[str, ...]
    tool_names: tuple[str, ...]


CONFIGURATIONS: tuple[Configuration, ...] = (
    Configuration(
        "support-triage", "You triage support tickets. Be brief.",
        ("Summarise the open SUP tickets and link related GitHub issues.",
         "Welche Tickets warten seit über einer Woche auf Antwort?",
         "Check SUP-1234 and comment on the status."),
        ("mcp_jira_cloud_search_issues", "mcp_jira_cloud_get_issue", "mcp_jira_cloud_add_comment",
         "mcp_github_list_issues", "kb_lookup", "current_time"),
    ),
    Configuration(
        "dev-assistant", "You help the web team with code review and issue tracking.",
        ("Which open PRs touch the caching code?",
         "Review PR #412 and leave a comment with findings.",
         "Find docs on the MCP rate limit and the related Jira issue."),
        ("mcp_github_list_issues", "mcp_github_get_pull_request", "mcp_github_create_issue_comment",
         "mcp_jira_cloud_get_issue", "mcp_jira_cloud_search_issues", "mcp_docs-search_query"),
    ),
    Configuration(
        "sales-desk", "You prepare customer visits for the sales team.",
        ("Prepare my visit to ACC-311 tomorrow, including the weather.",
         "Wer ist der Ansprechpartner bei buyer42@example.org?"),
        ("mcp_crm_eu_west_find_contact", "mcp_crm_eu_west_get_account", "mcp_weather_forecast",
         "current_time", "kb_lookup"),
    ),
    Configuration(
        "field-service", "You plan technician routes.",
        ("Plan today's route in Leipzig; check the weather first.",
         "Can the roof repair in Hamburg go ahead on Friday?"),
        ("mcp_weather_current", "mcp_weather_forecast", "mcp_crm_eu_west_get_account",
         "mcp_docs-search_query", "current_time"),
    ),
    Configuration(
        "docs-helper", "You answer questions from the TYPO3 documentation.",
        ("How do I escape output in Fluid?",
         "What does ADR-191 change for cancelled calls?",
         "Wie richte ich eine zweite Sprache ein?"),
        ("mcp_docs-search_query", "mcp_docs-search_fetch_page", "kb_lookup"),
    ),
)

ANSWERS = (
    "Done. Three tickets need a reply today; details below.",
    "Here is the summary you asked for, with links to the sources.",
    "Erledigt: die Zusammenfassung steht unten, mit Quellen.",
    "I could not reach every source; the answer below is partial.",
)
THOUGHTS = (
    "Need the ticket list first, then cross-check GitHub.",
    "The forecast decides the plan; look up the account after.",
    "The docs should answer this; fetch the ADR page.",
)
DROP_KINDS = ("message", "tool", "artifact")
DROP_REASONS = ("context_budget", "duplicate", "stale")


# --- one run --------------------------------------------------------------------

class FailureSchedule:
    """Decides which calls fail: each server at its own rate, at random points but evenly.

    Plain coin flips would let a 40-run sample show jira_cloud at 30 % or a healthy
    server at 5 %; a credit that fills by the rate per call and fails at 1 keeps
    every sample near the rate, and the jitter keeps the failures irregular.
    """

    def __init__(self, rng: Random) -> None:
        self.rng = rng
        self.credit: dict[str, float] = {}
        self.denial_due = True

    def denies(self, moment: int) -> bool:
        """Whether an operator denies an approval at ``moment`` that chance granted: the first from DENIAL_START on.

        It draws nothing from the random stream, so that every row before it stays as it was.
        """
        denied = self.denial_due and moment >= DENIAL_START
        if denied:
            self.denial_due = False
        return denied

    def fails(self, tool: Tool, moment: int) -> bool:
        """Whether this call of ``tool`` at ``moment`` fails."""
        rate = INCIDENT_RATE if tool.server == INCIDENT_SERVER and moment >= INCIDENT_START else tool.failure_rate
        if rate <= 0:
            return False
        key = tool.server or tool.name
        credit = self.credit.get(key, self.rng.uniform(-0.4, 0.4)) + rate
        failed = credit >= 1.0
        if failed:
            credit += self.rng.uniform(-0.4, 0.4) - 1.0
        self.credit[key] = credit
        return failed


# What nr-llm's privacy filter drops at the "metadata" level (RunStepPrivacyFilter::CONTENT_KEYS).
CONTENT_KEYS = (
    "messagesSent", "content", "thinking", "requestedToolCalls", "raw", "toolArguments", "toolResult", "toolArtifacts",
)


def metadata_only(payload: dict[str, Any]) -> dict[str, Any]:
    """A payload as nr-llm stores it at its default privacy level: sizes and names, no content."""
    kept = {key: value for key, value in payload.items() if key not in CONTENT_KEYS}
    kept["contentRedacted"] = True
    if isinstance(payload.get("messagesSent"), list):
        kept["messagesSentCount"] = len(payload["messagesSent"])
    for key in ("content", "thinking", "toolResult"):
        if isinstance(payload.get(key), str):
            kept[f"{key}Length"] = len(payload[key])  # mb_strlen: characters
    if isinstance(payload.get("requestedToolCalls"), list):
        kept["requestedToolNames"] = [
            call["name"] for call in payload["requestedToolCalls"]
            if isinstance(call, dict) and isinstance(call.get("name"), str)
        ]
    if isinstance(payload.get("toolArtifacts"), list):
        kept["toolArtifactsCount"] = len(payload["toolArtifacts"])
        kept["toolArtifactTypes"] = [artifact.get("type") for artifact in payload["toolArtifacts"]]
    return kept


class RunBuilder:
    """Collects one run's steps in order, with their clock, and serialises them."""

    def __init__(self, rng: Random, started: int, failures: FailureSchedule) -> None:
        self.rng = rng
        self.failures = failures
        self.run = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.clock = started
        self.legacy = started < ADR_191_DATE
        # The surge's own stream: drawing from it leaves every other row as it was.
        self.surge = Random(started)
        self.started = started
        self.metadata_only = False
        self.steps: list[list[Any]] = []

    def add(
        self, kind: str, round_: int, duration_ms: float, payload: dict[str, Any], pause: int = 1
    ) -> None:
        """Append a step; the clock moves on by its duration and a short pause."""
        self.clock += int(duration_ms // 1000) + self.rng.randint(pause, pause + 2)
        self.steps.append([len(self.steps), kind, round_, round(duration_ms, 2), payload, self.clock])

    def add_refusal(self, round_: int, tool: Tool, arguments: dict[str, Any]) -> None:
        """The failed 0 ms tool step nr-llm records for a call it refused (here: a denied approval).

        It draws nothing from the random stream, so that every other row stays as it was.
        """
        self.clock += 1
        payload = self.tool_payload(tool, arguments, "failed", DENIED_RESULT)
        self.steps.append([len(self.steps), "tool", round_, 0.0, payload, self.clock])

    def tool_payload(
        self, tool: Tool, arguments: dict[str, Any], outcome: str, result: str
    ) -> dict[str, Any]:
        """A tool step's payload; rows before ADR-191 carry the flag only."""
        payload: dict[str, Any] = {"toolName": tool.name, "toolIsError": outcome != "ok"}
        if not self.legacy:
            payload["toolOutcome"] = outcome
        payload["toolArguments"] = arguments
        payload["toolResult"] = result
        if outcome == "ok" and tool.name in ARTIFACT_TYPES:
            payload["toolArtifacts"] = [{"type": ARTIFACT_TYPES[tool.name], "label": "page", "data": result}]
        return payload

    def drop_flag_of_one_tool_step(self) -> None:
        """A step whose writer recorded no outcome at all: a warning case, still valid."""
        candidates = [s for s in self.steps if s[1] == "tool" and s[4].get("toolIsError") is False]
        if candidates:
            payload = self.rng.choice(candidates)[4]
            payload.pop("toolIsError")
            payload.pop("toolOutcome", None)
            payload.pop("toolResult")

    def rows(self, first_uid: int) -> Iterator[Row]:
        """The run's rows with their uids, payloads as compact JSON text."""
        run = self.run
        for offset, (sequence, kind, round_, duration, payload, crdate) in enumerate(self.steps):
            stored = metadata_only(payload) if self.metadata_only else payload
            yield (first_uid + offset, run, sequence, kind, round_, duration, _dumps(stored), crdate)


def _llm_payload(rng: Random, round_: int, calls: list[dict[str, Any]], finish: str) -> dict[str, Any]:
    prompt = 900 + round_ * 650 + rng.randint(0, 700)
    completion = rng.randint(25, 140) if calls else rng.randint(120, 600)
    payload: dict[str, Any] = {
        "finishReason": finish,
        "promptTokens": prompt,
        "completionTokens": completion,
        "totalTokens": prompt + completion,
        "estimatedCost": round(prompt * 0.0000025 + completion * 0.00001, 6),
        "requestedToolCalls": calls,
        "content": rng.choice(ANSWERS) if finish == "stop" else "",
    }
    if rng.random() < 0.6:
        payload["thinking"] = rng.choice(THOUGHTS)
    return payload


def _request_payload(
    config: Configuration, user_prompt: str, round_: int, last_result: str
) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": config.system_prompt},
        {"role": "user", "content": user_prompt},
    ]
    if round_ > 1:
        messages.append({"role": "tool", "content": last_result[:80]})
    return {"messagesSent": messages, "toolSpecs": list(config.tool_names)}


def _dropped_payload(rng: Random) -> dict[str, Any]:
    sources = [
        f"{rng.choice(DROP_KINDS)}#{rng.randint(1, 60)} {rng.choice(DROP_REASONS)}"
        for _ in range(rng.randint(1, 3))
    ]
    return {"droppedSources": sources}


def _outcome(rng: Random, failures: FailureSchedule, tool: Tool, moment: int) -> tuple[str, str, float]:
    """How an uncancelled call ends: outcome, result text, duration."""
    low, high = tool.slow_ms
    if failures.fails(tool, moment):
        messages = FAILURE_RESULTS.get(tool.server, DEFAULT_FAILURES)
        return "failed", rng.choice(messages), rng.uniform(high, high * 5)
    draw = rng.random()  # what rng.uniform(low, high) draws: the rows before the slowdown stay as they were
    if tool.server == SLOWDOWN_SERVER and moment >= SLOWDOWN_START and draw < SLOWDOWN_SHARE:
        (low, high), draw = SLOWDOWN_MS, draw / SLOWDOWN_SHARE
    return "ok", "", low + (high - low) * draw


CancelTarget = Callable[[Tool], bool]


def _is_remote(tool: Tool) -> bool:
    """An MCP tool: only these have a transport call in flight that a cancel cuts off."""
    return tool.server is not None


def _is_healthy_remote(tool: Tool) -> bool:
    """An MCP tool on a server that rarely fails."""
    return tool.server is not None and tool.failure_rate < 0.05


def _cancel_target(block_index: int) -> CancelTarget:
    """Which calls a block's cancel may cut off: a healthy server's in three blocks of four.

    A cancel on a healthy server is the case ADR-191 is about: read as a failure, it
    makes that server look flaky.
    """
    return _is_remote if block_index % 4 == 3 else _is_healthy_remote


def _tool_round(
    b: RunBuilder, config: Configuration, round_: int, calls: int, cancel: CancelTarget | None
) -> tuple[int, str]:
    """The llm step asking for tool calls, then each call; returns steps used and the last result."""
    rng = b.rng
    names = [rng.choice(config.tool_names) for _ in range(calls)]
    if cancel is not None:
        targets = [n for n in config.tool_names if cancel(TOOLS[n])]
        names[-1] = rng.choice(targets or [n for n in config.tool_names if _is_remote(TOOLS[n])])
    requested = [
        {"id": f"call_{rng.getrandbits(48):012x}", "name": name,
         "arguments": TOOLS[name].arguments(rng)}
        for name in names
    ]
    b.add("llm", round_, rng.uniform(700, 9000), _llm_payload(rng, round_, requested, "tool_calls"))
    used, last = 1, ""
    for index, call in enumerate(requested):
        tool = TOOLS[call["name"]]
        cut_off = cancel is not None and index == len(requested) - 1
        if tool.writes and rng.random() < 0.5:
            approved = cut_off or (rng.random() < 0.93 and not b.failures.denies(b.clock))
            b.add("approval", round_, 0.0, {"approved": approved, "decidedBy": rng.randint(1, 9)}, pause=8)
            used += 1
            if not approved:
                b.add_refusal(round_, tool, call["arguments"])
                continue
        if cut_off or _surge_cuts_off(b, tool):
            payload = b.tool_payload(tool, call["arguments"], "cancelled", CANCEL_RESULT)
            b.add("tool", round_, rng.uniform(400, 20000), payload)
            return used + 1, CANCEL_RESULT
        outcome, result, duration = _outcome(rng, b.failures, tool, b.clock)
        last = result or tool.result(rng, call["arguments"])
        b.add("tool", round_, duration, b.tool_payload(tool, call["arguments"], outcome, last))
        used += 1
    return used, last


def _surge_cuts_off(b: RunBuilder, tool: Tool) -> bool:
    """Whether an operator cuts off this call in the surge of cancels (from its own random stream)."""
    return tool.server == SURGE_SERVER and b.clock >= SURGE_START and b.surge.random() < SURGE_SHARE


def _build_run(
    rng: Random, failures: FailureSchedule, started: int, cancel: CancelTarget | None, flagless: bool
) -> RunBuilder:
    """One whole run: context, tool rounds, and a final answer unless an operator cancels it."""
    cancelled = cancel is not None
    b = RunBuilder(rng, started, failures)
    config = rng.choice(CONFIGURATIONS)
    user_prompt = rng.choice(config.user_prompts)
    b.add("context", 0, 0.0, {"configurationIdentifier": config.identifier, "messageCount": 2})
    # The step budget, minus the context and (unless cancelled) the final answer; the
    # top stays below 45 because approvals in the last round may go a little over it.
    budget = round(rng.triangular(6, 44, 12)) - 1 - (0 if cancelled else 2)
    round_, last = 0, ""
    while True:
        round_ += 1
        if round_ > 1 and rng.random() < 0.12 and budget >= 5:
            b.add("dropped", round_, 0.0, _dropped_payload(rng))
            budget -= 1
        b.add("request", round_, 0.0, _request_payload(config, user_prompt, round_, last))
        calls = max(1, min(rng.choice((1, 1, 1, 2, 2, 3)), budget - 2))
        budget -= 1
        final_round = budget - 1 - calls < 3
        if final_round:  # spend what is left rather than end the run short
            calls = min(3, max(calls, budget - 1))
        used, last = _tool_round(b, config, round_, calls, cancel if final_round else None)
        budget -= used
        if last == CANCEL_RESULT:  # the planned cut-off, or one of the surge's
            cancelled = True
            break
        if final_round:
            break
    if not cancelled:
        b.add("request", round_ + 1, 0.0, _request_payload(config, user_prompt, round_ + 1, last))
        b.add("llm", round_ + 1, rng.uniform(900, 12000), _llm_payload(rng, round_ + 1, [], "stop"))
    if flagless:
        b.drop_flag_of_one_tool_step()
    return b


def _cancel_offset(rng: Random, block_index: int, block: int) -> int:
    """Where in its block the cancelled run falls: the first half of even blocks, the second of odd.

    Alternating halves spreads cancels evenly over time, so even a 40-run sample has
    one before ADR-191 (read as failed) and one after it (read as cancelled).
    """
    half = block // 2
    if half == 0:
        return rng.randrange(block)
    return (block_index % 2) * half + rng.randrange(block - half if block_index % 2 else half)


def _generate_runs(
    runs: int, seed: int, cancel_every: int = CANCEL_BLOCK_RUNS, metadata_every: int = 0
) -> Iterator[RunBuilder]:
    """All runs in order, each built when asked for; one run is held in memory at a time.

    With ``metadata_every`` N, the first run of every N is stored at the "metadata" privacy
    level (chosen by position, drawing nothing from the random stream).
    """
    rng = Random(seed)
    failures = FailureSchedule(rng)
    slot = RUN_SPREAD // max(1, runs)
    cancelled_at = flagless_at = -1
    for index in range(runs):
        if index % cancel_every == 0:
            block = min(cancel_every, runs - index)
            cancelled_at = index + _cancel_offset(rng, index // cancel_every, block)
        if index % FLAGLESS_BLOCK_RUNS == 0:
            flagless_at = index + rng.randrange(min(FLAGLESS_BLOCK_RUNS, runs - index))
        started = START + index * RUN_SPREAD // runs + rng.randrange(max(1, slot // 2))
        cancel = _cancel_target(index // cancel_every) if index == cancelled_at else None
        run = _build_run(rng, failures, started, cancel, index == flagless_at)
        run.metadata_only = metadata_every > 0 and index % metadata_every == 0
        yield run


def _generate_tuples(
    runs: int, seed: int, cancel_every: int = CANCEL_BLOCK_RUNS, metadata_every: int = 0,
    on_run: Callable[[RunBuilder], None] | None = None,
) -> Iterator[Row]:
    """All rows as tuples in run order; ``on_run`` sees each run (its full payloads) before its rows.

    Serialising a run draws nothing from the random stream, so whoever watches the runs
    (the other tables) leaves the rows as they were.
    """
    uid = FIRST_UID
    for run in _generate_runs(runs, seed, cancel_every, metadata_every):
        if on_run is not None:
            on_run(run)
        yield from run.rows(uid)
        uid += len(run.steps)


def generate_rows(
    runs: int, seed: int = 191, cancel_every: int = CANCEL_BLOCK_RUNS, metadata_every: int = 0
) -> Iterator[dict[str, Any]]:
    """Yield the export's rows as dicts (snake_case columns, payload as JSON text), in run order."""
    for row in _generate_tuples(runs, seed, cancel_every, metadata_every):
        yield dict(zip(COLUMNS, row))


# --- the other tables (issue 20) ------------------------------------------------
#
# The tables nr-llm keeps about a run besides its steps, derived from the runs the events
# were made of and from a stream of their own: writing them changes no event row.

RUNS_TABLE = "tx_nrllm_agentrun"
CALLS_TABLE = "tx_nrllm_telemetry"
GOVERNANCE_TABLE = "tx_nrllm_governance_event"
TOOLS_TABLE = "tx_nrllm_mcp_tool"
SERVERS_TABLE = "tx_nrllm_mcp_server"

INT, DECIMAL, TEXT = "int", "decimal", "text"
# Every column in the order ext_tables.sql declares it, with the internal ones a report never
# shows (a real dump has them, so the tool must ignore them); values as MySQL returns them.
TABLE_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    RUNS_TABLE: (
        ("uid", INT), ("pid", INT), ("uuid", TEXT), ("status", TEXT), ("configuration_uid", INT),
        ("configuration_identifier", TEXT), ("be_user", INT), ("iterations", INT), ("truncated", INT),
        ("total_prompt_tokens", INT), ("total_completion_tokens", INT), ("total_tokens", INT),
        ("estimated_cost", DECIMAL), ("error_class", TEXT), ("termination_reason", TEXT),
        ("started_at", INT), ("finished_at", INT), ("suspended_state", TEXT), ("queued_request", TEXT),
        ("claimed_by", TEXT), ("lease_expires", INT), ("requeue_count", INT), ("pending_effect", TEXT),
        ("tstamp", INT), ("crdate", INT),
    ),
    CALLS_TABLE: (
        ("uid", INT), ("pid", INT), ("correlation_id", TEXT), ("operation", TEXT), ("provider", TEXT),
        ("model", TEXT), ("served_provider", TEXT), ("served_model", TEXT), ("configuration_identifier", TEXT),
        ("success", INT), ("error_class", TEXT), ("latency_ms", INT), ("time_to_first_token_ms", INT),
        ("cache_hit", INT), ("fallback_attempts", INT), ("provider_retries", INT), ("actual_input_tokens", INT),
        ("actual_output_tokens", INT), ("actual_cost", DECIMAL), ("be_user", INT), ("crdate", INT),
    ),
    GOVERNANCE_TABLE: (
        ("uid", INT), ("pid", INT), ("decision", TEXT), ("reason", TEXT), ("provider", TEXT), ("model", TEXT),
        ("configuration_identifier", TEXT), ("tool_name", TEXT), ("agentrun_uid", INT), ("correlation_id", TEXT),
        ("guardrail", TEXT), ("detail", TEXT), ("be_user", INT), ("crdate", INT),
    ),
    TOOLS_TABLE: (
        ("uid", INT), ("pid", INT), ("server", INT), ("tool_name", TEXT), ("remote_name", TEXT),
        ("description", TEXT), ("input_schema", TEXT), ("orphaned", INT), ("tstamp", INT), ("crdate", INT),
    ),
    SERVERS_TABLE: (
        ("uid", INT), ("pid", INT), ("identifier", TEXT), ("name", TEXT), ("last_contact", INT),
        ("last_latency_ms", INT), ("tstamp", INT), ("crdate", INT),
    ),
}
TableRow = tuple[Any, ...]

# One run in every FAILURE_BLOCK_RUNS fails (the reasons taking turns), one in every
# TRUNCATION_BLOCK_RUNS completes truncated, and in every POLICY_BLOCK_RUNS a policy denies
# one failed MCP call: by blocks, so that even the 120-run sample has each of them.
FAILURE_BLOCK_RUNS = TRUNCATION_BLOCK_RUNS = 20
POLICY_BLOCK_RUNS = UNMATCHED_BLOCK_RUNS = 40
FALLBACK_BLOCK_RUNS = 25
GUARDRAIL_BLOCK_RUNS = 30
FAILURE_REASONS = ("provider_failed", "retries_exhausted", "not_retryable", "approval_denied")
TRUNCATIONS = ("max_iterations", "context_truncated", "budget_exhausted")
# Runs opened after the events were dumped (SQL tools dump table by table): in the run table, no steps yet.
UNSTARTED_STATUSES = ("queued", "waiting_for_approval", "waiting_for_input")

EXCEPTIONS = "Netresearch\\NrLlm\\Exception\\"
PROVIDER_EXCEPTIONS = "Netresearch\\NrLlm\\Provider\\Exception\\"
GUARDRAILS = "Netresearch\\NrLlm\\Service\\Guardrail\\"
# A failed run's error class; the three provider reasons also leave a failed provider call.
ERROR_CLASSES = {
    "provider_failed": PROVIDER_EXCEPTIONS + "ProviderConnectionException",
    "retries_exhausted": PROVIDER_EXCEPTIONS + "ProviderRateLimitException",
    "not_retryable": PROVIDER_EXCEPTIONS + "ProviderResponseException",
    "approval_denied": EXCEPTIONS + "GuardrailApprovalRequiredException",
    "policy_denied": EXCEPTIONS + "GuardrailPolicyException",
}
PROVIDER_FAILURES = ("provider_failed", "retries_exhausted", "not_retryable")

# Each configuration's provider and model, and what a fallback swaps them for.
PROVIDERS: dict[str, tuple[str, str]] = {
    "support-triage": ("openai", "gpt-4.1-mini"),
    "dev-assistant": ("anthropic", "claude-sonnet-4-5"),
    "sales-desk": ("openai", "gpt-4.1-mini"),
    "field-service": ("mistral", "mistral-small-latest"),
    "docs-helper": ("ollama", "llama3.1:8b"),
}
FALLBACKS: dict[str, tuple[str, str]] = {
    "openai": ("anthropic", "claude-haiku-4-5"),
    "anthropic": ("openai", "gpt-4.1"),
    "mistral": ("openai", "gpt-4.1-mini"),
    "ollama": ("openai", "gpt-4.1-mini"),
}
# Dollars per input and per output token; a local model has no price (actual_cost NULL, ADR-174).
PRICES: dict[str, tuple[float, float] | None] = {
    "gpt-4.1-mini": (0.4e-6, 1.6e-6), "gpt-4.1": (2e-6, 8e-6), "claude-sonnet-4-5": (3e-6, 15e-6),
    "claude-haiku-4-5": (1e-6, 5e-6), "mistral-small-latest": (0.1e-6, 0.3e-6), "llama3.1:8b": None,
}
SERVER_NAMES = {
    "github": "GitHub", "jira_cloud": "Jira Cloud", "docs-search": "Docs search", "weather": "Weather",
    "crm_eu_west": "CRM (EU West)",
}
# What nr-llm accepts as a server identifier; "docs-search" is not one, so the catalogue cannot list it.
SERVER_IDENTIFIER = re.compile(r"^[a-z0-9_]{1,32}$")
# A tool the catalogue still knows but its server no longer offers; no run calls it.
ORPHANED_TOOL = ("github", "search_code")
CATALOGUE_SYNCED = START - 7 * 86400
# Of the provider calls: how many hit the provider's prompt cache, and how many the provider retried once.
CACHE_HIT_SHARE, RETRIED_SHARE = 0.08, 0.03
MCP_TOOL_PREFIX = "mcp_"


@dataclass(frozen=True)
class LlmCall:
    """What an llm step says about its provider call."""

    crdate: int
    duration_ms: float
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class ToolCall:
    """What a tool step says about its call: ``outcome`` is ok, failed (by the server), cancelled,
    refused (the 0 ms step of an operator's Deny), or None (the step states none)."""

    crdate: int
    name: str
    server: str | None
    duration_ms: float
    outcome: str | None


@dataclass(frozen=True)
class RunFacts:
    """The facts of one run's steps that the other tables repeat or must agree with."""

    uid: int
    uuid: str
    configuration: str
    started: int
    last_crdate: int
    rounds: int
    llm_calls: tuple[LlmCall, ...]
    tool_calls: tuple[ToolCall, ...]
    cancelled: bool
    operator_denied: bool
    dropped: bool

    @classmethod
    def of(cls, uid: int, run: "RunBuilder") -> "RunFacts":
        """The facts of a built run (its full payloads, whatever privacy level it is stored at)."""
        llm_calls, tool_calls = [], []
        for _, kind, _round, duration, payload, crdate in run.steps:
            if kind == "llm":
                llm_calls.append(LlmCall(crdate, duration, payload["promptTokens"], payload["completionTokens"]))
            elif kind == "tool":
                tool_calls.append(ToolCall(
                    crdate, payload["toolName"], TOOLS[payload["toolName"]].server, duration, _tool_outcome(payload)))
        last = run.steps[-1]
        return cls(
            uid, run.run, run.steps[0][4]["configurationIdentifier"], run.started, last[5],
            max(step[2] for step in run.steps), tuple(llm_calls), tuple(tool_calls),
            last[1] == "tool" and last[4].get("toolResult") == CANCEL_RESULT,
            any(step[1] == "approval" and step[4]["approved"] is False for step in run.steps),
            any(step[1] == "dropped" for step in run.steps),
        )


def _tool_outcome(payload: dict[str, Any]) -> str | None:
    """What really happened to a call, also where the rows before ADR-191 read a cancel as failed."""
    if "toolIsError" not in payload:
        return None
    result = payload.get("toolResult")
    if result == CANCEL_RESULT:
        return "cancelled"
    if result == DENIED_RESULT:
        return "refused"
    return "failed" if payload["toolIsError"] else "ok"


class RunFactsCollector:
    """Watches the runs as the events are written (``on_run``) and keeps their facts."""

    def __init__(self) -> None:
        self.runs: list[RunFacts] = []

    def __call__(self, run: "RunBuilder") -> None:
        self.runs.append(RunFacts.of(len(self.runs) + 1, run))


@dataclass
class Settlement:
    """How a run row ends up: status, termination reason, and what its other tables say of it."""

    status: str
    reason: str = ""
    truncated: bool = False
    denied_call: ToolCall | None = None  # the failed MCP call a policy denied (policy_denied)

    @property
    def error_class(self) -> str:
        return ERROR_CLASSES.get(self.reason, "") if self.status == "failed" else ""


def _blocks(runs: list[RunFacts], size: int) -> Iterator[tuple[int, list[RunFacts]]]:
    for start in range(0, len(runs), size):
        yield start // size, runs[start:start + size]


def _settle(runs: list[RunFacts], rng: Random) -> dict[int, Settlement]:
    """Each run's status, consistent with its events.

    A run cut off by an operator is cancelled; the open run is the one whose last step is the
    export's latest (the settle had not been written when it was dumped); the rest ended with
    an answer and are completed, except one run in every block of failures (a provider's error
    after the answer, a guardrail's refusal) and the runs whose failed MCP call a policy denied.
    The operator-denied runs stay completed: a Deny fails the call, not the run.
    """
    settled = {run.uid: Settlement("cancelled", "cancelled") for run in runs if run.cancelled}
    open_runs = [run for run in runs if not run.cancelled]
    if open_runs:
        settled[max(open_runs, key=lambda run: (run.last_crdate, run.uid)).uid] = Settlement("running")

    def free(run: RunFacts) -> bool:
        return run.uid not in settled and not run.operator_denied

    for _, block in _blocks(runs, POLICY_BLOCK_RUNS):
        denials = [(run, call) for run in block if free(run) for call in run.tool_calls
                   if call.outcome == "failed" and call.server is not None]
        # A healthy server's call where there is one (relabelling the flaky server's failures hides its
        # flakiness), and the shortest: nr-llm refuses a call it does not permit within milliseconds,
        # and the events' failed calls all took a server's time.
        healthy = [(run, call) for run, call in denials if TOOLS[call.name].failure_rate < 0.05]
        if denials:
            run, call = min(healthy or denials, key=lambda denial: (denial[1].duration_ms, denial[0].uid))
            settled[run.uid] = Settlement("failed", "policy_denied", denied_call=call)
    for number, block in _blocks(runs, FAILURE_BLOCK_RUNS):
        reason = FAILURE_REASONS[number % len(FAILURE_REASONS)]
        candidates = [run for run in block if free(run) and (reason != "approval_denied" or _write_tool(run))]
        if candidates:
            settled[rng.choice(candidates).uid] = Settlement("failed", reason)
    for number, block in _blocks(runs, TRUNCATION_BLOCK_RUNS):
        reason = TRUNCATIONS[number % len(TRUNCATIONS)]
        candidates = [run for run in block if free(run) and (reason != "context_truncated" or run.dropped)]
        if candidates:
            settled[rng.choice(candidates).uid] = Settlement("completed", reason, truncated=True)
    for run in runs:
        settled.setdefault(run.uid, Settlement("completed", "completed"))
    return settled


def _write_tool(run: RunFacts) -> str:
    """The first tool of the run's configuration that writes, which a guardrail may hold for approval."""
    config = next(config for config in CONFIGURATIONS if config.identifier == run.configuration)
    return next((name for name in config.tool_names if TOOLS[name].writes), "")


def _configuration_uid(identifier: str) -> int:
    return next(index for index, config in enumerate(CONFIGURATIONS, 1) if config.identifier == identifier)


def _uuid(rng: Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    price = PRICES[model]
    return None if price is None else round(input_tokens * price[0] + output_tokens * price[1], 8)


def tables_stream(seed: int) -> Random:
    """The other tables' random stream: apart from the events' ``Random(seed)``, which it never touches."""
    return Random(seed * 7919 + 20)


class TableBuilder:
    """Builds the other tables' rows from the runs' facts, drawing from its own stream only."""

    def __init__(self, runs: list[RunFacts], seed: int) -> None:
        self.runs = runs
        self.rng = tables_stream(seed)
        self.settled = _settle(runs, self.rng)
        self.be_users = {run.uid: 0 if self.rng.random() < 0.2 else self.rng.randint(1, 9) for run in runs}
        for uid, settlement in self.settled.items():
            if settlement.reason == "approval_denied":
                self.be_users[uid] = 0  # a CLI run: nobody there to give the approval a guardrail asks for
        self.calls: list[tuple[int, list[Any]]] = []  # (crdate, row without uid), in the order made
        self.decisions: list[tuple[int, list[Any]]] = []
        self.finished: dict[int, int] = {}

    def tables(self) -> dict[str, list[TableRow]]:
        """Every table's rows, uid first, in uid order."""
        fallback_runs = self._pick_per_block(FALLBACK_BLOCK_RUNS, lambda run: bool(run.llm_calls))
        for run in self.runs:
            self._provider_calls(run, fallback_runs.get(run.uid))
            self._decisions(run)
        self._guardrail_decisions()
        self._unmatched_calls()
        runs = [self._run_row(run) for run in self.runs] + self._unstarted_runs()
        servers, tools = self._catalogue()
        return {
            RUNS_TABLE: runs, CALLS_TABLE: _numbered(self.calls), GOVERNANCE_TABLE: _numbered(self.decisions),
            TOOLS_TABLE: tools, SERVERS_TABLE: servers,
        }

    def _pick_per_block(self, size: int, eligible: Callable[[RunFacts], bool]) -> dict[int, int]:
        """One eligible run per block of ``size`` runs, with the index of one of its llm calls."""
        picked = {}
        for _, block in _blocks(self.runs, size):
            candidates = [run for run in block if eligible(run)]
            if candidates:
                run = self.rng.choice(candidates)
                picked[run.uid] = self.rng.randrange(len(run.llm_calls))
        return picked

    def _provider_calls(self, run: RunFacts, fallback_at: int | None) -> None:
        """One call per llm step (same second, its duration as latency), a fallback swapping the one at
        ``fallback_at``, and the failed call a provider failure leaves."""
        provider, model = PROVIDERS[run.configuration]
        for index, call in enumerate(run.llm_calls):
            served = FALLBACKS[provider] if index == fallback_at else (provider, model)
            latency = round(call.duration_ms)
            cache_hit = self.rng.random() < CACHE_HIT_SHARE
            first_token = self.rng.uniform(0.05, 0.15) if cache_hit else self.rng.uniform(0.15, 0.45)
            retries = int(self.rng.random() < RETRIED_SHARE)
            self.calls.append((call.crdate, [
                0, run.uuid, "chat", provider, model, *served, run.configuration, 1, "", latency,
                max(1, round(latency * first_token)), int(cache_hit), int(index == fallback_at), retries,
                call.prompt_tokens, call.completion_tokens,
                _cost(served[1], call.prompt_tokens, call.completion_tokens), self.be_users[run.uid], call.crdate,
            ]))
        if self.settled[run.uid].reason in PROVIDER_FAILURES:
            self._failed_call(run, provider, model)

    def _failed_call(self, run: RunFacts, provider: str, model: str) -> None:
        """The call that failed the run after its last step: a timeout, a rate limit retried to the end,
        or a refusal not worth retrying. It used no tokens; a priced model's call cost nothing."""
        settlement = self.settled[run.uid]
        timed_out = settlement.reason == "provider_failed"
        latency = self.rng.randint(25_000, 30_000) if timed_out else self.rng.randint(300, 4000)
        crdate = run.last_crdate + latency // 1000 + self.rng.randint(1, 3)
        retries = 3 if settlement.reason == "retries_exhausted" else 0
        cost = None if PRICES[model] is None else 0.0
        self.calls.append((crdate, [
            0, run.uuid, "chat", provider, model, provider, model, run.configuration, 0,
            settlement.error_class, latency, 0, 0, 0, retries, 0, 0, cost, self.be_users[run.uid], crdate,
        ]))
        self.finished[run.uid] = crdate

    def _decisions(self, run: RunFacts) -> None:
        """The guardrail decision behind a policy denial (the failed step's second) or a missing approval."""
        settlement = self.settled[run.uid]
        if settlement.denied_call is not None:
            call = settlement.denied_call
            self._decide(run, call.crdate, "tool_denied", "tool_not_permitted", call.name,
                         GUARDRAILS + "ToolPolicyGuardrail", f"server:{call.server}")
            self.finished[run.uid] = run.last_crdate + 1
        elif settlement.reason == "approval_denied":
            crdate = run.last_crdate + 1
            self._decide(run, crdate, "approval_required", "approval_unavailable", _write_tool(run),
                         GUARDRAILS + "WriteApprovalGuardrail", "mode:non_interactive")
            self.finished[run.uid] = crdate

    def _decide(self, run: RunFacts, crdate: int, decision: str, reason: str, tool: str, guardrail: str,
                detail: str) -> None:
        provider, model = PROVIDERS[run.configuration]
        self.decisions.append((crdate, [
            0, decision, reason, provider, model, run.configuration, tool, run.uid, run.uuid, guardrail, detail,
            self.be_users[run.uid], crdate,
        ]))

    def _guardrail_decisions(self) -> None:
        """In every block, a completed run's answer blocked for a secret and one flagged by the provider's filter."""
        def completed(run: RunFacts) -> bool:
            return self.settled[run.uid].status == "completed"

        for uid in self._pick_per_block(GUARDRAIL_BLOCK_RUNS, completed):
            run = self.runs[uid - 1]
            self._decide(run, run.llm_calls[-1].crdate, "response_blocked", "secret_detected", "",
                         GUARDRAILS + "SecretRedactionGuardrail", "pattern:credit_card")
        for uid, index in self._pick_per_block(GUARDRAIL_BLOCK_RUNS, completed).items():
            run = self.runs[uid - 1]
            self._decide(run, run.llm_calls[index].crdate, "content_filter", "provider_flagged", "",
                         GUARDRAILS + "ProviderContentFilterGuardrail", "category:harassment")

    def _unmatched_calls(self) -> None:
        """Calls of no run in the export: another extension's (no correlation id) and a deleted run's."""
        for _, block in _blocks(self.runs, UNMATCHED_BLOCK_RUNS):
            for correlation in ("", _uuid(self.rng)):
                crdate = self.rng.randint(block[0].started, block[-1].last_crdate)
                latency = self.rng.randint(400, 6000)
                input_tokens, output_tokens = self.rng.randint(200, 3000), self.rng.randint(20, 800)
                self.calls.append((crdate, [
                    0, correlation, "completion" if correlation == "" else "chat", "openai", "gpt-4.1-mini",
                    "openai", "gpt-4.1-mini", "" if correlation == "" else "newsletter-writer", 1, "", latency,
                    round(latency * 0.3), 0, 0, 0, input_tokens, output_tokens,
                    _cost("gpt-4.1-mini", input_tokens, output_tokens), self.rng.randint(0, 9), crdate,
                ]))

    def _run_row(self, run: RunFacts) -> TableRow:
        """The run row as nr-llm leaves it: totals from the llm steps when completed, 0 when failed or open."""
        settlement = self.settled[run.uid]
        crdate = run.started - self.rng.randint(0, 20)
        finished = {"running": 0, "failed": self.finished.get(run.uid, run.last_crdate + 1)}.get(
            settlement.status, run.last_crdate)
        counted = settlement.status == "completed"
        prompt = sum(call.prompt_tokens for call in run.llm_calls) if counted else 0
        completion = sum(call.completion_tokens for call in run.llm_calls) if counted else 0
        claimed, lease = ("web01:4711", run.last_crdate + 300) if settlement.status == "running" else ("", 0)
        return (
            run.uid, 0, run.uuid, settlement.status, _configuration_uid(run.configuration), run.configuration,
            self.be_users[run.uid], run.rounds if counted else 0, int(settlement.truncated), prompt, completion,
            prompt + completion, 0.0, settlement.error_class, settlement.reason, run.started, finished,
            None, None, claimed, lease, 0, "", finished or run.last_crdate, crdate,
        )

    def _unstarted_runs(self) -> list[TableRow]:
        """Runs opened after the events were dumped: queued (no worker yet) or waiting for a person."""
        if not self.runs:
            return []
        rows, moment = [], max(run.last_crdate for run in self.runs)
        for offset, status in enumerate(UNSTARTED_STATUSES, 1):
            config = self.rng.choice(CONFIGURATIONS)
            moment += self.rng.randint(30, 300)
            started = 0 if status == "queued" else moment + self.rng.randint(1, 5)
            rows.append((
                len(self.runs) + offset, 0, _uuid(self.rng), status, _configuration_uid(config.identifier),
                config.identifier, self.rng.randint(1, 9), 0, 0, 0, 0, 0, 0.0, "", "", started, 0,
                None, None, "", 0, 0, "", started or moment, moment,
            ))
        return rows

    def _catalogue(self) -> tuple[list[TableRow], list[TableRow]]:
        """The MCP servers nr-llm can register (valid identifiers) and their tools, plus one orphaned tool."""
        identifiers = [server for server in dict.fromkeys(tool.server for tool in TOOLS.values())
                       if server is not None and SERVER_IDENTIFIER.match(server)]
        server_uids = {server: uid for uid, server in enumerate(identifiers, 1)}
        servers = []
        for server in identifiers:
            contact, latency = self._last_contact(server)
            servers.append((server_uids[server], 0, server, SERVER_NAMES[server], contact, latency,
                            contact or CATALOGUE_SYNCED, CATALOGUE_SYNCED))
        called = sorted({call.name for run in self.runs for call in run.tool_calls
                         if call.server in server_uids})
        entries = [(name, TOOLS[name].server, 0) for name in called]
        entries.append((f"{MCP_TOOL_PREFIX}{ORPHANED_TOOL[0]}_{ORPHANED_TOOL[1]}", ORPHANED_TOOL[0], 1))
        tools = []
        for uid, (name, server, orphaned) in enumerate(entries, 1):
            remote = name[len(f"{MCP_TOOL_PREFIX}{server}_"):]
            changed = CATALOGUE_SYNCED + 10 * 86400 if orphaned else CATALOGUE_SYNCED
            description = f"{remote.replace('_', ' ')} on {SERVER_NAMES[server]}"
            tools.append((uid, 0, server_uids[server], name, remote, description, '{"type":"object"}', orphaned,
                          changed, CATALOGUE_SYNCED))
        return servers, tools

    def _last_contact(self, server: str) -> tuple[int, int]:
        """The last successful call of ``server`` in the events: its second and its latency."""
        calls = [call for run in self.runs for call in run.tool_calls
                 if call.server == server and call.outcome == "ok"]
        if not calls:
            return 0, 0
        last = max(calls, key=lambda call: call.crdate)
        return last.crdate, round(last.duration_ms)



def _numbered(rows: list[tuple[int, list[Any]]]) -> list[TableRow]:
    """Rows in the order they were written (by second, then as made), numbered from 1."""
    ordered = sorted(range(len(rows)), key=lambda index: rows[index][0])
    return [(uid, *rows[index][1]) for uid, index in enumerate(ordered, 1)]


# --- writers --------------------------------------------------------------------

def _write_lines(stream: TextIO, rows: Iterable[Row]) -> int:
    count, chunk = 0, []
    for row in rows:
        chunk.append(_dumps(dict(zip(COLUMNS, row))))
        if len(chunk) >= JSONL_CHUNK_ROWS:
            stream.write("\n".join(chunk) + "\n")
            count, chunk = count + len(chunk), []
    if chunk:
        stream.write("\n".join(chunk) + "\n")
    return count + len(chunk)


def _write_jsonl(path: Path, rows: Iterable[Row]) -> int:
    with open(path, "w", encoding="utf-8", newline="\n") as stream:
        return _write_lines(stream, rows)


def _write_jsonl_gz(path: Path, rows: Iterable[Row]) -> int:
    # filename="" and mtime=0 keep the gzip header free of anything but the data.
    with open(path, "wb") as raw:
        packed = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0)
        with packed, io.TextIOWrapper(packed, encoding="utf-8", newline="\n") as stream:
            return _write_lines(stream, rows)


def _write_parquet(path: Path, rows: Iterable[Row]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([
        ("uid", pa.int64()), ("run", pa.string()), ("sequence", pa.int64()), ("kind", pa.string()),
        ("round", pa.int64()), ("duration_ms", pa.float64()), ("payload", pa.string()),
        ("crdate", pa.int64()),
    ])
    count = 0
    with pq.ParquetWriter(path, schema) as writer:
        batch: list[Row] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= PARQUET_BATCH_ROWS:
                writer.write_batch(_record_batch(pa, schema, batch))
                count, batch = count + len(batch), []
        if batch or count == 0:
            writer.write_batch(_record_batch(pa, schema, batch))
    return count + len(batch)


def _record_batch(pa: Any, schema: Any, rows: list[Row]) -> Any:
    columns = list(zip(*rows)) if rows else [()] * len(schema)
    arrays = [pa.array(values, type=field.type) for values, field in zip(columns, schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


WRITERS: dict[str, Callable[[Path, Iterable[Row]], int]] = {
    ".jsonl.gz": _write_jsonl_gz,
    ".jsonl": _write_jsonl,
    ".parquet": _write_parquet,
}


def _table_dicts(table: str, rows: Iterable[TableRow]) -> Iterator[str]:
    names = [name for name, _ in TABLE_COLUMNS[table]]
    for row in rows:
        yield _dumps(dict(zip(names, row)))


def _write_table_jsonl(path: Path, table: str, rows: list[TableRow]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as stream:
        for line in _table_dicts(table, rows):
            stream.write(line + "\n")


def _write_table_jsonl_gz(path: Path, table: str, rows: list[TableRow]) -> None:
    with open(path, "wb") as raw:
        packed = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0)
        with packed, io.TextIOWrapper(packed, encoding="utf-8", newline="\n") as stream:
            for line in _table_dicts(table, rows):
                stream.write(line + "\n")


def _write_table_parquet(path: Path, table: str, rows: list[TableRow]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {INT: pa.int64(), DECIMAL: pa.float64(), TEXT: pa.string()}
    schema = pa.schema([(name, types[kind]) for name, kind in TABLE_COLUMNS[table]])
    with pq.ParquetWriter(path, schema) as writer:
        writer.write_batch(_record_batch(pa, schema, rows))


TABLE_WRITERS: dict[str, Callable[[Path, str, list[TableRow]], None]] = {
    ".jsonl.gz": _write_table_jsonl_gz,
    ".jsonl": _write_table_jsonl,
    ".parquet": _write_table_parquet,
}


def _format_of(path: Path) -> str:
    for suffix in WRITERS:
        if path.name.endswith(suffix):
            return suffix
    raise ValueError(f"Cannot tell the format of {str(path)!r}: use one of {', '.join(WRITERS)}.")


def table_paths(events_path: Path) -> dict[str, Path]:
    """Where the other tables go beside ``events_path``: ``<table><the events' suffix>`` in its folder."""
    events_path = Path(events_path)
    suffix = _format_of(events_path)
    return {table: events_path.parent / f"{table}{suffix}" for table in TABLE_COLUMNS}


def _write_tables_of(events_path: Path, runs: list[RunFacts], seed: int) -> dict[str, int]:
    paths = table_paths(events_path)
    writer = TABLE_WRITERS[_format_of(Path(events_path))]
    counts = {}
    for table, rows in TableBuilder(runs, seed).tables().items():
        writer(paths[table], table, rows)
        counts[table] = len(rows)
    return counts


def generate_tables(
    runs: int, seed: int = 191, cancel_every: int = CANCEL_BLOCK_RUNS, metadata_every: int = 0
) -> dict[str, list[dict[str, Any]]]:
    """The other tables' rows as dicts (their columns), for the export ``generate_rows`` yields."""
    collected = RunFactsCollector()
    for run in _generate_runs(runs, seed, cancel_every, metadata_every):
        collected(run)
    tables = TableBuilder(collected.runs, seed).tables()
    return {table: [dict(zip((name for name, _ in TABLE_COLUMNS[table]), row)) for row in rows]
            for table, rows in tables.items()}


def write_tables(
    events_path: Path, runs: int, seed: int = 191, cancel_every: int = CANCEL_BLOCK_RUNS, metadata_every: int = 0
) -> dict[str, int]:
    """Write the other tables of the export ``write_export`` writes to ``events_path``, beside it, without
    writing the events; return the rows written per table."""
    collected = RunFactsCollector()
    for run in _generate_runs(runs, seed, cancel_every, metadata_every):
        collected(run)
    Path(events_path).parent.mkdir(parents=True, exist_ok=True)
    return _write_tables_of(Path(events_path), collected.runs, seed)


def write_export(
    path: Path, runs: int, seed: int = 191, cancel_every: int = CANCEL_BLOCK_RUNS, metadata_every: int = 0,
    tables: bool = False,
) -> int:
    """Write the export to ``path`` in the format its suffix names; return the rows written.

    With ``tables``, the other tables go beside it (``table_paths``), made from the same runs
    in the same pass; the events are the same bytes either way.
    """
    path = Path(path)
    writer = WRITERS[_format_of(path)]
    path.parent.mkdir(parents=True, exist_ok=True)
    collected = RunFactsCollector() if tables else None
    count = writer(path, _generate_tuples(runs, seed, cancel_every, metadata_every, on_run=collected))
    if collected is not None:
        _write_tables_of(path, collected.runs, seed)
    return count


def main(argv: list[str] | None = None) -> int:
    """Command line: --runs N [--seed S] --out PATH [--tables]."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, required=True, help="number of agent runs")
    parser.add_argument("--seed", type=int, default=191, help="random seed (default 191)")
    parser.add_argument("--out", type=Path, required=True, help="output: .jsonl, .jsonl.gz or .parquet")
    parser.add_argument("--cancel-every", type=int, default=CANCEL_BLOCK_RUNS,
                        help=f"one run in every N is cancelled by an operator (default {CANCEL_BLOCK_RUNS})")
    parser.add_argument("--metadata-every", type=int, default=0,
                        help="one run in every N is stored at the 'metadata' privacy level (default 0: none)")
    parser.add_argument("--tables", action="store_true",
                        help="also write the other tables beside --out, as tx_nrllm_agentrun<suffix> and so on")
    options = parser.parse_args(argv)
    if options.cancel_every < 1:
        parser.error(f"--cancel-every must be 1 or more, got {options.cancel_every!r}")
    if options.metadata_every < 0:
        parser.error(f"--metadata-every must be 0 or more, got {options.metadata_every!r}")
    if options.runs < 0:
        parser.error(f"--runs must be 0 or more, got {options.runs!r}")
    if not any(options.out.name.endswith(suffix) for suffix in WRITERS):
        parser.error(f"--out must end in one of {', '.join(WRITERS)}, got {str(options.out)!r}")
    began = time.perf_counter()
    rows = write_export(options.out, options.runs, options.seed, options.cancel_every, options.metadata_every,
                        tables=options.tables)
    seconds = time.perf_counter() - began
    print(f"{options.out}: {options.runs} runs, {rows} rows in {seconds:.1f} s", file=sys.stderr)
    if options.tables:
        for table, table_path in table_paths(options.out).items():
            print(f"{table_path}: the {table} table", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
