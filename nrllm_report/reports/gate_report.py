"""What the gate says, for people and for CI: stderr lines, ``gate``'s table (text or JSON),
JUnit XML for test reporters, and a Markdown summary for a step summary or a merge request.

Every output reads one ``GateResult`` (aggregate/gate.py), so none can disagree with the
exit code. The lines, the table and the JUnit messages are English, like every message
on the command line; the Markdown is in the first language of ``--lang``.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..aggregate.gate import GateFailure, GateResult, Reason, SlowFailure
from ..aggregate.health import RateChange, ServerHealth
from ..aggregate.latencies import ServerLatency
from ..aggregate.latency import Latency
from ..aggregate.verdicts import interval_json
from ..core.model import N_, Outcome, Problem, Severity, Verdict
from ..core.options import LATENCY_GATE_CHANGE, LATENCY_GATE_VERDICT
from ..site.kit import PageKit
from ..site.latency import latency_label, percentile_text
from ..site.markdown import MarkdownDocument, escape_cell
from ..site.table_rows import change_since_text, rate_text
from .plain_text import aligned, interval_text, percent
from .safe_text import printable, xml_safe

JUNIT_SUITE = "mcp-servers"
JUNIT_CLASSNAME = "nrllm.servers"
MARKDOWN_CHANGES = 50
MARKDOWN_PROBLEMS = 50


@dataclass(frozen=True)
class GateReport:
    """The gate and the rows it was judged on."""

    gate: GateResult
    rows_read: int
    rows_rejected: int
    problems: Sequence[Problem]
    min_calls: int
    latencies: Mapping[str, ServerLatency] = field(default_factory=dict)  # servers without timed calls absent

    def latency(self, server: str) -> Latency | None:
        """A server's latency figures of its current latency period, or None without calls."""
        found = self.latencies.get(server)
        return None if found is None else found.latency


def latest_change_text(health: ServerHealth) -> str:
    change = health.latest_change
    return "-" if change is None else f"{change.direction.value} since {change.day.isoformat()}"


def slow_text(slow: SlowFailure) -> str:
    """Why a server fails for its latency, as the lines say it."""
    cause = "slow" if slow.change_day is None else f"slower since {slow.change_day.isoformat()}"
    return (f"{cause}: slow share {percent(slow.slow.rate)} ({interval_text(slow.slow.interval)}) of calls over "
            f"{slow.latency_budget_ms / 1000:g} s, slow budget {percent(slow.slow_budget)}")


def failure_line(failure: GateFailure) -> str:
    """One failing server, as stderr and the JUnit message say it."""
    if failure.reason in (Reason.SLOW, Reason.SLOWER) and failure.slow is not None:
        return f"{printable(failure.server)}: {slow_text(failure.slow)} (verdict {failure.verdict.value})"
    if failure.reason is Reason.VERDICT:
        cause = f"verdict {failure.verdict.value}"
    else:
        cause = (f"worse since {failure.change_day.isoformat() if failure.change_day else '-'} "
                 f"(verdict {failure.verdict.value})")
    also = "" if failure.slow is None else f"; {slow_text(failure.slow)}"
    return (f"{printable(failure.server)}: {cause}, failure rate {percent(failure.failures.rate)} "
            f"({interval_text(failure.failures.interval)}), budget {percent(failure.failure_budget)}{also}")


def stderr_lines(gate: GateResult) -> list[str]:
    return [f"gate failed: {failure_line(failure)}" for failure in gate.failures]


# ---------------------------------------------------------------- gate's own table


def gate_text(report: GateReport) -> str:
    gate = report.gate
    rows = [["server", "verdict", "current rate", "interval", "budget", "latest change", "gate"]]
    failing = gate.failed_servers
    for health in gate.servers:
        rows.append([printable(health.server), health.verdict.value, percent(health.current.failures.rate),
                     interval_text(health.current.failures.interval), percent(health.failure_budget),
                     latest_change_text(health), "FAIL" if health.server in failing else "pass"])
    lines = aligned(rows)
    verdict = "passed" if gate.passed else f"failed: {len(gate.failures)} of {len(gate.servers)} servers fail"
    lines.append(f"Gate {verdict}. {report.rows_read} rows read, {report.rows_rejected} rejected.")
    return "\n".join(lines) + "\n"


def gate_json(report: GateReport) -> str:
    failing = report.gate.failed_servers
    servers = [
        {
            "server": health.server, "verdict": health.verdict.value,
            "failure_rate": health.current.failures.rate,
            "interval": interval_json(health.current.failures.interval),
            "failure_budget": health.failure_budget,
            "latest_change": None if health.latest_change is None else {
                "day": health.latest_change.day.isoformat(), "direction": health.latest_change.direction.value},
            "fails": health.server in failing,
        }
        for health in report.gate.servers
    ]
    document = {"gate": report.gate.to_json(), "servers": servers, "rows_read": report.rows_read,
                "rows_rejected": report.rows_rejected}
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


# ---------------------------------------------------------------- JUnit XML


def _counts_text(health: ServerHealth, latency: Latency | None) -> str:
    current = health.current
    since = current.since.isoformat() if current.since else "the first day"
    return (f"verdict {health.verdict.value} on the calls since {since}: {current.ok} ok, {current.failed} failed, "
            f"failure rate {percent(current.failures.rate)} ({interval_text(current.failures.interval)}), "
            f"budget {percent(health.failure_budget)}; latest change: {latest_change_text(health)}"
            f"{'' if latency is None else '; ' + latency_text(latency)}")


def seconds_text(milliseconds: float | None) -> str:
    """A duration in seconds to the hundredth, as JUnit's texts say it; a dash without one."""
    return "-" if milliseconds is None else f"{milliseconds / 1000:.2f} s"


def latency_text(latency: Latency) -> str:
    """A server's latency of its current latency period, as JUnit's texts say it."""
    since = latency.since.isoformat() if latency.since else "the first day"
    p90 = latency.timed.p90
    interval = "" if p90.interval_ms is None else (
        f" ({seconds_text(p90.interval_ms[0])}-{seconds_text(p90.interval_ms[1])})")
    return (f"latency verdict {latency.verdict.value} on the {latency.timed.calls} timed calls since {since}: "
            f"p90 {seconds_text(p90.value_ms)}{interval}, slow share {percent(latency.slow.rate)} "
            f"({interval_text(latency.slow.interval)}) of calls over {latency.settings.latency_budget_ms / 1000:g} s, "
            f"slow budget {percent(latency.settings.slow_budget)}")


def _latency_properties(server: str, latency: Latency | None) -> list[tuple[str, Any]]:
    """A server's latency properties: its latency verdict, p90 and slow share (empty without timed calls)."""
    if latency is None:
        return []
    return [(f"{server}.{name}", "" if value is None else value) for name, value in (
        ("latency_verdict", latency.verdict.value), ("p90_ms", latency.timed.p90.value_ms),
        ("slow_rate", latency.slow.rate), ("slow_budget", latency.settings.slow_budget),
        ("latency_budget_ms", latency.settings.latency_budget_ms))]


def _suite_properties(report: GateReport, suite: ElementTree.Element) -> None:
    gate = report.gate
    verdicts = Counter(health.verdict.value for health in gate.servers)
    values: list[tuple[str, Any]] = [
        ("gate.passed", str(gate.passed).lower()),
        ("gate.fail_on", ",".join([*(verdict.value for verdict in gate.fail_on),
                                   *([LATENCY_GATE_VERDICT] if gate.fail_on_slow else [])])),
        ("gate.fail_on_change", ",".join([*([gate.fail_on_change] if gate.fail_on_change else []),
                                          *([LATENCY_GATE_CHANGE] if gate.fail_on_slower else [])])),
        ("gate.change_window", gate.change_window),
        ("rows_read", report.rows_read),
        ("rows_rejected", report.rows_rejected),
        ("servers", len(gate.servers)),
        *((f"verdict.{verdict.value}", verdicts[verdict.value]) for verdict in Verdict),
    ]
    for health in gate.servers:
        values += [(f"{health.server}.{name}", value) for name, value in (
            ("verdict", health.verdict.value), (Outcome.OK.value, health.current.ok),
            (Outcome.FAILED.value, health.current.failed), ("failure_budget", health.failure_budget))]
        values += _latency_properties(health.server, report.latency(health.server))
    properties = ElementTree.SubElement(suite, "properties")
    for name, value in values:
        ElementTree.SubElement(properties, "property", name=xml_safe(name), value=xml_safe(str(value)))


def junit_xml(report: GateReport, now: datetime | None = None) -> str:
    """One ``testsuite`` named ``mcp-servers``, one ``testcase`` per server (worst first)."""
    gate, failing = report.gate, report.gate.failed_servers
    skipped = [h for h in gate.servers if h.verdict is Verdict.TOO_FEW_CALLS and h.server not in failing]
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%S")
    counts = {"tests": len(gate.servers), "failures": len(gate.failures), "errors": 0, "skipped": len(skipped)}
    root = ElementTree.Element("testsuites", {"name": "nrllm-report", "time": "0", **{
        key: str(value) for key, value in counts.items() if key != "skipped"}})
    suite = ElementTree.SubElement(root, "testsuite", {"name": JUNIT_SUITE, "time": "0", "timestamp": stamp, **{
        key: str(value) for key, value in counts.items()}})
    _suite_properties(report, suite)
    for health in gate.servers:
        case = ElementTree.SubElement(suite, "testcase", name=xml_safe(health.server), classname=JUNIT_CLASSNAME,
                                      time="0")
        counts_text = _counts_text(health, report.latency(health.server))
        if health.server in failing:
            failure = failing[health.server]
            element = ElementTree.SubElement(case, "failure", type=failure.reason.value,
                                             message=xml_safe(failure_line(failure)))
            element.text = counts_text
        elif health.verdict is Verdict.TOO_FEW_CALLS:
            ElementTree.SubElement(case, "skipped", message=(
                f"too-few-calls: {health.current.failures.trials} ok or failed calls, "
                f"fewer than --min-calls {report.min_calls}"))
        ElementTree.SubElement(case, "system-out").text = counts_text
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# ---------------------------------------------------------------- Markdown


def _gate_section(kit: PageKit, document: MarkdownDocument, *, gate: GateResult) -> None:
    _ = kit.gettext
    if gate.passed:
        document.heading(2, "✅ " + _("Gate passed"))
        return
    document.heading(2, "❌ " + kit.ngettext("Gate failed: %(count)s server fails",
                                             "Gate failed: %(count)s servers fail",
                                             len(gate.failures)) % {"count": kit.format.number(len(gate.failures))})
    reasons = {Reason.VERDICT: _(N_("verdict")), Reason.CHANGE: _(N_("worse change")),
               Reason.SLOW: _(N_("slow")), Reason.SLOWER: _(N_("slower change"))}
    rows = [[escape_cell(failure.server), reasons[failure.reason], kit.verdict_labels[failure.verdict.value],
             rate_text(failure.failures, kit), kit.format.percent(failure.failure_budget),
             kit.format.date(failure.change_day) if failure.change_day else "–"] for failure in gate.failures]
    headers = [_("Server"), _("Reason"), _("Verdict"), _("Failure rate"), _("Failure budget"), _("Change")]
    if any(failure.slow is not None for failure in gate.failures):
        headers += [_("Slow share"), _("Slow budget"), _("Slower since")]
        for row, failure in zip(rows, gate.failures):
            row += _slow_cells(kit, failure.slow)
    document.table(headers, rows, total=len(rows), left_out=kit.rows_left_out)


def _slow_cells(kit: PageKit, slow: SlowFailure | None) -> list[str]:
    """A failure's latency cells in the Markdown table: its slow share, the slow budget, the change's day."""
    if slow is None:
        return ["–", "–", "–"]
    return [rate_text(slow.slow, kit), kit.format.percent(slow.slow_budget),
            kit.format.date(slow.change_day) if slow.change_day else "–"]


def _servers_section(kit: PageKit, document: MarkdownDocument, *, report: GateReport) -> None:
    _ = kit.gettext
    document.heading(3, _("Servers, worst first"))
    servers = report.gate.servers
    rows = ([escape_cell(health.server), kit.verdict_labels[health.verdict.value],
             rate_text(health.current.failures, kit),
             kit.format.percent(health.failure_budget), change_since_text(health.latest_change, kit),
             *_latency_cells(kit, report.latency(health.server))]
            for health in servers)
    document.table([_("Server"), _("Verdict"), _("Current failure rate"), _("Failure budget"), _("Latest change"),
                    _("Latency verdict"), "p90", _("Slow share")],
                   rows, total=len(servers), left_out=kit.rows_left_out)


def _latency_cells(kit: PageKit, latency: Latency | None) -> list[str]:
    """A server's latency cells in the Markdown servers table: its latency verdict, p90 and slow share."""
    if latency is None:
        return ["–", "–", "–"]
    return [latency_label(kit, latency.verdict), percentile_text(latency.timed.p90, kit),
            rate_text(latency.slow, kit)]


def _changes_section(kit: PageKit, document: MarkdownDocument, *, gate: GateResult) -> None:
    _ = kit.gettext
    changes: list[tuple[str, RateChange]] = sorted(
        ((health.server, change) for health in gate.servers for change in health.changes),
        key=lambda item: (-item[1].day.toordinal(), item[0]))
    document.heading(3, _("Latest changes"))
    if not changes:
        document.paragraph(_("None."))
        return
    fmt = kit.format
    rows = ([escape_cell(server), change_since_text(change, kit),
             f"{fmt.date(change.earliest)} – {fmt.date(change.latest)}",
             f"{fmt.percent(change.before.rate)} → {fmt.percent(change.after.rate)}", fmt.percent(change.probability)]
            for server, change in changes)
    document.table([_("Server"), _("Change"), _("Range"), _("Before → after"), _("How sure")], rows, total=len(changes),
                   left_out=kit.rows_left_out, max_rows=MARKDOWN_CHANGES)


def _rejected_section(kit: PageKit, document: MarkdownDocument, *, report: GateReport) -> None:
    _ = kit.gettext
    document.heading(3, _("Rows rejected"))
    document.paragraph(_("%(rejected)s of %(read)s rows rejected.") % {
        "rejected": kit.format.number(report.rows_rejected), "read": kit.format.number(report.rows_read)})
    errors = [problem for problem in report.problems if problem.severity is Severity.ERROR]
    rows = ([escape_cell(problem.input), kit.format.number(problem.row), problem.rule.value,
             escape_cell(problem.text(kit.gettext))] for problem in errors)
    if errors:
        document.table([_("Input"), _("Row"), _("Rule"), _("Message")], rows, total=len(errors),
                       left_out=kit.rows_left_out,
                       max_rows=MARKDOWN_PROBLEMS)


def gate_markdown(kit: PageKit, report: GateReport) -> str:
    """The gate's result first, the servers worst first, the latest changes, the rows rejected."""
    document = MarkdownDocument()
    _gate_section(kit, document, gate=report.gate)
    document.paragraph(escape_cell(kit.title))
    _servers_section(kit, document, report=report)
    _changes_section(kit, document, gate=report.gate)
    _rejected_section(kit, document, report=report)
    return document.text()
