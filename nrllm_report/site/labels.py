"""The words of the whole run's coded values: statuses, termination reasons, decisions, sources.

Each is a catalog key looked up by its value (``status.completed``), translated in every
language; a value nr-llm does not write is shown as it stands.
"""

from __future__ import annotations

from typing import Any

from ..core.model import N_
from ..core.tables import DECISIONS, RUN_STATUSES, TERMINATION_REASONS

STATUS_LABEL_KEYS = {status: f"status.{status}" for status in RUN_STATUSES}
REASON_LABEL_KEYS = {reason: f"reason.{reason}" for reason in TERMINATION_REASONS}
DECISION_LABEL_KEYS = {decision: f"decision.{decision}" for decision in DECISIONS}
SOURCES = ("step", "call", "governance")
SOURCE_LABEL_KEYS = {source: f"source.{source}" for source in SOURCES}
# Extraction markers for the labels above, which are looked up by the value.
_LABELS = (
    N_("status.queued"), N_("status.running"), N_("status.waiting_for_approval"), N_("status.waiting_for_input"),
    N_("status.completed"), N_("status.failed"), N_("status.cancelled"),
    N_("reason.completed"), N_("reason.max_iterations"), N_("reason.budget_exhausted"),
    N_("reason.context_truncated"), N_("reason.policy_denied"), N_("reason.approval_denied"),
    N_("reason.provider_failed"), N_("reason.not_retryable"), N_("reason.retries_exhausted"), N_("reason.cancelled"),
    N_("decision.tool_denied"), N_("decision.response_blocked"), N_("decision.approval_required"),
    N_("decision.content_filter"), N_("decision.context_blocked"), N_("decision.write_unapproved"),
    N_("source.step"), N_("source.call"), N_("source.governance"),
)
assert set(_LABELS) == {*STATUS_LABEL_KEYS.values(), *REASON_LABEL_KEYS.values(), *DECISION_LABEL_KEYS.values(),
                        *SOURCE_LABEL_KEYS.values()}

def label(kit: Any, keys: dict[str, str], *, value: str | None) -> str:
    """A coded value's word in the page's language; a value nr-llm does not write, as it stands."""
    if not value:
        return ""
    key = keys.get(value)
    return kit.gettext(key) if key is not None else value


def status_text(kit: Any, status: str | None, *, reason: str | None) -> str:
    """"Failed (provider failed)", as nr-llm writes ``status (termination_reason)``."""
    shown = label(kit, STATUS_LABEL_KEYS, value=status) or kit.gettext("unknown")
    if reason:
        shown = kit.gettext("%(status)s (%(reason)s)") % {"status": shown,
                                                          "reason": label(kit, REASON_LABEL_KEYS, value=reason)}
    return shown
