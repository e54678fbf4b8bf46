"""The lists of runs by their run row: by status and by agent configuration (issue 22).

Only where the site has the run rows (``WholeRuns.runs_known``); a site of events alone
has none of these pages.
"""

from __future__ import annotations

from ..aggregate.figures import RunSummary
from ..core.slugs import slug
from ..core.tables import RUN_STATUSES
from . import urls
from .kit import PageKit
from .labels import STATUS_LABEL_KEYS, label
from .pages import RunList, SiteData


def runs_by(data: SiteData, field: str) -> dict[str, list[RunSummary]]:
    """The runs (newest first) by a field of their run row (``status``, ``configuration``); runs
    without a row or a value are in none."""
    grouped: dict[str, list[RunSummary]] = {}
    rows = data.whole.rows
    for summary in data.summaries:
        row = rows.get(summary.run)
        value = getattr(row, field) if row is not None else None
        if value:
            grouped.setdefault(value, []).append(summary)
    return grouped


def status_lists(kit: PageKit, data: SiteData) -> list[RunList]:
    """A list per status a run row has, in nr-llm's order (then any other value), newest run first."""
    by_status = runs_by(data, "status")
    order = {status: position for position, status in enumerate(RUN_STATUSES)}
    statuses = sorted(by_status, key=lambda status: (order.get(status, len(order)), status))
    index = urls.language_index(kit.language)
    lists = []
    for status in statuses:
        stem = urls.status_stem(slug(status))
        up = (urls.link(urls.numbered(kit.language, stem, number=1), index), kit.gettext("Runs"))
        title = kit.gettext("Runs with status %(status)s") % {"status": label(kit, STATUS_LABEL_KEYS, value=status)}
        lists.append(RunList(stem, title, by_status[status], up=up))
    return lists


def configuration_lists(kit: PageKit, data: SiteData) -> list[RunList]:
    """A list per agent configuration a run row names, by identifier, newest run first."""
    by_configuration = runs_by(data, "configuration")
    page = urls.configurations_page(kit.language)
    lists = []
    for identifier in sorted(by_configuration):
        stem = urls.configuration_stem(slug(identifier))
        up = (urls.link(urls.numbered(kit.language, stem, number=1), page), kit.gettext("Configurations"))
        title = kit.gettext("Runs of configuration %(configuration)s") % {"configuration": identifier}
        lists.append(RunList(stem, title, by_configuration[identifier], up=up))
    return lists


def run_groups(kit: PageKit, data: SiteData) -> tuple[list[RunList], list[RunList]]:
    """The status and the configuration lists, or none without the run rows."""
    if not data.whole.runs_known:
        return [], []
    return status_lists(kit, data), configuration_lists(kit, data)
