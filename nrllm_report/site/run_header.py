"""The run header's facts in words: what nr-llm's run page opens with.

In nr-llm's order: correlation (uuid), status with its termination reason, configuration,
created, finished, rounds (and "truncated"), tokens, cost and the error class when set;
where the row's totals are not what was spent, what the provider calls (or the steps) add up
to stands beside them, saying which. The page's header (``fast_markup.RunHeaderMarkup``) and
the timeline's Markdown (``timeline_formats``) both say it with these words.
"""

from __future__ import annotations

from typing import Any

from markupsafe import escape

from ..aggregate.whole_run import RunHeader, Tokens
from ..core.model import N_
from .labels import status_text

COST_SOURCE_LABELS = {
    "telemetry": N_("sum of the provider calls' cost"), "steps": N_("sum of the steps' estimated cost"),
    "run": N_("the run row's estimated cost"),
}
SPENT_LABELS = {"telemetry": N_("Spent, by the provider calls"), "steps": N_("Spent, by the steps")}
TRUNCATED = N_("truncated")  # beside the rounds of a run whose context was cut
TOKENS = N_("%(prompt)s prompt / %(completion)s completion / %(total)s total")
HEADER_LABELS = (N_("Correlation"), N_("Status"), N_("Configuration"), N_("Created"), N_("Finished"), N_("Rounds"),
                 N_("Tokens"), N_("Cost"), *SPENT_LABELS.values(), N_("Error class"), N_("Started by"))


def header_facts(kit: Any, header: RunHeader) -> list[tuple[str, str, bool]]:
    """The header's facts as plain text, in nr-llm's order (for Markdown): name, value, and
    whether the value is the data's own text (to be escaped) rather than formatted by us."""
    _, fmt, row = kit.gettext, kit.format, header.row
    facts = [
        (_("Correlation"), row.uuid or "–", True),
        (_("Status"), status_text(kit, row.status, reason=row.termination_reason), False),
        (_("Configuration"), row.configuration or "–", True),
        (_("Created"), fmt.datetime(row.created), False),
        (_("Finished"), fmt.datetime(row.finished), False),
        (_("Rounds"), str(_rounds(kit, row.iterations, truncated=row.truncated)), False),
        (_("Tokens"), str(_tokens(kit, row.tokens)), False),
        (_("Cost"), _cost_text(kit, header), False),
    ]
    if header.totals_differ and header.spent_source is not None:
        facts.append((_(SPENT_LABELS[header.spent_source]), str(_tokens(kit, header.spent.tokens)), False))
    if row.error_class:
        facts.append((_("Error class"), row.error_class, True))
    if kit.settings.show_approvers and row.be_user:
        facts.append((_("Started by"), str(row.be_user), False))
    return facts


def cost_parts(kit: Any, header: RunHeader) -> tuple[str, str]:
    """The cost and where it comes from; of provider calls, how many were priced."""
    cost = "–" if header.cost is None else kit.format.cost(header.cost)
    source = kit.gettext(COST_SOURCE_LABELS[header.cost_source])
    if header.cost_source == "telemetry":
        source += ", " + kit.gettext("%(priced)s of %(calls)s calls priced") % {
            "priced": kit.format.number(header.calls_priced), "calls": kit.format.number(header.calls)}
    return cost, source


def _rounds(kit: Any, iterations: int | None, *, truncated: bool | None) -> str:
    text = "–" if iterations is None else kit.format.number(iterations)
    return f"{text} ({escape(kit.gettext(TRUNCATED))})" if truncated else text


def _tokens(kit: Any, tokens: Tokens) -> str:
    """Prompt / completion / total."""
    return escape(kit.gettext(TOKENS) % tokens_shown(kit.format, tokens))


def tokens_shown(fmt: Any, tokens: Tokens) -> dict[str, str]:
    """The values of ``TOKENS``: each count formatted, a dash for one not known."""
    return {name: "–" if value is None else fmt.number(value) for name, value in
            (("prompt", tokens.prompt), ("completion", tokens.completion), ("total", tokens.total))}


def _cost_text(kit: Any, header: RunHeader) -> str:
    cost, source = cost_parts(kit, header)
    return f"{cost} ({source})"
