"""What every page of one language is rendered with: the Jinja2 environment (autoescaped,
strict, with the language's catalog and ``site.urls`` as a global), the formatter, the labels
and the chrome every page has (``PageKit.render``)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import jinja2
import jinja2.ext
import jinja2.lexer
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




class CatalogConstants(jinja2.ext.Extension):
    """``{{ _("a literal") }}`` translated when a template is compiled rather than each time it is
    rendered: an environment is one language's, so its compiled templates may hold its words. The
    output is what newstyle gettext gives at render time under autoescape, the translation as
    markup, formatted with no variables (``%%`` is ``%``), so a page is byte for byte the same;
    a call with variables (``_("Run %(run)s", run=…)``) or inside an expression stays a call.
    A run page holds some twenty such words: translated per page, they were most of its cost."""

    CALL = ("variable_begin", "name", "lparen", "string", "rparen", "variable_end")

    def filter_stream(self, stream: jinja2.lexer.TokenStream) -> Iterator[jinja2.lexer.Token]:
        gettext = getattr(self.environment, "catalog_gettext")  # noqa: B009 (set by make_environment)
        pending: list[jinja2.lexer.Token] = []
        for token in stream:
            pending.append(token)
            while pending and not self._may_be_call(pending):
                yield pending.pop(0)
            if len(pending) == len(self.CALL):
                text = Markup(gettext(pending[3].value)) % {}
                yield jinja2.lexer.Token(pending[0].lineno, "data", str(text))
                pending = []
        yield from pending

    def _may_be_call(self, tokens: list[jinja2.lexer.Token]) -> bool:
        """``tokens`` begin ``{{ _("a literal") }}``, or all of it."""
        return ([token.type for token in tokens] == list(self.CALL[:len(tokens)])
                and (len(tokens) < 2 or tokens[1].value == "_"))


def make_environment(language: str) -> jinja2.Environment:
    """The one Jinja2 environment per language: autoescaped, strict, with its catalog (its literal
    words translated as templates compile, ``CatalogConstants``); templates are loaded once."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_path("templates"))),
        autoescape=True,
        auto_reload=False,
        undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.i18n", CatalogConstants],
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.extend(catalog_gettext=translations(language).gettext)
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

    def __init__(self, language: str, formatter: Formatter, *, settings: SiteSettings,
                 whole: WholeRuns | None = None, spend: Mapping[str, Any] | None = None,
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

    def once(self, name: str, make: Any, *, variant: bool = False) -> Any:
        """What ``make`` makes for this language (a run header's or a waterfall's markup), made once on first use."""
        key = (name, variant)
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    def switches(self, path: str) -> list[SimpleNamespace]:
        """The links of the page at ``path`` to itself in the other languages (on the root's pages, every language)."""
        depth = path.count("/")
        return [
            SimpleNamespace(language=other, name=LANGUAGE_NAMES[other], href=urls.in_other_language(path, other))
            for other in self.settings.languages
            if other != self.language or (depth == 0 and len(self.settings.languages) > 1)
        ]

    def macro(self, name: str) -> Any:
        """A macro of ``macros.html``, to call from Python (a page's parts that a ``PagedListFrame`` fills in)."""
        return self.once(f"macro {name}", lambda: getattr(self.environment.get_template("macros.html").module, name))

    def render(self, template: str, path: str, **context: Any) -> str:
        """A page at ``path`` (relative to the site root), with the chrome every page has."""
        page = {
            "lang": self.language,
            "root": urls.root_of(path),
            "title": self.title,
            "time_range": self.time_range,
            "timezone": self.settings.timezone_name,
            "switches": self.switches(path),
            "csp": CSP_SITE,
            "inline_css": None,
            "standalone": False,
            "version": __version__,
        }
        page.update(context.pop("page", {}))
        # Attributes, not keys: Jinja looks ``page.root`` up as an attribute first.
        return self.environment.get_template(template).render(page=SimpleNamespace(**page), labels=self, **context)

