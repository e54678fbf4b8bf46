"""What every page of one language is rendered with: the Jinja2 environment (autoescaped,
strict, with the language's catalog and ``site.urls`` as a global), the formatter, the labels
and the chrome every page has (``PageKit.render``)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jinja2
from markupsafe import Markup

from .. import __version__
from ..aggregate.whole_run import WholeRuns
from ..core.model import KNOWN_KINDS, N_, Verdict
from ..core.resources import resource_path
from . import urls
from .fast_markup import RunRows, TimelineMarkup, outcome_badge
from .i18n import DENIAL_LABELS, OUTCOME_LABEL_KEYS, Formatter, translations

LANGUAGE_NAMES = {"en": "English", "de": "Deutsch"}
KIND_LABEL_KEYS = {kind: f"kind.{kind}" for kind in KNOWN_KINDS}
VERDICT_LABEL_KEYS = {
    Verdict.DOWN: N_("verdict.down"),
    Verdict.FLAKY: N_("verdict.flaky"),
    Verdict.SLOW: N_("verdict.slow"),
    Verdict.UNCERTAIN: N_("verdict.uncertain"),
    Verdict.TOO_FEW_CALLS: N_("verdict.too-few-calls"),
    Verdict.RELIABLE: N_("verdict.reliable"),
}
# Extraction markers for the kind labels, which are selected by the kind's value.
_KIND_LABELS = (
    N_("kind.context"), N_("kind.request"), N_("kind.llm"), N_("kind.tool"),
    N_("kind.assembled"), N_("kind.dropped"), N_("kind.approval"), N_("kind.input"),
)
assert set(_KIND_LABELS) == set(KIND_LABEL_KEYS.values())
assert all(key == f"verdict.{verdict.value}" for verdict, key in VERDICT_LABEL_KEYS.items())

CSP_SITE = (
    "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; "
    "base-uri 'none'; form-action 'none'"
)




def make_environment(language: str) -> jinja2.Environment:
    """The one Jinja2 environment per language: autoescaped, strict, with its catalog."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_path("templates"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.i18n"],
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.install_gettext_translations(translations(language), newstyle=True)  # type: ignore[attr-defined]
    environment.globals["outcome_badge"] = outcome_badge
    environment.globals["urls"] = urls  # every link a template writes comes from there
    return environment


def stylesheet() -> str:
    return (resource_path("templates") / "assets" / "style.css").read_text(encoding="utf-8")


def whole_run_stylesheet() -> str:
    """What the whole run and denied calls add to the stylesheet (``PageKit.whole_run_styled``)."""
    return (resource_path("templates") / "assets" / "whole-run.css").read_text(encoding="utf-8")


def inline_style_csp(css: str) -> str:
    """A policy for the single-file timeline: only the one inlined stylesheet, by its hash."""
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode("ascii")
    return f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"


@dataclass(frozen=True)
class SiteSettings:
    title: str | None
    languages: tuple[str, ...]
    timezone_name: str
    min_calls: int
    time_range: tuple[int, int] | None
    show_approvers: bool = False


class PageKit:
    """What every page of one language needs: environment, formatter, labels."""

    def __init__(self, language: str, formatter: Formatter, settings: SiteSettings,
                 whole: WholeRuns | None = None, *, spend: Mapping[str, Any] | None = None,
                 denials_shown: bool = False) -> None:
        """``whole``: the runs' rows, calls and decisions; ``spend``: what each run's steps say it
        spent; ``denials_shown``: the site tells denied calls apart (``SiteData.denials_known``)."""
        self.language = language
        self.whole = whole if whole is not None else WholeRuns()
        self.spend = spend if spend is not None else {}
        self.denials_shown = denials_shown
        self.environment = make_environment(language)
        self.gettext = translations(language).gettext
        self.ngettext = translations(language).ngettext
        self.format = formatter
        self.settings = settings
        self.outcome_labels = {outcome.value: self.gettext(key) for outcome, key in OUTCOME_LABEL_KEYS.items()}
        self.kind_labels = {kind: self.gettext(key) for kind, key in KIND_LABEL_KEYS.items()}
        self.denial_labels = {denial.value: self.gettext(key) for denial, key in DENIAL_LABELS.items()}
        self.verdict_labels = {verdict.value: self.gettext(key) for verdict, key in VERDICT_LABEL_KEYS.items()}
        self.title = settings.title if settings.title else self.gettext("nr-llm agent runs")
        self._range_template = self.gettext("%(first)s to %(last)s")
        time_range = settings.time_range or (None, None)
        self.time_range = self.range_text(*time_range)
        self.timeline = TimelineMarkup(self)
        self.run_rows = RunRows(self)
        self._made: dict[tuple[str, bool], Any] = {}

    @property
    def whole_run_styled(self) -> bool:
        """The site's pages show the whole run or denied calls, and link their stylesheet."""
        return self.whole.merged or self.denials_shown

    def rows_left_out(self, count: int) -> str:
        """What a Markdown table says of the rows it had no room for."""
        return self.ngettext("%(count)s more row is not shown.", "%(count)s more rows are not shown.",
                             count) % {"count": self.format.number(count)}

    def range_text(self, first: int | None, last: int | None) -> str:
        """The header's time range: of the whole data, or of the one run a page shows."""
        if first is None or last is None:
            return self.gettext("no dated steps")
        return self.formatted_range_text(self.format.datetime(first), self.format.datetime(last))

    def formatted_range_text(self, first: str, last: str) -> str:
        """``range_text`` of two times already formatted (a run page has them at hand)."""
        return self._range_template % {"first": first, "last": last}

    def once(self, name: str, make: Any, variant: bool = False) -> Any:
        """What ``make`` makes for this language (a run header's or a waterfall's markup), made once on first use."""
        key = (name, variant)
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    def pagination_nav(self, pages: Any) -> Markup:
        """A page's navigation as the templates' ``pagination`` macro writes it."""
        return Markup(self.environment.get_template("macros.html").module.pagination(pages))  # type: ignore[attr-defined]

    def render(self, template: str, path: str, **context: Any) -> str:
        """A page at ``path`` (relative to the site root), with the chrome every page has."""
        depth = path.count("/")
        root = urls.root_of(path)
        switches = [
            {"language": other, "name": LANGUAGE_NAMES[other], "href": urls.in_other_language(path, other)}
            for other in self.settings.languages
            if other != self.language or (depth == 0 and len(self.settings.languages) > 1)
        ]
        page = {
            "lang": self.language,
            "root": root,
            "title": self.title,
            "time_range": self.time_range,
            "timezone": self.settings.timezone_name,
            "switches": switches,
            "csp": CSP_SITE,
            "inline_css": None,
            "standalone": False,
            "version": __version__,
        }
        page.update(context.pop("page", {}))
        return self.environment.get_template(template).render(page=page, labels=self, **context)

