"""``diff``'s three outputs: a plain-text table, JSON (schema in docs/reference.md) and Markdown."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..aggregate.compare import SIGNIFICANCE_LEVEL, Decision
from ..aggregate.diff import DiffReport, DiffRow, Presence, Side
from ..aggregate.latency_diff import SlowDiffRow
from ..aggregate.verdicts import Proportion
from ..core.model import N_, Outcome
from ..site.kit import PageKit
from ..site.markdown import MarkdownDocument, escape_cell
from ..site.table_rows import rate_text
from .plain_text import aligned, interval_text, percent
from .safe_text import printable

METHOD = "fisher-exact-two-sided"
RESULT_LABELS: dict[str, str] = {
    Decision.WORSE.value: N_("significantly worse"),
    Decision.BETTER.value: N_("significantly better"),
    Decision.UNCHANGED.value: N_("unchanged"),
    Presence.APPEARED.value: N_("appeared"),
    Presence.VANISHED.value: N_("vanished"),
}
MARKDOWN_TOOL_ROWS = 200


def result_key(row: DiffRow) -> str:
    return row.result.value


# ---------------------------------------------------------------- JSON


def diff_json(report: DiffReport) -> str:
    diff = report.diff
    document = {
        "method": METHOD,
        "level": SIGNIFICANCE_LEVEL,
        "baseline": report.baseline.to_json(),
        "current": report.current.to_json(),
        "worse": diff.worse_servers,
        "better": diff.servers_with(Decision.BETTER),
        "appeared": diff.servers_with(Presence.APPEARED),
        "vanished": diff.servers_with(Presence.VANISHED),
        "servers": [row.to_json() for row in diff.servers],
        "tools": [row.to_json() for row in diff.tools],
        "slower": diff.slower_servers,
        "slow_servers": [row.to_json() for row in diff.slow_servers],
        "slow_tools": [row.to_json() for row in diff.slow_tools],
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


# ---------------------------------------------------------------- plain text


def _side_text(side: Side) -> str:
    if side.calls == 0:
        return "no calls"
    interval = "" if side.interval is None else f" ({interval_text(side.interval)})"
    return (f"{side.failed}/{side.ok + side.failed} failed, {side.cancelled} cancelled: "
            f"{percent(side.failure_rate)}{interval}")


def _change_text(row: DiffRow) -> str:
    return "" if row.change is None else f"{row.change * 100:+.1f} pts"


def _text_table(rows: Sequence[DiffRow], with_tool: bool) -> list[str]:
    header = ["server", *(["tool"] if with_tool else []), "baseline", "current", "change", "p", "result"]
    lines = [header]
    for row in rows:
        p_value = "" if row.p_value is None else f"{row.p_value:.4g}"
        lines.append([printable(row.server), *([printable(row.tool or "")] if with_tool else []),
                      _side_text(row.baseline), _side_text(row.current), _change_text(row), p_value, result_key(row)])
    return aligned(lines)


def diff_text(report: DiffReport) -> str:
    diff = report.diff
    counts = {key: sum(1 for row in diff.servers if result_key(row) == key) for key in RESULT_LABELS}
    lines = [
        f"Baseline: {report.baseline.rows_read} rows ({report.baseline.rows_rejected} rejected); "
        f"current: {report.current.rows_read} rows ({report.current.rows_rejected} rejected).",
        f"Servers: {counts['worse']} significantly worse, {counts['better']} significantly better, "
        f"{counts['unchanged']} unchanged, {counts['appeared']} appeared, {counts['vanished']} vanished "
        "(Fisher's exact test, two-sided, 5 %).",
    ]
    if diff.servers:
        lines += ["", *_text_table(diff.servers, with_tool=False)]
    if diff.tools:
        lines += ["", *_text_table(diff.tools, with_tool=True)]
    if diff.slow_servers:
        lines += ["", f"Slow share (calls over the latency budget), same test: {len(diff.slower_servers)} "
                      "servers significantly slower.", *_slow_text_table(diff.slow_servers)]
    return "\n".join(lines) + "\n"


def _slow_side_text(side: Proportion) -> str:
    return "no timed calls" if not side.trials else f"{side.events}/{side.trials} slow: {percent(side.rate)}"


def _slow_text_table(rows: Sequence[SlowDiffRow]) -> list[str]:
    lines = [["server", "baseline", "current", "change", "p", "result"]]
    for row in rows:
        decision = row.to_json()["decision"] or "-"
        lines.append([printable(row.server), _slow_side_text(row.baseline), _slow_side_text(row.current),
                      "" if row.change is None else f"{row.change * 100:+.1f} pts",
                      "" if row.p_value is None else f"{row.p_value:.4g}", decision])
    return aligned(lines)


# ---------------------------------------------------------------- Markdown


class DiffCells:
    """A diff row's cells in one language."""

    def __init__(self, kit: PageKit) -> None:
        self.kit = kit
        self.results = {key: kit.gettext(label) for key, label in RESULT_LABELS.items()}

    def rate(self, side: Side) -> str:
        return rate_text(side.failures, self.kit)

    def calls(self, side: Side) -> str:
        number, labels = self.kit.format.number, self.kit.outcome_labels
        return (f"{number(side.calls)} ({labels[Outcome.OK]} {number(side.ok)}, "
                f"{labels[Outcome.FAILED]} {number(side.failed)}, "
                f"{labels[Outcome.CANCELLED]} {number(side.cancelled)})")

    def change(self, row: DiffRow) -> str:
        if row.change is None:
            return ""
        points = round(row.change * 100, 1)
        sign = "+" if points > 0 else "−" if points < 0 else ""
        return self.kit.gettext("%(points)s points") % {"points": sign + self.kit.format.number(abs(points))}

    def row(self, row: DiffRow, with_tool: bool) -> list[str]:
        result = self.results[result_key(row)]
        return [escape_cell(row.server), *([escape_cell(row.tool)] if with_tool else []),
                self.calls(row.baseline), self.rate(row.baseline), self.calls(row.current), self.rate(row.current),
                self.change(row), f"**{result}**" if row.is_worse else result]


def _headers(kit: PageKit, with_tool: bool) -> list[str]:
    _ = kit.gettext
    return [_("Server"), *([_("Tool")] if with_tool else []), _("Calls (baseline)"), _("Failure rate (baseline)"),
            _("Calls (current)"), _("Failure rate (current)"), _("Change"), _("Result")]


def diff_markdown(kit: PageKit, report: DiffReport) -> str:
    """The comparison for a merge-request comment: worse servers first, then the tools."""
    _ = kit.gettext
    diff, cells = report.diff, DiffCells(kit)
    document = MarkdownDocument()
    document.heading(2, _("Comparison of two exports"))
    worse = len(diff.worse_servers)
    document.paragraph(
        kit.ngettext("%(count)s server is significantly worse.", "%(count)s servers are significantly worse.", worse)
        % {"count": kit.format.number(worse)} if worse else _("No server is significantly worse.")
    )
    document.paragraph(_("Failure rate = failed / (ok + failed), with its Wilson 95 %% interval; cancelled calls "
                         "never count. Compared with Fisher's exact test, two-sided, at 5 %%.") % {})
    document.heading(3, _("Servers"))
    document.table(_headers(kit, False), (cells.row(row, False) for row in diff.servers), total=len(diff.servers),
                   left_out=kit.rows_left_out)
    document.heading(3, _("Tools"))
    document.table(_headers(kit, True), (cells.row(row, True) for row in diff.tools), total=len(diff.tools),
                   left_out=kit.rows_left_out, max_rows=MARKDOWN_TOOL_ROWS)
    _slow_section(kit, document, rows=diff.slow_servers)
    return document.text()


SLOW_DECISIONS = {"slower": N_("significantly slower"), "faster": N_("significantly faster"),
                  "unchanged": N_("unchanged")}


def _slow_section(kit: PageKit, document: MarkdownDocument, *, rows: Sequence[SlowDiffRow]) -> None:
    """The servers' slow shares compared, with the failure rates' test."""
    _ = kit.gettext
    if not rows:
        return
    document.heading(3, _("Slow share"))
    document.paragraph(_("Slow share = calls over the latency budget / ok and failed calls above 0 ms, compared "
                         "with the same test."))
    table = ([escape_cell(row.server), rate_text(row.baseline, kit), rate_text(row.current, kit),
              _(SLOW_DECISIONS[decision]) if (decision := row.to_json()["decision"]) else "–"] for row in rows)
    document.table([_("Server"), _("Slow share (baseline)"), _("Slow share (current)"), _("Result")], table,
                   total=len(rows), left_out=kit.rows_left_out)
