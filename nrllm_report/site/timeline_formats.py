"""A run's timeline for a ticket: Markdown (facts and steps table) and JSON (the canonical steps).

The columns come from the schema: the steps table shows ``TIMELINE_COLUMNS`` (the
first eight as columns of their own, every other one as a labelled detail) and the
JSON holds ``CANONICAL_SCHEMA``'s fields, so a fact added to the canonical step
reaches both. ``decidedBy`` (who approved) appears only when asked for, as nr-llm
shows it only to users allowed to open the run.

A denied call (``aggregate.denials``) keeps its outcome ``failed``: the JSON's ``steps``
stay the canonical records, and a ``denials`` list beside them names each denied step's
sequence and what denied it; the Markdown says it in the outcome cell.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..aggregate.figures import RunSummary
from ..aggregate.whole_run import CallRow, DecisionRow, RunHeader
from ..core.model import N_, Outcome
from ..core.schema import CANONICAL_SCHEMA, DENIAL_COLUMN, TIMELINE_COLUMNS
from .kit import PageKit
from .labels import DECISION_LABEL_KEYS, label
from .markdown import MarkdownDocument, escape_cell
from .run_header import header_facts
from .timeline_facts import COUNT_FACT_LABELS, DROPPED_SOURCES, FACT_ORDER, LENGTH_FACT_LABELS, LISTED_FACT_LABELS
from .whole_run import merged_order

APPROVER_COLUMN = "decidedBy"
USER_ID_COLUMNS = frozenset({APPROVER_COLUMN})
# The columns the steps table shows on their own; every other timeline column is a detail.
OWN_COLUMNS = ("sequence", "crdate", "kind", "round", "durationMs", "toolName", "server", "outcome")
# A count and the names it counts make one detail, as on a run page: "Requested tool calls 2: a, b".
NAMES_OF = {count: names for count, names, _label in (*LISTED_FACT_LABELS, DROPPED_SOURCES) if names}
LENGTHS = frozenset(column for column, _label in LENGTH_FACT_LABELS)
DETAIL_LABELS: dict[str, str] = {
    **dict(COUNT_FACT_LABELS),
    **{count: label for count, _names, label in (*LISTED_FACT_LABELS, DROPPED_SOURCES)},
    **dict(LENGTH_FACT_LABELS),
    "finishReason": N_("Finish reason"),
    "estimatedCost": N_("Cost"),
    "contentRedacted": N_("Content redacted"),
    "approved": N_("Approved"),
    "decidedBy": N_("Decided by"),
}
STEP_HEADERS = ("#", N_("Time"), N_("Kind"), N_("Round"), N_("Duration"), N_("Tool"), N_("Server"), N_("Outcome"),
                N_("Details"))


def detail_columns(show_approvers: bool) -> tuple[str, ...]:
    """The timeline columns shown as details (names with their count), in a run page's order;
    a column the page does not know yet comes last, in the schema's order."""
    columns = [column for column in TIMELINE_COLUMNS if column not in OWN_COLUMNS and column not in NAMES_OF.values()]
    ordered = sorted(columns, key=lambda column: FACT_ORDER.index(column) if column in FACT_ORDER else len(FACT_ORDER))
    return tuple(column for column in ordered if show_approvers or column != APPROVER_COLUMN)


def record_columns(show_approvers: bool) -> tuple[str, ...]:
    """The canonical fields a JSON timeline holds for each step."""
    return tuple(name for name in CANONICAL_SCHEMA.names if show_approvers or name != APPROVER_COLUMN)


def in_sequence_order(steps: pa.Table) -> pa.Table:
    return steps.sort_by([("sequence", "ascending")])


# ---------------------------------------------------------------- JSON


def timeline_json(summary: RunSummary, steps: pa.Table, *, show_approvers: bool, header: RunHeader | None = None,
                  calls: Sequence[CallRow] = (), decisions: Sequence[DecisionRow] = ()) -> str:
    """The run's facts, its run row's ``header`` (null without one), its canonical steps in
    sequence order (camelCase, as ``normalize`` writes), the denied calls among them
    (``denials``) with the count beside the outcomes (``denied``), and its ``entries``: the
    steps, provider calls and governance decisions merged as nr-llm's timeline orders them."""
    ordered = in_sequence_order(steps)
    records = ordered.select(list(record_columns(show_approvers))).to_pylist()
    document = {
        "run": summary.run,
        "start": summary.start,
        "end": summary.end,
        "durationMs": summary.duration_ms,
        "stepCount": summary.steps,
        "toolCalls": summary.tool_calls,
        "outcomes": {outcome.value: summary.counts.of(outcome) for outcome in Outcome},
        "denied": summary.counts.denied,
        "servers": list(summary.servers),
        "steps": records,
        "denials": denial_records(ordered),
        "header": header.to_json() if header is not None else None,
        "entries": timeline_entries(records, calls, decisions=decisions),
    }
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def timeline_entries(records: Sequence[dict[str, Any]], calls: Sequence[CallRow],
                     *, decisions: Sequence[DecisionRow]) -> list[dict[str, Any]]:
    """Every row of the run as ``{source, time, sequence, kind, round, durationMs, outcome, details}``."""
    entries = []
    keys = [(record["crdate"], record["sequence"]) for record in records]
    for source, position in merged_order(keys, calls, decisions=decisions):
        if source == "step":
            record = records[position]
            details = {key: record[name] for key, name in (("tool", "toolName"), ("server", "server"))
                       if record.get(name) is not None}
            entries.append({"source": "step", "time": record["crdate"], "sequence": record["sequence"],
                            "kind": record["kind"], "round": record["round"], "durationMs": record["durationMs"],
                            "outcome": record["outcome"], "details": details})
        elif source == "call":
            entries.append(call_entry(calls[position]))
        else:
            entries.append(decision_entry(decisions[position]))
    return entries


def call_entry(call: CallRow) -> dict[str, Any]:
    """A provider call as nr-llm's timeline has it: its details under upstream's keys."""
    details: dict[str, Any] = {"provider": call.provider, "model": call.model}
    if call.swapped:
        details.update(servedProvider=call.served_provider, servedModel=call.served_model)
    details.update(latencyMs=call.latency_ms, ttftMs=call.ttft_ms, cacheHit=call.cache_hit,
                   fallbackAttempts=call.fallback_attempts, errorClass=call.error_class)
    return {"source": "call", "time": call.crdate, "sequence": None, "kind": call.operation, "round": None,
            "durationMs": call.latency_ms, "outcome": "ok" if call.success else "failed", "details": details}


def decision_entry(decision: DecisionRow) -> dict[str, Any]:
    details = {"reason": decision.reason, "tool": decision.tool, "guardrail": decision.guardrail,
               "detail": decision.detail}
    return {"source": "governance", "time": decision.crdate, "sequence": None, "kind": decision.decision,
            "round": None, "durationMs": None, "outcome": "failed", "details": details}


def denial_records(steps: pa.Table) -> list[dict[str, Any]]:
    """Each denied step's sequence, tool and denial (``operator`` or ``policy``), in the table's order."""
    if DENIAL_COLUMN not in steps.column_names:
        return []
    denied = steps.filter(pc.is_valid(steps.column(DENIAL_COLUMN)))
    return denied.select(["sequence", "toolName", DENIAL_COLUMN]).to_pylist()


# ---------------------------------------------------------------- Markdown


class DetailText:
    """How one language writes a step's details: ``Label value`` pairs joined by ``; ``."""

    def __init__(self, kit: PageKit, columns: Sequence[str]) -> None:
        _ = kit.gettext
        self.kit = kit
        self.columns = columns
        self.labels = {column: _(DETAIL_LABELS[column]) if column in DETAIL_LABELS else column for column in columns}
        self.flags = {True: _(N_("yes")), False: _(N_("no"))}

    def value(self, column: str, value: Any) -> str:
        fmt = self.kit.format
        if isinstance(value, bool):
            return self.flags[value]
        if column in USER_ID_COLUMNS:
            return str(value)  # a backend user's id, never a quantity: 987654321, not 987,654,321
        if column == "estimatedCost" and isinstance(value, (int, float)):
            return fmt.cost(value)
        if column in LENGTHS:
            return self.kit.ngettext("%(num)s character", "%(num)s characters", value) % {"num": fmt.number(value)}
        if isinstance(value, (int, float)):
            return fmt.number(value)
        if isinstance(value, (list, tuple)):
            return ", ".join(escape_cell(item) for item in value)
        return escape_cell(value)

    def detail(self, column: str, record: dict[str, Any]) -> str | None:
        """One detail: a value, or a count and the names it counts; None when there is neither."""
        shown = [self.value(column, record[column])] if record.get(column) is not None else []
        names = record.get(NAMES_OF.get(column, ""))
        if names:
            shown.append(self.value(NAMES_OF[column], names))
        return f"{self.labels[column]} {': '.join(shown)}" if shown else None

    def of(self, record: dict[str, Any]) -> str:
        return "; ".join(detail for column in self.columns if (detail := self.detail(column, record)) is not None)


def step_cells(kit: PageKit, record: dict[str, Any], *, details: DetailText) -> list[str]:
    """One step as table cells: outcomes and kinds as words in the kit's language."""
    fmt = kit.format
    kind = record["kind"]
    outcome = record["outcome"]
    shown_outcome = kit.outcome_labels[outcome] if outcome else "–"
    if record.get(DENIAL_COLUMN):
        shown_outcome = f"{shown_outcome} ({kit.denial_labels[record[DENIAL_COLUMN]]})"
    return [
        str(record["sequence"]),
        fmt.time(record["crdate"]),
        kit.kind_labels.get(kind) or escape_cell(kind),
        fmt.number(record["round"]),
        fmt.duration(record["durationMs"]) if record["durationMs"] else "",
        escape_cell(record["toolName"]),
        escape_cell(record["server"]),
        shown_outcome,
        details.of(record),
    ]


def merged_cells(kit: PageKit, records: list[dict[str, Any]], *, details: DetailText, calls: Sequence[CallRow],
                 decisions: Sequence[DecisionRow]) -> Any:
    """The merged timeline as table cells, each row opening with its source."""
    _, fmt = kit.gettext, kit.format
    keys = [(record["crdate"], record["sequence"]) for record in records]
    for source, position in merged_order(keys, calls, decisions=decisions):
        if source == "step":
            yield [_("source.step"), *step_cells(kit, records[position], details=details)]
            continue
        entry = call_entry(calls[position]) if source == "call" else decision_entry(decisions[position])
        shown = "; ".join(f"{_(DETAIL_NAMES[key])} {_detail(kit, key, value=value)}"
                          for key, value in entry["details"].items() if value is not None and value != "")
        kind = entry["kind"] or ""
        if source == "governance":
            kind = label(kit, DECISION_LABEL_KEYS, value=kind)
        yield [_(f"source.{source}"), "", fmt.time(entry["time"]), escape_cell(kind), "",
               fmt.duration(entry["durationMs"]) if entry["durationMs"] is not None else "", "", "",
               kit.outcome_labels[entry["outcome"]], shown]


DETAIL_NAMES = {
    "provider": N_("Provider"), "model": N_("Model"), "servedProvider": N_("Served by"),
    "servedModel": N_("Served model"), "latencyMs": N_("Latency"), "ttftMs": N_("Time to first token"),
    "cacheHit": N_("Cache hit"), "fallbackAttempts": N_("Fallback attempts"), "errorClass": N_("Error class"),
    "reason": N_("Reason"), "tool": N_("Tool"), "guardrail": N_("Guardrail"), "detail": N_("Detail"),
}
MS_DETAILS = frozenset({"latencyMs", "ttftMs"})


def _detail(kit: PageKit, key: str, *, value: Any) -> str:
    if key in MS_DETAILS and isinstance(value, (int, float)):
        return kit.format.duration(value)
    if isinstance(value, bool):
        return kit.gettext("yes") if value else kit.gettext("no")
    if isinstance(value, (int, float)):
        return kit.format.number(value)
    return escape_cell(value)


def run_facts(kit: PageKit, summary: RunSummary) -> list[str]:
    _, fmt = kit.gettext, kit.format
    facts = [
        f"{_('Started')}: {fmt.datetime(summary.start)}",
        f"{_('Last step')}: {fmt.datetime(summary.end)}",
        f"{_('Duration')}: {fmt.duration(summary.duration_ms)}",
        f"{_('Steps')}: {fmt.number(summary.steps)}",
        f"{_('Tool calls')}: {fmt.number(summary.tool_calls)}",
        *(f"{kit.outcome_labels[outcome.value]}: {fmt.number(summary.counts.of(outcome))}" for outcome in Outcome),
        f"{_('Denied')}: {fmt.number(summary.counts.denied)}",
    ]
    if summary.servers:
        facts.append(f"{_('Servers')}: {', '.join(escape_cell(server) for server in summary.servers)}")
    return facts


def timeline_markdown(kit: PageKit, summary: RunSummary, *, steps: pa.Table, show_approvers: bool,
                      header: RunHeader | None = None, calls: Sequence[CallRow] = (),
                      decisions: Sequence[DecisionRow] = ()) -> str:
    """The run's header and facts and its steps table (merged with its provider calls and
    decisions, with a Source column, where it has any), for a ticket comment; metadata only, escaped."""
    _ = kit.gettext
    document = MarkdownDocument()
    document.heading(2, f"{_('Timeline of run')} {escape_cell(summary.run)}")
    document.paragraph(f"{escape_cell(kit.title)} · "
                       f"{_('Times in %(zone)s') % {'zone': escape_cell(kit.settings.timezone_name)}}")
    if header is not None:
        document.bullets([f"{name}: {escape_cell(value) if data else value}"
                          for name, value, data in header_facts(kit, header)])
    document.bullets(run_facts(kit, summary))
    details = DetailText(kit, detail_columns(show_approvers))
    wanted = [column for column in (*OWN_COLUMNS, *details.columns, *NAMES_OF.values(), DENIAL_COLUMN)
              if column in steps.column_names]
    records = in_sequence_order(steps).select(wanted).to_pylist()
    rows: Any = (step_cells(kit, record, details=details) for record in records)
    headers = [_(header) if header != "#" else header for header in STEP_HEADERS]
    count = len(records)
    if calls or decisions:
        rows = list(merged_cells(kit, records, details=details, calls=calls, decisions=decisions))
        headers = [_("Source"), *headers]
        count = len(rows)
    document.table(
        headers,
        rows,
        total=count,
        left_out=lambda count: kit.ngettext(
            "%(count)s more step is not shown.", "%(count)s more steps are not shown.", count,
        ) % {"count": kit.format.number(count)},
    )
    return document.text()
