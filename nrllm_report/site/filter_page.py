"""What the run index's filter needs of the page: its words in the page's language (issue 22)."""

from __future__ import annotations

import json
from typing import Any

from ..core.model import N_
from .i18n import MILLISECONDS, SECONDS
from .kit import PageKit
from .labels import REASON_LABEL_KEYS, STATUS_LABEL_KEYS, label

SHOWN_AT_ONCE = 250  # rows the filter shows before "Show more", as an index page


def filter_words(kit: PageKit, statuses: list[str], *, reasons: list[str]) -> dict[str, Any]:
    """Every word the script shows, so that it holds none of its own."""
    gettext = kit.gettext
    return {
        "one": gettext(N_("%(num)s run matches.")),
        "other": gettext(N_("%(num)s runs match.")),
        "searching": gettext(N_("Searching: %(done)s of %(total)s parts of the data read.")),
        "shown": gettext(N_("Showing the newest %(shown)s.")),
        "milliseconds": MILLISECONDS,
        "seconds": SECONDS,
        "unknown": gettext("unknown"),
        "withReason": gettext("%(status)s (%(reason)s)"),
        "statuses": {status: label(kit, STATUS_LABEL_KEYS, value=status) for status in statuses},
        "reasons": {reason: label(kit, REASON_LABEL_KEYS, value=reason) for reason in reasons},
        "pageSize": SHOWN_AT_ONCE,
    }


def run_filter_context(kit: PageKit, statuses: list[str], *, reasons: list[str]) -> dict[str, Any]:
    """The run filter template's context (``templates/run_filter.html``)."""
    words = filter_words(kit, statuses, reasons=reasons)
    return {"words_json": json.dumps(words, ensure_ascii=False, sort_keys=True, separators=(",", ":"))}
