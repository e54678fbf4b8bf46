"""Catalogs, compiled in memory at start-up, and locale formatting through Babel.

Formatting a cell through Babel costs more than rendering it, so the formatters
cache by value: a date per day, a time per second of the day, a number per value.
"""

from __future__ import annotations

import io
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from pathlib import Path
from typing import Callable

from babel import Locale, dates, numbers
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations

from .model import N_, Outcome
from .resources import resource_path

LANGUAGES: tuple[str, ...] = ("en", "de")
DOMAIN = "messages"

# The label of an outcome is selected by the outcome's own value (ADR-191, decision 3).
OUTCOME_LABEL_KEYS: dict[Outcome, str] = {
    Outcome.OK: N_("outcome.ok"),
    Outcome.FAILED: N_("outcome.failed"),
    Outcome.CANCELLED: N_("outcome.cancelled"),
}
assert all(key == f"outcome.{outcome.value}" for outcome, key in OUTCOME_LABEL_KEYS.items())


class CatalogError(Exception):
    """A catalog is missing or cannot be read; the package is broken, not the user's input."""


def catalog_path(language: str) -> Path:
    return resource_path("translations") / language / "LC_MESSAGES" / f"{DOMAIN}.po"


@lru_cache(maxsize=None)
def translations(language: str) -> Translations:
    """The language's catalog compiled from its ``.po`` file, so it is never stale."""
    path = catalog_path(language)
    if not path.is_file():
        raise CatalogError(f"the {language!r} catalog is missing: {path}")
    with path.open("rb") as stream:
        catalog = read_po(stream, locale=language, domain=DOMAIN)
    compiled = io.BytesIO()
    write_mo(compiled, catalog, use_fuzzy=False)
    compiled.seek(0)
    return Translations(compiled, domain=DOMAIN)


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class Formatter:
    """Dates, times and numbers for one locale and one time zone."""

    def __init__(self, language: str, zone: tzinfo) -> None:
        self.language = language
        self.locale = Locale.parse(language)
        self.zone = zone
        self.format_date = lru_cache(maxsize=4096)(self._format_date)
        self.format_time = lru_cache(maxsize=200_000)(self._format_time)
        self.number = lru_cache(maxsize=100_000)(self._number)
        self._datetime_pattern = str(self.locale.datetime_formats["medium"])

    def local(self, timestamp: int) -> datetime:
        return (EPOCH + timedelta(seconds=timestamp)).astimezone(self.zone)

    def day_of(self, timestamp: int) -> date:
        return self.local(timestamp).date()

    def _format_date(self, day: date) -> str:
        return dates.format_date(day, "medium", locale=self.locale)

    def _format_time(self, moment: datetime) -> str:
        return dates.format_time(moment, "medium", tzinfo=moment.tzinfo, locale=self.locale)

    def datetime(self, timestamp: int | None) -> str:
        if timestamp is None:
            return ""
        moment = self.local(timestamp)
        return self._datetime_pattern.replace("{1}", self.format_date(moment.date())).replace(
            "{0}", self.time(timestamp)
        )

    def time(self, timestamp: int | None) -> str:
        if timestamp is None:
            return ""
        moment = self.local(timestamp)
        # Cached by wall-clock second (the zone's offset is fixed within one).
        return self.format_time(moment.replace(year=2000, month=1, day=1, tzinfo=None))

    def date(self, day: date) -> str:
        return self.format_date(day)

    def _number(self, value: int | float) -> str:
        return numbers.format_decimal(value, locale=self.locale)

    def duration(self, milliseconds: float) -> str:
        """Milliseconds under ten seconds, seconds above, in the locale's digits."""
        if milliseconds < 10_000:
            return self.number(round(milliseconds, 1)) + "\u00a0ms"
        return self.number(round(milliseconds / 1000, 1)) + "\u00a0s"

    def percent(self, rate: float | None) -> str:
        if rate is None:
            return "–"
        return numbers.format_percent(round(rate, 3), locale=self.locale, decimal_quantization=False)

    def cost(self, value: float) -> str:
        return numbers.format_decimal(value, format="#,##0.00####", locale=self.locale)


def make_formatter(language: str, zone: tzinfo) -> Formatter:
    return Formatter(language, zone)


Gettext = Callable[[str], str]
