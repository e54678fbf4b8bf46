"""Catalogs, compiled in memory at start-up, and locale formatting through Babel.

Formatting a cell through Babel costs more than rendering it, so the formatters
cache by value: a date per day, a time per second of the day, a number per value.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone, tzinfo
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cache, lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from babel import Locale, dates, numbers
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations

from ..core.model import N_, Outcome
from ..core.resources import resource_path
from ..core.tables import Denial

DOMAIN = "messages"

# The label of an outcome is selected by the outcome's own value (ADR-191, decision 3).
OUTCOME_LABEL_KEYS: dict[Outcome, str] = {
    Outcome.OK: N_("outcome.ok"),
    Outcome.FAILED: N_("outcome.failed"),
    Outcome.CANCELLED: N_("outcome.cancelled"),
}
assert all(key == f"outcome.{outcome.value}" for outcome, key in OUTCOME_LABEL_KEYS.items())
# What explains a denied call, selected by the denial's value like an outcome's label.
DENIAL_LABELS: dict[Denial, str] = {
    Denial.OPERATOR: N_("denial.operator"),
    Denial.POLICY: N_("denial.policy"),
}
assert all(key == f"denial.{denial.value}" for denial, key in DENIAL_LABELS.items())


class CatalogError(Exception):
    """A catalog is missing or cannot be read; the package is broken, not the user's input."""


def catalog_path(language: str) -> Path:
    return resource_path("translations") / language / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
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
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


TENTH = Decimal("0.1")


def round_tenths(value: float) -> float:
    """Half-even to one decimal on the number as written (``5.65`` gives 5.6), not on its binary
    approximation, which is how the database's decimal(10,2) durations mean it."""
    if value >= 1e15:
        return value
    return float(Decimal(repr(value)).quantize(TENTH, rounding=ROUND_HALF_EVEN))


DayField = tuple[list[str], str]  # a field's texts, by the "hour", "minute" or "second" they show


def _hours(width: int, *, twelve: bool) -> DayField:
    return [f"{(hour % 12 or 12) if twelve else hour:0{width}d}" for hour in range(24)], "hour"


@cache
def _field_indices(field: str) -> pa.Array:
    """Each second of the day's hour, minute or second, in order."""
    per_second = {"hour": lambda second: second // 3600, "minute": lambda second: second // 60 % 60,
                  "second": lambda second: second % 60}[field]
    return pa.array([per_second(second) for second in range(SECONDS_PER_DAY)], pa.int32())


def _texts_of_the_day(parts: list[str | DayField]) -> list[str]:
    """Every second of the day's text from the pattern's parts, joined by Arrow."""
    columns = [part if isinstance(part, str) else pc.take(pa.array(part[0], pa.string()), _field_indices(part[1]))
               for part in parts]
    if all(isinstance(column, str) for column in columns):
        return ["".join(parts)] * SECONDS_PER_DAY  # type: ignore[arg-type]
    return pc.binary_join_element_wise(*columns, "").to_pylist()


def compile_time_pattern(locale: Locale) -> Callable[[int], str] | None:
    """A function of the second of the day for the locale's medium time pattern.

    Only the fields a time of day has (H, h, m, s, a and quoted text) are taken;
    any other pattern returns None and Babel formats instead. The day's 86,400 texts
    are made at the first call, all at once: a build shows most of them.
    """
    pattern = locale.time_formats["medium"].pattern
    periods = locale.day_periods["format"]["abbreviated"]
    am, pm = periods.get("am"), periods.get("pm")
    parts: list[str | DayField] = []
    position = 0
    while position < len(pattern):
        char = pattern[position]
        if char == "'":
            end = pattern.find("'", position + 1)
            if end < 0:
                return None
            parts.append(pattern[position + 1 : end] or "'")
            position = end + 1
            continue
        run = 1
        while position + run < len(pattern) and pattern[position + run] == char:
            run += 1
        field = char * run
        if field in ("H", "HH"):
            parts.append(_hours(run, twelve=False))
        elif field in ("h", "hh"):
            parts.append(_hours(run, twelve=True))
        elif field == "mm":
            parts.append(([f"{minute:02d}" for minute in range(60)], "minute"))
        elif field == "ss":
            parts.append(([f"{second:02d}" for second in range(60)], "second"))
        elif field == "a" and am and pm:
            parts.append(([am if hour < 12 else pm for hour in range(24)], "hour"))
        elif char.isalpha():
            return None
        else:
            parts.append(field)
        position += run
    day: list[str] = []

    def time_of_day(second: int) -> str:
        if not day:
            day.extend(_texts_of_the_day(parts))
        return day[second]

    return time_of_day


SECONDS_PER_DAY = 86_400
SECONDS_FROM_MS = 10_000  # durations from ten seconds on are shown in seconds
MILLISECONDS = "\u00a0ms"
SECONDS = "\u00a0s"
PROBE_SECONDS = (0, 3_600 + 5 * 60 + 9, 12 * 3_600 + 1, 13 * 3_600 + 59 * 60 + 59, SECONDS_PER_DAY - 1)
PROBE_NUMBERS = (0, 7, 12.0, 0.5, 999, 1_000, 1_234.5, 1_940.9, 1_234_567, 98_765.125)
PROBE_COSTS = (0.0, 0.004775, 0.1, 12.5, 1_234.5678915, 0.0000005, 0.0000015, 3.14159265)
COST_PATTERN = "#,##0.00####"
MICRO = Decimal("0.000001")


class Formatter:
    """Dates, times and numbers for one locale and one time zone.

    Times and numbers take a fast path built from the locale's own pattern and
    symbols, and only where that path gives Babel's output for a set of probes;
    otherwise every call goes to Babel (cached).
    """

    def __init__(self, language: str, zone: tzinfo) -> None:
        self.language = language
        self.locale = Locale.parse(language)
        self.zone = zone
        self.format_date = lru_cache(maxsize=4096)(self._format_date)
        self._babel_time = lru_cache(maxsize=SECONDS_PER_DAY)(self._format_time_of_day)
        self._babel_number = lru_cache(maxsize=100_000)(self._format_number)
        self._datetime_pattern = str(self.locale.datetime_formats["medium"])
        self._offsets: dict[int, int] = {}
        compiled = compile_time_pattern(self.locale)
        if compiled is None or any(compiled(second) != self._babel_time(second) for second in PROBE_SECONDS):
            compiled = self._babel_time
        self._time_of_day: Callable[[int], str] = compiled
        self._separators = str.maketrans({",": numbers.get_group_symbol(self.locale),
                                          ".": numbers.get_decimal_symbol(self.locale)})
        self._fast_numbers = all(self._fast_number(value) == self._format_number(value) for value in PROBE_NUMBERS)
        self._integers: dict[int, str] = {}
        self._costs: dict[float, str] = {}
        self._fast_costs = all(self._fast_cost(value) == self._babel_cost(value) for value in PROBE_COSTS)

    def local(self, timestamp: int) -> datetime:
        return (EPOCH + timedelta(seconds=timestamp)).astimezone(self.zone)

    def offset_at(self, timestamp: int) -> int:
        """The zone's UTC offset in seconds at ``timestamp``."""
        return self._offset(timestamp)

    def time_of_day(self, second: int) -> str:
        """A local second of the day (0..86399) as the locale writes a time."""
        return self._time_of_day(second)

    def _offset(self, timestamp: int) -> int:
        """The zone's UTC offset in seconds; offsets change only on whole minutes."""
        minute = timestamp // 60
        offset = self._offsets.get(minute)
        if offset is None:
            delta = self.local(minute * 60).utcoffset()
            offset = self._offsets[minute] = int(delta.total_seconds()) if delta else 0
        return offset

    def _format_date(self, day: date) -> str:
        return dates.format_date(day, "medium", locale=self.locale)

    def _format_time_of_day(self, second: int) -> str:
        moment = datetime(2000, 1, 1) + timedelta(seconds=second)
        return dates.format_time(moment, "medium", tzinfo=timezone.utc, locale=self.locale)

    def datetime(self, timestamp: int | None) -> str:
        if timestamp is None:
            return ""
        local_seconds = timestamp + self._offset(timestamp)
        day = date.fromordinal(EPOCH_ORDINAL + local_seconds // SECONDS_PER_DAY)
        return self._datetime_pattern.replace("{1}", self.format_date(day)).replace(
            "{0}", self._time_of_day(local_seconds % SECONDS_PER_DAY)
        )

    def local_day(self, timestamp: int) -> date:
        """The calendar day of ``timestamp`` in the zone."""
        return date.fromordinal(EPOCH_ORDINAL + (timestamp + self._offset(timestamp)) // SECONDS_PER_DAY)

    def time(self, timestamp: int | None) -> str:
        if timestamp is None:
            return ""
        return self._time_of_day((timestamp + self._offset(timestamp)) % SECONDS_PER_DAY)

    def date(self, day: date) -> str:
        return self.format_date(day)

    def _format_number(self, value: int | float) -> str:
        return numbers.format_decimal(value, locale=self.locale)

    def _fast_number(self, value: int | float) -> str | None:
        if isinstance(value, int):
            return f"{value:,}".translate(self._separators)
        if value == int(value):
            return f"{int(value):,}".translate(self._separators)
        if round(value, 3) == value:
            return f"{value:,.3f}".rstrip("0").translate(self._separators)
        return None

    def number(self, value: int | float) -> str:
        text = self._integers.get(value) if type(value) is int else None
        if text is not None:
            return text
        if self._fast_numbers and 0 <= value < 1e15:
            text = self._fast_number(value)
            if text is not None:
                if type(value) is int and len(self._integers) < 100_000:
                    self._integers[value] = text
                return text
        return self._babel_number(value)

    def duration(self, milliseconds: float) -> str:
        """Milliseconds under ten seconds, seconds above, in the locale's digits."""
        if milliseconds < SECONDS_FROM_MS:
            return self.number(round_tenths(milliseconds)) + MILLISECONDS
        return self.number(round_tenths(milliseconds / 1000)) + SECONDS

    def percent(self, rate: float | None) -> str:
        if rate is None:
            return "–"
        return numbers.format_percent(round(rate, 3), locale=self.locale, decimal_quantization=False)

    def _babel_cost(self, value: float) -> str:
        return numbers.format_decimal(value, format=COST_PATTERN, locale=self.locale)

    def _fast_cost(self, value: float) -> str:
        """The cost pattern's output (2 to 6 decimals, half-even on the decimal text) by hand."""
        quantized = Decimal(repr(value)).quantize(MICRO, rounding=ROUND_HALF_EVEN)
        text = f"{quantized:,f}"
        whole, _, fraction = text.partition(".")
        fraction = fraction.rstrip("0").ljust(2, "0")
        return f"{whole}.{fraction}".translate(self._separators)

    def cost(self, value: float) -> str:
        """A cost as the cost pattern writes it; made once per value (a run's shows on its page,
        in the run index and in its lists)."""
        text = self._costs.get(value)
        if text is None:
            text = self._fast_cost(value) if self._fast_costs and 0 <= value < 1e12 else self._babel_cost(value)
            if len(self._costs) < 100_000:
                self._costs[value] = text
        return text

