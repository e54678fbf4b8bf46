"""The facts a timeline row shows, in nr-llm's order, and the keys of the derived sources
that carry them (a timeline page's, a Markdown and a text timeline's alike)."""

from __future__ import annotations

from ..core.model import N_

COUNT_FACT_LABELS = (
    ("promptTokens", N_("Prompt tokens")),
    ("completionTokens", N_("Completion tokens")),
    ("totalTokens", N_("Total tokens")),
)
# A count and the names it counts, shown as one fact: "Requested tool calls 2: a, b".
LISTED_FACT_LABELS = (
    ("requestedToolCallCount", "requestedToolNames", N_("Requested tool calls")),
    ("messageCount", None, N_("Messages sent")),
    ("toolSpecCount", "toolSpecs", N_("Tool specs")),
    ("artifactCount", "toolArtifactTypes", N_("Artifacts")),
)
LENGTH_FACT_LABELS = (
    ("contentLength", N_("Content length")),
    ("thinkingLength", N_("Thinking length")),
    ("toolResultLength", N_("Tool result length")),
)
DROPPED_SOURCES = ("droppedSourceCount", "droppedSources", N_("Dropped sources"))
# The order a step's facts are shown in, on a page and in a Markdown timeline (``_fact_cells``).
FACT_ORDER = (
    "finishReason", *(name for name, _label in COUNT_FACT_LABELS),
    *(count for count, _names, _label in LISTED_FACT_LABELS), *(name for name, _label in LENGTH_FACT_LABELS),
    "contentRedacted", DROPPED_SOURCES[0], "estimatedCost", "approved", "decidedBy",
)
COUNT_END = "\x1f"  # ends the count in a listed fact's key (``listed_values``)


FACT_LABELS = (
    N_("Finish reason"), N_("Cost"), N_("Content redacted"), N_("Approved"), N_("Decided by"),
    *(label for _name, label in COUNT_FACT_LABELS + LENGTH_FACT_LABELS),
    *(label for _count, _names, label in LISTED_FACT_LABELS), DROPPED_SOURCES[2],
)


LISTED = "listed "
# A derived source: the outcome and, after ``COUNT_END``, what denied the call. One source for
# both, so a row joins no more cells than before denials: the outcome's cells show the denial.
OUTCOME_AND_DENIAL = "outcome and denial"


def listed_source(count: str, names: str | None) -> str:
    """The name of the derived source of a count and its list of names (``TimelinePlan._source``)."""
    return f"{LISTED}{count}+{names or ''}"


