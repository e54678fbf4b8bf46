"""Which pages a site has, at which stable paths, and what each one shows."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from functools import cached_property, partial
from types import SimpleNamespace
from typing import Any

from ..aggregate.figures import OutcomeCounts, RunSummary, ServerStats, ToolStats
from ..aggregate.gate import GateResult
from ..aggregate.health import RateChange, ServerHealth, tool_verdict
from ..aggregate.latencies import ServerLatency
from ..aggregate.latency import Latency, latency_json
from ..aggregate.verdicts import interval_json, shown_verdict
from ..aggregate.whole_run import (
    ConfigurationFigures,
    RunHeader,
    Spend,
    WholeRuns,
    configuration_figures,
    runs_by_status,
    runs_by_termination_reason,
)
from ..core.model import Outcome, Problem, Severity
from ..core.options import DEFAULT_MIN_CALLS
from ..core.resources import resource_path
from ..core.slugs import slug
from ..store.spill import ArchivedSpan
from . import urls
from .charts import day_chart
from .fast_markup import PagedListFrame, RunPageFrame, denied_fact, header_markup, prebuilt_run_parts, waterfall_markup
from .kit import PageKit, inline_style_csp, stylesheet, whole_run_stylesheet
from .labels import REASON_LABEL_KEYS, STATUS_LABEL_KEYS, label
from .latency import index_cells, latency_context
from .table_rows import change_rows, counts_row, problem_row, server_row
from .waterfall import RunSteps

RUNS_PER_INDEX_PAGE = 250
PROBLEMS_PER_PAGE = 500


@dataclass
class SiteData:
    """Everything the index, server and problem pages need; run pages also need the steps."""

    summaries: list[RunSummary]
    servers: list[ServerStats]
    outcomes: OutcomeCounts
    problems: list[Problem]
    rows_read: int
    rows_rejected: int
    time_range: tuple[int, int] | None
    languages: tuple[str, ...]
    health: dict[str, ServerHealth] = field(default_factory=dict)  # by server id
    gate: GateResult = field(default_factory=lambda: GateResult((), ()))
    min_calls: int = DEFAULT_MIN_CALLS
    archived: ArchivedSpan = field(default_factory=ArchivedSpan)
    whole: WholeRuns = field(default_factory=WholeRuns)  # the run rows, provider calls and decisions
    spend: dict[str, Spend] = field(default_factory=dict)  # what each run's steps say it spent
    table_rows_kept: int = 0  # rows of the other tables among ``rows_read`` that were not rejected
    orphaned: frozenset[str] = frozenset()  # tools the MCP catalogue marks orphaned
    latency: dict[str, ServerLatency] = field(default_factory=dict)  # by server id (aggregate.latencies)
    providers: dict[str, Latency] = field(default_factory=dict)  # by provider/model (aggregate.provider_latency)

    @cached_property
    def run_positions(self) -> dict[str, int]:
        """Each run's place in ``summaries`` (newest first)."""
        return {summary.run: position for position, summary in enumerate(self.summaries)}

    @property
    def rows_rendered(self) -> int:
        return self.rows_read - self.rows_rejected

    @property
    def denials_known(self) -> bool:
        """The site tells denied calls apart: one was found, or the other tables were read (whose
        catalogue and decisions say what a denial and a tool are); else it shows what it showed
        before denials were told, byte for byte."""
        return self.outcomes.denied > 0 or bool(self.whole.present) or bool(self.orphaned)

    @property
    def steps_rendered(self) -> int:
        return self.rows_rendered - self.table_rows_kept

    def header(self, run: str) -> RunHeader | None:
        return self.whole.header(run, self.spend.get(run))

    @cached_property
    def configurations(self) -> list[ConfigurationFigures]:
        """Each agent configuration's figures, by identifier (runs with a run row only)."""
        return configuration_figures(self.whole, self.summaries, header_of=self.header)


def favicon() -> str:
    return (resource_path("templates") / "assets" / "favicon.svg").read_text(encoding="utf-8")


def run_page_path(language: str, summary: RunSummary) -> str:
    return urls.run_page(language, summary.slug)


def page_count(items: int, per_page: int) -> int:
    return max(1, -(-items // per_page))


def page_links(language: str, stem: str, *, pages: int) -> list[tuple[int, str]]:
    """(number, href) for every page, relative to a page in the language's folder."""
    here = urls.numbered(language, stem, number=1)
    return [(number, urls.link(here, urls.numbered(language, stem, number=number))) for number in range(1, pages + 1)]


PAGINATION_NEIGHBOURS = 2  # pages linked on either side of the current one


@dataclass(frozen=True)
class Pagination:
    """A page's navigation: the first and last page, its neighbours, gaps (None) between,
    and the previous and next page. Linking every page would make each of a 50,000-run
    index's 200 pages list all 200, and the build quadratic in the runs."""

    links: list[tuple[int, str] | None]
    current: int
    count: int
    previous: str | None
    next: str | None


def pagination(links: list[tuple[int, str]], current: int) -> Pagination:
    shown = {1, len(links)} | set(range(current - PAGINATION_NEIGHBOURS, current + PAGINATION_NEIGHBOURS + 1))
    window: list[tuple[int, str] | None] = []
    for number, href in links:
        if number in shown:
            if window and window[-1] is not None and window[-1][0] != number - 1:
                window.append(None)
            window.append((number, href))
    previous = links[current - 2][1] if current > 1 else None
    following = links[current][1] if current < len(links) else None
    return Pagination(window, current, len(links), previous, following)


def outcome_triples(counts: OutcomeCounts, kit: PageKit) -> list[tuple[str, str, str]]:
    return [(outcome.value, kit.outcome_labels[outcome.value], kit.format.number(counts.of(outcome)))
            for outcome in Outcome]


# ---------------------------------------------------------------- pages


def language_choice_page(kit: PageKit, languages: Sequence[str]) -> str:
    from .kit import LANGUAGE_NAMES

    choices = [
        {"language": language, "href": urls.language_index(language), "label": LANGUAGE_NAMES[language]}
        for language in languages
    ]
    return kit.render("language_choice.html", urls.ROOT_INDEX, choices=choices)


def paginated(
    language: str, stem: str, *, items: Sequence[Any], per_page: int
) -> Iterator[tuple[str, Sequence[Any], Pagination]]:
    """Each page of a list split ``per_page`` items a page: its path, its items, its navigation."""
    pages = page_count(len(items), per_page)
    links = page_links(language, stem, pages=pages)
    for page_number in range(1, pages + 1):
        chunk = items[(page_number - 1) * per_page : page_number * per_page]
        yield urls.numbered(language, stem, number=page_number), chunk, pagination(links, page_number)


def archive_note(kit: PageKit, archived: ArchivedSpan) -> dict[str, Any] | None:
    """What the sentence on which runs come from the archive alone says, or None when none do."""
    if not archived.runs or archived.first is None or archived.last is None:
        return None
    fmt = kit.format
    return {"count": archived.runs, "runs": fmt.number(archived.runs), "first": fmt.datetime(archived.first),
            "last": fmt.datetime(archived.last)}


def run_index_pages(
    kit: PageKit, data: SiteData, *, outcome: Sequence[RunList], days: dict[date, list[RunSummary]],
    run_filter: dict[str, Any] | None = None,
) -> Iterator[tuple[str, str]]:
    """The run index's pages, linking the ``outcome`` lists, the first one listing the ``days``
    (and holding the ``run_filter``, ``site.filter_page``)."""
    number = kit.format.number
    totals = {
        "runs": number(len(data.summaries)),
        "run_count": len(data.summaries),
        "rows": number(data.steps_rendered),
        "row_count": data.steps_rendered,
        "rejected": number(data.rows_rejected),
        "rejected_count": data.rows_rejected,
        "outcomes": outcome_triples(data.outcomes, kit),
    }
    note = archive_note(kit, data.archived)
    here = urls.language_index(kit.language)
    ways_in = [(urls.link(here, urls.numbered(kit.language, run_list.stem, number=1)), run_list.title,
                number(len(run_list.summaries))) for run_list in outcome]
    day_list = day_rows(kit, days, here=here)
    for path, chunk, pages in paginated(kit.language, urls.RUN_INDEX_STEM, items=data.summaries,
                                        per_page=RUNS_PER_INDEX_PAGE):
        yield path, kit.render(
            "runs_index.html", path, run_rows=kit.run_rows.rows(chunk), runs=chunk, totals=totals,
            pages=pages, page_number=pages.current, page_count=pages.count, archive_note=note,
            ways_in=ways_in, days=day_list if pages.current == 1 else [],
            run_filter=run_filter if pages.current == 1 else None,
        )


# ---------------------------------------------------------------- lists of runs: by day, outcome, server


@dataclass(frozen=True)
class RunList:
    """A list of runs on pages of its own, as the run index lists them (newest first).

    ``calls`` adds each run's calls to what it ``called`` (a server, a tool) beside its row;
    ``around`` links the pages next to it (a day's previous and next day with runs); ``up``
    the page it belongs to.
    """

    stem: str
    title: str
    summaries: Sequence[RunSummary]
    calls: Mapping[str, OutcomeCounts] | None = None
    called: str | None = None
    around: tuple[tuple[str, str] | None, tuple[str, str] | None] = (None, None)
    up: tuple[str, str] | None = None


def runs_by_day(kit: PageKit, data: SiteData) -> dict[date, list[RunSummary]]:
    """The runs by the day they started in the site's time zone, newest day first (runs
    without a time are on no day)."""
    days: dict[date, list[RunSummary]] = {}
    local_day = kit.format.local_day
    for summary in data.summaries:
        if summary.start is not None:
            days.setdefault(local_day(summary.start), []).append(summary)
    return days


def day_rows(kit: PageKit, days: dict[date, list[RunSummary]], *, here: str) -> list[dict[str, str]]:
    """The run index's list of days: each day's link, runs, and runs with a failed and a cancelled call."""
    number = kit.format.number
    return [{"day": kit.format.date(day), "href": urls.link(here, urls.numbered(kit.language, urls.day_stem(
                day.isoformat()), number=1)), "runs": number(len(runs)),
             "failed": number(sum(1 for run in runs if run.counts.failed)),
             "cancelled": number(sum(1 for run in runs if run.counts.cancelled))}
            for day, runs in days.items()]


def outcome_lists(kit: PageKit, data: SiteData) -> list[RunList]:
    """The runs with a failed call and the runs with a cancelled call."""
    return [
        RunList(urls.RUNS_WITH_FAILED_STEM, kit.gettext("Runs with a failed call"),
                [summary for summary in data.summaries if summary.counts.failed]),
        RunList(urls.RUNS_WITH_CANCELLED_STEM, kit.gettext("Runs with a cancelled call"),
                [summary for summary in data.summaries if summary.counts.cancelled]),
    ]


def day_lists(kit: PageKit, days: dict[date, list[RunSummary]]) -> list[RunList]:
    """A list per day with runs (``runs_by_day``), each linked to the day before and after it that has runs."""
    ordered = list(days)  # newest first
    first_pages = {day: urls.numbered(kit.language, urls.day_stem(day.isoformat()), number=1) for day in ordered}
    index = urls.language_index(kit.language)
    lists = []
    for position, day in enumerate(ordered):
        here = first_pages[day]

        def link_to(other: date | None, here: str = here) -> tuple[str, str] | None:
            return None if other is None else (urls.link(here, first_pages[other]), kit.format.date(other))

        earlier = ordered[position + 1] if position + 1 < len(ordered) else None
        later = ordered[position - 1] if position else None
        title = kit.gettext("Runs started on %(day)s") % {"day": kit.format.date(day)}
        lists.append(RunList(urls.day_stem(day.isoformat()), title, days[day],
                             around=(link_to(earlier), link_to(later)),
                             up=(urls.link(here, index), kit.gettext("Runs"))))
    return lists


# Which runs each of a server's lists (``urls.SERVER_RUN_LISTS``) holds, by their calls to it.
CALLED_RUNS_WITH: dict[str, Callable[[OutcomeCounts], int] | None] = {
    "runs": None, "failed": lambda counts: counts.failed, "cancelled": lambda counts: counts.cancelled,
}


def calls_lists(
    kit: PageKit, data: SiteData, *, calls: Mapping[str, OutcomeCounts], called: str, titles: dict[str, str],
    stem_of: Callable[[str], str], up: tuple[str, str],
) -> list[RunList]:
    """The lists of the runs that made ``calls`` (by run) to what they ``called``, newest first:
    one per entry of ``titles`` (keyed by ``CALLED_RUNS_WITH``), at ``stem_of`` its key,
    linked ``up`` to a page (its path and name)."""
    everyone = [data.summaries[position] for position in sorted(data.run_positions[run] for run in calls)]
    lists = []
    for which, title in titles.items():
        having = CALLED_RUNS_WITH[which]
        runs = everyone if having is None else [summary for summary in everyone if having(calls[summary.run])]
        stem = stem_of(which)
        up_link = (urls.link(urls.numbered(kit.language, stem, number=1), up[0]), up[1])
        lists.append(RunList(stem, title, runs, calls=calls, called=called, up=up_link))
    return lists


def server_lists(kit: PageKit, data: SiteData, *, stats: ServerStats) -> list[RunList]:
    """A server's lists: every run that called it, those with a failed and those with a cancelled call to it."""
    titles = {
        "runs": kit.gettext("Runs that called %(server)s"),
        "failed": kit.gettext("Runs with a failed call to %(server)s"),
        "cancelled": kit.gettext("Runs with a cancelled call to %(server)s"),
    }
    return calls_lists(kit, data, calls=stats.runs, called=stats.server,
                       titles={which: titles[which] % {"server": stats.server} for which in urls.SERVER_RUN_LISTS},
                       stem_of=lambda which: urls.server_runs_stem(stats.slug, which),
                       up=(urls.server_page(kit.language, stats.slug), stats.server))


def tool_lists(kit: PageKit, data: SiteData, *, stats: ServerStats) -> dict[str, RunList]:
    """Each of a server's tools' list of the runs that called it, by tool name."""
    lists = {}
    server_page_path = urls.server_page(kit.language, stats.slug)
    for name, tool in stats.tools.items():
        title = kit.gettext("Runs that called %(tool)s on %(server)s") % {"tool": name, "server": stats.server}
        [lists[name]] = calls_lists(
            kit, data, calls=tool.runs, called=name, titles={"runs": title},
            stem_of=partial(urls.tool_runs_stem, stats.slug, slug(name)),
            up=(server_page_path, stats.server))
    return lists


def run_list_pages(kit: PageKit, run_list: RunList) -> Iterator[tuple[str, str]]:
    """Each page of a list of runs, with the run index's columns (and each run's calls to what it
    lists): the first as Jinja renders ``run_list.html``, the others as a ``PagedListFrame`` of the
    list fills it (where the frame filled with the first page's values is that page)."""
    frame: PagedListFrame | None = None
    for path, chunk, pages in paginated(kit.language, run_list.stem, items=run_list.summaries,
                                        per_page=RUNS_PER_INDEX_PAGE):
        values = {
            "page_number": pages.current,
            "page_links": kit.macro("pagination")(pages),
            "run_rows": kit.run_rows.row_parts(chunk, run_prefix=urls.runs_prefix_from(path),
                                               server_runs=run_list.calls),
            **{f"switch {number}": switch.href for number, switch in enumerate(kit.switches(path))},
        }
        if frame is None:
            page = run_list_page_by_jinja(kit, run_list, path=path, values=values)
            frame = PagedListFrame(partial(_list_page_of_markers, kit, run_list=run_list, path=path), list(values),
                                   spliced="run_rows")
            frame.matches(values, page)
            yield path, page
        else:
            yield path, (frame.fill(values) if frame.usable
                         else run_list_page_by_jinja(kit, run_list, path=path, values=values))


def _list_page_of_markers(kit: PageKit, markers: Mapping[str, Any], *, run_list: RunList, path: str) -> str:
    return run_list_page_by_jinja(kit, run_list, path=path, values=markers)


def run_list_page_by_jinja(kit: PageKit, run_list: RunList, *, path: str, values: Mapping[str, Any]) -> str:
    """A page of a list of runs as Jinja renders ``run_list.html``, of ``run_list_pages``'s ``values``."""
    switches = [SimpleNamespace(language=switch.language, name=switch.name, href=values[f"switch {number}"])
                for number, switch in enumerate(kit.switches(path))]
    return kit.render("run_list.html", path, run_list=run_list, run_count=len(run_list.summaries),
                      runs_shown=kit.format.number(len(run_list.summaries)),
                      page_count=page_count(len(run_list.summaries), RUNS_PER_INDEX_PAGE),
                      page_number=values["page_number"], page_links=values["page_links"],
                      run_rows=PagedListFrame.joined(values["run_rows"]), page={"switches": switches})


def server_links(server_slugs: dict[str, str]) -> dict[str, str]:
    """Where a run page links each server: its page beside the run pages."""
    return {server: urls.server_from_sibling_folder(slug) for server, slug in server_slugs.items()}


def run_page(
    kit: PageKit, summary: RunSummary, *, rows: Sequence[str], span: tuple[int, int], server_href: dict[str, str],
    standalone: bool = False, header: RunHeader | None = None, steps: RunSteps | None = None,
) -> str:
    """A run's timeline from ``rows`` ``span`` (a ``TimelinePlan``'s, or a ``MergedTimeline``'s
    where the site has provider calls or decisions), opened by its run row's ``header``, under
    the waterfall of its ``steps``: ``run.html`` as Jinja renders it (``RunPageFrame``, which a
    test holds to ``run_page_by_jinja``); ``standalone`` inlines the CSS and links to no other file."""
    values = run_page_values(kit, summary, rows=rows[span[0]:span[1]], server_href=server_href, header=header,
                             steps=steps)
    frame: RunPageFrame = kit.once("run page", lambda: RunPageFrame(
        lambda fields: run_page_by_jinja(kit, fields, standalone=standalone), RUN_PAGE_FIELDS), variant=standalone)
    return frame.fill(values)


RUN_PAGE_FIELDS = ("header", "slug", "run", "start", "end", "duration", "steps", "tool_calls", "ok", "failed",
                   "cancelled", "denied", "servers", "time_range", "rows", "waterfall")


def run_page_values(
    kit: PageKit, summary: RunSummary, *, rows: Sequence[str], server_href: dict[str, str],
    header: RunHeader | None = None, steps: RunSteps | None = None,
) -> dict[str, Any]:
    """What a run page shows of its run (``RUN_PAGE_FIELDS``): texts, and the parts made in
    Python as markup (``fast_markup.prebuilt_run_parts``)."""
    fmt = kit.format
    counts = summary.counts
    start, end = fmt.datetime(summary.start), fmt.datetime(summary.end)
    calls, decisions = kit.whole.entries(summary.run) if kit.whole.merged else ([], [])
    return {
        "slug": summary.slug,
        "run": summary.run,
        "start": start,
        "end": end,
        "duration": fmt.duration(summary.duration_ms),
        "steps": fmt.number(summary.steps),
        "tool_calls": fmt.number(summary.tool_calls),
        "ok": fmt.number(counts.ok),
        "failed": fmt.number(counts.failed),
        "cancelled": fmt.number(counts.cancelled),
        "denied": denied_fact(kit, counts.denied),
        "time_range": kit.range_text(None, None) if summary.start is None or summary.end is None
        else kit.formatted_range_text(start, end),
        **prebuilt_run_parts(kit.run_rows.servers_fact(summary.servers, server_href), rows=rows,
                             header=header_markup(kit, header),
                             waterfall="" if steps is None
                             else waterfall_markup(kit, steps, calls=calls, decisions=decisions)),
    }


def run_page_by_jinja(kit: PageKit, values: Mapping[str, Any], *, standalone: bool = False) -> str:
    """The run page of ``values`` (``run_page_values``) as Jinja renders ``run.html``, autoescaped."""
    run = SimpleNamespace(**values, outcomes=[(outcome.value, kit.outcome_labels[outcome.value], values[outcome.value])
                                              for outcome in Outcome])
    page: dict[str, Any] = {"time_range": values["time_range"]}
    if standalone:
        css = stylesheet() + (whole_run_stylesheet() if kit.whole_run_styled else "")
        page.update(inline_css=css, csp=inline_style_csp(css), standalone=True)
    return kit.render("run.html", urls.run_page(kit.language, values["slug"]), page=page, run=run,
                      timeline_rows=values["rows"])


def configurations_page(kit: PageKit, data: SiteData) -> tuple[str, str]:
    """Per agent configuration: runs by status and termination reason, tool calls by outcome,
    median duration, tokens and cost in total and per run."""
    path = urls.configurations_page(kit.language)
    fmt = kit.format
    rows = []
    for figures in data.configurations:
        rows.append({
            "identifier": figures.identifier,
            "href": urls.link(path, urls.numbered(kit.language, urls.configuration_stem(slug(figures.identifier)),
                                                  number=1)),
            "runs": fmt.number(figures.runs),
            "statuses": [(status, label(kit, STATUS_LABEL_KEYS, value=status) or kit.gettext("unknown"),
                          fmt.number(count))
                         for status, count in figures.by_status.items()],
            "reasons": [(label(kit, REASON_LABEL_KEYS, value=reason) or kit.gettext("none"), fmt.number(count))
                        for reason, count in figures.by_termination_reason.items()],
            "calls": [(outcome.value, kit.outcome_labels[outcome.value],
                       fmt.number(figures.calls.get(outcome.value, 0)))
                      for outcome in Outcome],
            "median": "–" if figures.median_duration_ms is None else fmt.duration(figures.median_duration_ms),
            "tokens": fmt.number(figures.tokens),
            "tokens_per_run": fmt.number(round(figures.per_run(figures.tokens) or 0, 1)),
            "cost": "–" if figures.cost is None else fmt.cost(figures.cost),
            "cost_per_run": "–" if figures.cost is None else fmt.cost(figures.per_run(figures.cost) or 0.0),
        })
    return path, kit.render("configurations.html", path, configurations=rows)


def servers_index_page(kit: PageKit, data: SiteData) -> tuple[str, str]:
    path = urls.servers_index(kit.language)
    rows = [server_row(stats, data.health[stats.server], kit=kit, href=urls.server_from_servers_index(stats.slug))
            for stats in data.servers]
    return path, kit.render(
        "servers.html", path, servers=rows, min_calls=kit.format.number(kit.settings.min_calls),
        archive_note=archive_note(kit, data.archived),
        latency={stats.server: index_cells(data.latency.get(stats.server), kit) for stats in data.servers},
    )


def server_page(kit: PageKit, data: SiteData, *, stats: ServerStats, run_lists: Sequence[RunList],
                tool_runs: Mapping[str, RunList]) -> tuple[str, str]:
    """A server's page; ``run_lists`` are its lists of runs (``server_lists``) and ``tool_runs``
    each tool's (``tool_lists``), linked with their counts."""
    path = urls.server_page(kit.language, stats.slug)
    health = data.health[stats.server]
    fmt = kit.format
    tools = []
    for tool in sorted(stats.tools.values(), key=lambda tool: tool.name):
        tool_verdict_value = shown_tool_verdict(tool, health, latency=data.latency.get(stats.server),
                                                min_calls=kit.settings.min_calls)
        tools.append({
            "name": tool.name,
            "orphaned": tool.name in data.orphaned,
            "counts": counts_row(tool.counts, kit),
            "first_seen": fmt.datetime(tool.first_seen),
            "last_seen": fmt.datetime(tool.last_seen),
            "verdict": tool_verdict_value,
            "verdict_label": kit.verdict_labels[tool_verdict_value],
            "runs": (urls.link(path, urls.numbered(kit.language, tool_runs[tool.name].stem, number=1)),
                     fmt.number(len(tool_runs[tool.name].summaries))),
        })

    legend = [(outcome.value, kit.outcome_labels[outcome.value]) for outcome in Outcome]
    return path, kit.render(
        "server.html", path, server=server_row(stats, health, kit=kit, href=""), tools=tools,
        servers_index=urls.link(path, urls.servers_index(kit.language)),
        chart=day_chart(stats.days, kit, health=health), legend=legend,
        changes=change_rows(health.changes, kit), cancellation_changes=change_rows(health.cancellation_changes, kit),
        legacy_days=[fmt.date(day) for day in health.legacy_days],
        run_lists=[(urls.link(path, urls.numbered(kit.language, run_list.stem, number=1)), run_list.title,
                    fmt.number(len(run_list.summaries))) for run_list in run_lists],
        latency=latency_context(data.latency.get(stats.server), kit,
                                span=(min(stats.days), max(stats.days)) if stats.days else None),
    )


def shown_tool_verdict(tool: ToolStats, health: ServerHealth, *, latency: ServerLatency | None, min_calls: int) -> str:
    """A tool's verdict on its own calls against its server's budgets: slow when reliable and its latency slow."""
    figures = None if latency is None else latency.tools.get(tool.name)
    return shown_verdict(tool_verdict(tool, budget=health.failure_budget, min_calls=min_calls),
                         None if figures is None else figures.verdict).value


def problems_pages(kit: PageKit, data: SiteData) -> Iterator[tuple[str, str]]:
    problems = sorted(data.problems, key=lambda problem: (problem.input, problem.row, problem.rule.value))
    warnings = sum(1 for problem in problems if problem.severity is Severity.WARNING)
    severity_labels = {"error": kit.gettext("error"), "warning": kit.gettext("warning")}
    for path, chunk, pages in paginated(kit.language, urls.PROBLEMS_STEM, items=problems, per_page=PROBLEMS_PER_PAGE):
        yield path, kit.render(
            "problems.html", path, problems=[problem_row(problem, kit) for problem in chunk],
            problem_count=len(problems), rejected=kit.format.number(data.rows_rejected),
            rejected_count=data.rows_rejected, warnings=kit.format.number(warnings), warning_count=warnings,
            pages=pages, page_number=pages.current,
            severity_labels=severity_labels,
        )


def summary_json(data: SiteData) -> str:
    """The machine-readable summary at the site's root."""
    summary: dict[str, Any] = {
        "rows_read": data.rows_read,
        "rows_rendered": data.rows_rendered,
        "rows_rejected": data.rows_rejected,
        "runs": len(data.summaries),
        "outcomes": {outcome.value: data.outcomes.of(outcome) for outcome in Outcome},
        "denied": data.outcomes.denied,
        "servers": {
            stats.server: {
                **{outcome.value: stats.counts.of(outcome) for outcome in Outcome},
                "denied": stats.counts.denied,
                "failed_in_0ms": stats.counts.failed_in_0ms,
                "failure_rate": stats.counts.failure_rate,
                **health_json(data.health[stats.server]),
                "tools": {name: {**tool_json(stats.tools[name], name in data.orphaned),
                                 "verdict": shown_tool_verdict(stats.tools[name], data.health[stats.server],
                                                               latency=data.latency.get(stats.server),
                                                               min_calls=data.min_calls),
                                 **tool_latency_json(data.latency.get(stats.server), name)}
                          for name in sorted(stats.tools)},
                **server_latency_json(data.latency.get(stats.server)),
            }
            for stats in sorted(data.servers, key=lambda stats: stats.server)
        },
        "languages": list(data.languages),
        "gate": data.gate.to_json(),
    }
    if not data.denials_known:  # a site of events without denials says what it said before they were told
        del summary["denied"]
        for figures in summary["servers"].values():
            del figures["denied"]
            figures["tools"] = {name: {"verdict": tool["verdict"], "latency": tool["latency"]}
                                for name, tool in figures["tools"].items() if "latency" in tool}
    whole = data.whole
    if whole.present:
        runs = [summary.run for summary in data.summaries]
        summary["runs_by_status"] = runs_by_status(whole, runs)
        summary["runs_by_termination_reason"] = runs_by_termination_reason(whole, runs)
        summary["unmatched"] = dict(whole.unmatched)
        summary["configurations"] = {
            figures.identifier: figures.to_json() for figures in data.configurations
        }
        if data.providers:
            summary["providers"] = {key: {"latency": latency_json(figures)} for key, figures in data.providers.items()}
    return json.dumps(summary, ensure_ascii=False, indent=2) + "\n"


def server_latency_json(latency: ServerLatency | None) -> dict[str, Any]:
    """A server's ``latency`` object (issue 23), of its current latency period; nothing without calls."""
    return {} if latency is None else {"latency": latency_json(latency.latency)}


def tool_latency_json(latency: ServerLatency | None, tool: str) -> dict[str, Any]:
    """A tool's ``latency`` object, judged against its server's settings; nothing without calls."""
    figures = None if latency is None else latency.tools.get(tool)
    return {} if figures is None else {"latency": latency_json(figures)}


def tool_json(tool: ToolStats, orphaned: bool) -> dict[str, Any]:
    """A tool's calls as summary.json has them: by outcome (failed without the denied), denied
    apart, and whether the catalogue marks it orphaned."""
    return {
        **{outcome.value: tool.counts.of(outcome) for outcome in Outcome},
        "denied": tool.counts.denied,
        "failed_in_0ms": tool.counts.failed_in_0ms,
        "failure_rate": tool.counts.failure_rate,
        "orphaned": orphaned,
    }


def health_json(health: ServerHealth) -> dict[str, Any]:
    """A server's verdict, current period, changes and cancellation figures as summary.json has them."""
    current = health.current
    return {
        "verdict": health.verdict.value,
        "failure_budget": health.failure_budget,
        "interval": interval_json(health.interval),
        "current": {
            "since": current.since.isoformat() if current.since else None,
            "ok": current.ok,
            "failed": current.failed,
            "failure_rate": current.failures.rate,
            "interval": interval_json(current.failures.interval),
        },
        "changes": [_change_json(change) for change in health.changes],
        "cancelled_share": health.cancelled_share,
        "failure_rate_if_cancels_failed": health.failure_rate_if_cancels_failed,
        "cancellation_changes": [_change_json(change) for change in health.cancellation_changes],
        "legacy_days": [day.isoformat() for day in health.legacy_days],
    }


def _change_json(change: RateChange) -> dict[str, Any]:
    return {
        "day": change.day.isoformat(),
        "earliest": change.earliest.isoformat(),
        "latest": change.latest.isoformat(),
        "direction": change.direction.value,
        "before": change.before.rate,
        "after": change.after.rate,
        "probability": change.probability,
        "recording_changed": change.recording_changed,
    }
