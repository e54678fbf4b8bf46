"""What a build is asked to do: the options every stage reads, and how progress is reported."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timezone, tzinfo
from pathlib import Path
from typing import Protocol
from urllib.parse import urlencode, urlsplit, urlunsplit
from zoneinfo import ZoneInfo

from .errors import InputError

LANGUAGES: tuple[str, ...] = ("en", "de")
DEFAULT_MIN_CALLS = 10
DEFAULT_FAILURE_BUDGET = 0.05
# Latency (issue 23): a call over its server's latency budget is slow; the slow budget is the share
# of slow calls a server may have; a call within 5 % of the call timeout is near it.
DEFAULT_LATENCY_BUDGET_SECONDS = 10.0
DEFAULT_SLOW_BUDGET = 0.05
DEFAULT_CALL_TIMEOUT_SECONDS = 20.0  # nr-llm's mcpOperationTimeout (ADR-170)

# ``timeline --format``: without it, the --out file's suffix says which (HTML otherwise).
TIMELINE_FORMATS: tuple[str, ...] = ("html", "md", "json")
TIMELINE_FORMAT_BY_SUFFIX: dict[str, str] = {".html": "html", ".htm": "html", ".md": "md", ".json": "json"}


def timeline_format(chosen: str | None, out_suffix: str) -> str:
    """The timeline's format: the one chosen, else the one the output file's suffix names, else HTML."""
    return chosen or TIMELINE_FORMAT_BY_SUFFIX.get(out_suffix.lower(), "html")


# The gate: verdicts --fail-on may list, and what --fail-on-change accepts.
GATE_VERDICTS: tuple[str, ...] = ("down", "flaky", "uncertain", "slow")
GATE_CHANGES: tuple[str, ...] = ("worse", "slower")
LATENCY_GATE_VERDICT = "slow"  # of GATE_VERDICTS, the one the latency verdict gives (aggregate.latency)
LATENCY_GATE_CHANGE = "slower"  # of GATE_CHANGES, the latency's
DEFAULT_CHANGE_WINDOW = 7


@dataclass(frozen=True)
class GateOptions:
    """Which servers fail the gate: verdicts listed in ``fail_on``, or a worse change within the window."""

    fail_on: tuple[str, ...] = ()
    fail_on_change: str | None = None
    change_window: int = DEFAULT_CHANGE_WINDOW
    fail_on_slower: bool = False  # --fail-on-change slower: a slower change within the window fails

    @property
    def failure_verdicts(self) -> tuple[str, ...]:
        """The verdicts of ``fail_on`` the failure rate gives (all but ``slow``)."""
        return tuple(value for value in self.fail_on if value != LATENCY_GATE_VERDICT)

    @property
    def fail_on_slow(self) -> bool:
        return LATENCY_GATE_VERDICT in self.fail_on


@dataclass(frozen=True)
class ReportFiles:
    """Files written beside a build or a gate: JUnit XML and a Markdown summary."""

    junit: Path | None = None
    markdown: Path | None = None


def default_jobs() -> int:
    """Processes a build uses by default: the CPUs, at most 8."""
    return max(1, min(os.cpu_count() or 1, 8))


@dataclass(frozen=True)
class BuildOptions:
    languages: tuple[str, ...] = LANGUAGES
    title: str | None = None
    timezone_name: str = "UTC"
    known_servers: tuple[str, ...] = ()
    min_calls: int = DEFAULT_MIN_CALLS
    force: bool = False
    jobs: int = 1
    archive: Path | None = None  # canonical records carried from build to build
    keep_days: int | None = None  # runs whose last step is older than the newest by more are dropped
    cache_dir: Path | None = None  # None: $XDG_CACHE_HOME/nrllm-report or ~/.cache/nrllm-report
    use_cache: bool = True
    failure_budget: float = DEFAULT_FAILURE_BUDGET
    failure_budgets: tuple[tuple[str, float], ...] = ()  # per server id, over the default
    gate: GateOptions = GateOptions()
    show_approvers: bool = False  # decidedBy is a backend user's id: not on a page unless asked for
    latency_budget: float = DEFAULT_LATENCY_BUDGET_SECONDS  # seconds: a call over it is slow
    latency_budgets: tuple[tuple[str, float], ...] = ()  # per server id, over the default
    slow_budget: float = DEFAULT_SLOW_BUDGET  # the share of slow calls a server may have
    call_timeout: float = DEFAULT_CALL_TIMEOUT_SECONDS  # seconds: within 5 % of it a call is near the timeout

    def budget_for(self, server: str) -> float:
        """The failure budget of ``server``: its own when given, else the default."""
        return budget_of(server, default=self.failure_budget, per_server=self.failure_budgets)

    def latency_budget_for(self, server: str) -> float:
        """The latency budget of ``server`` in seconds: its own when given, else the default."""
        return budget_of(server, default=self.latency_budget, per_server=self.latency_budgets)

    @property
    def zone(self) -> tzinfo:
        return timezone.utc if self.timezone_name == "UTC" else ZoneInfo(self.timezone_name)


class Progress(Protocol):
    def start(self, total: int) -> None: ...
    def advance(self, count: int) -> None: ...
    def finish(self) -> None: ...


class NoProgress:
    def start(self, total: int) -> None:
        pass

    def advance(self, count: int) -> None:
        pass

    def finish(self) -> None:
        pass


def parse_budgets(
    values: Iterable[str], *, default: float, accepts: Callable[[float], bool], expected: str,
) -> tuple[float, tuple[tuple[str, float], ...]]:
    """A budget option given as NUMBER (the default) and SERVER=NUMBER (one server's): the last
    default and the last value per server win; per-server values sorted by server. A value
    ``accepts`` refuses raises ValueError: "'value' is not EXPECTED"."""
    per_server: dict[str, float] = {}
    for value in values:
        server, _, number_text = value.rpartition("=")
        try:
            number = float(number_text)
        except ValueError:
            number = math.nan
        if not accepts(number) or (server == "" and "=" in value):
            raise ValueError(f"{value!r} is not {expected}")
        if server:
            per_server[server] = number
        else:
            default = number
    return default, tuple(sorted(per_server.items()))


def parse_failure_budgets(values: Iterable[str]) -> tuple[float, tuple[tuple[str, float], ...]]:
    """``--failure-budget`` given as RATE and SERVER=RATE, each a rate in [0, 1]."""
    return parse_budgets(values, default=DEFAULT_FAILURE_BUDGET, accepts=lambda rate: 0.0 <= rate <= 1.0,
                         expected="a rate from 0 to 1 (RATE or SERVER=RATE, e.g. 0.05)")


def parse_latency_budgets(values: Iterable[str]) -> tuple[float, tuple[tuple[str, float], ...]]:
    """``--latency-budget`` given as SECONDS and SERVER=SECONDS, each above 0 (as ``--failure-budget``)."""
    return parse_budgets(values, default=DEFAULT_LATENCY_BUDGET_SECONDS,
                         accepts=lambda seconds: 0.0 < seconds < math.inf,
                         expected="a number of seconds above 0 (SECONDS or SERVER=SECONDS, e.g. 10)")


def budget_of(server: str, *, default: float, per_server: tuple[tuple[str, float], ...]) -> float:
    """A budget of ``server``: its own when given, else the default."""
    return dict(per_server).get(server, default)


# --db URL: the password is never in the URL on the command line, but in this variable
# (or the one --db-env names, carried along in the URL as a parameter: a name, never the value).
# The variable holds the password, or the whole URL with it (then --db may be left out).
DEFAULT_PASSWORD_ENV = "NRLLM_REPORT_DB"
PASSWORD_ENV_PARAMETER = "password-env"
TABLE_PREFIX_PARAMETER = "table-prefix"
DEFAULT_TABLE_PREFIX = "tx_"


def database_input_name(url: str, *, password_env: str | None, prefix: str | None = None) -> str:
    """The INPUT a ``--db URL`` (with its ``--db-env VAR`` and ``--db-prefix PREFIX``) stands for."""
    parameters = {}
    if password_env and password_env != DEFAULT_PASSWORD_ENV:
        parameters[PASSWORD_ENV_PARAMETER] = password_env
    if prefix is not None and prefix != DEFAULT_TABLE_PREFIX:
        parameters[TABLE_PREFIX_PARAMETER] = prefix
    if not parameters:
        return url
    return f"{url}{'&' if '?' in url else '?'}{urlencode(parameters)}"


def database_urls(urls: tuple[str, ...], *, password_env: str | None, prefix: str | None) -> tuple[str, ...]:
    """The INPUTs ``--db``, ``--db-env`` and ``--db-prefix`` stand for. ``--db-env VAR`` without
    ``--db`` reads the URL from VAR (its password kept there: the INPUT names the variable)."""
    if not urls and password_env:
        value = os.environ.get(password_env, "")
        if "://" not in value:
            raise InputError(f"--db-env {password_env}", "without --db the variable must hold the database's "
                             "URL (e.g. mysql://USER:PASSWORD@HOST/DB), and it "
                             + ("is not set" if not value else "holds no URL"))
        parts = urlsplit(value)
        netloc = parts.netloc.rsplit("@", 1)
        user = netloc[0].split(":", 1)[0] + "@" if len(netloc) == 2 else ""
        urls = (urlunsplit((parts.scheme, user + netloc[-1], parts.path, parts.query, "")),)
    return tuple(database_input_name(url, password_env=password_env, prefix=prefix) for url in urls)
