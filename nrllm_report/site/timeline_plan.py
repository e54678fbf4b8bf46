"""Timeline rows for a whole table of steps, in every language, without a loop per row."""

from __future__ import annotations

from functools import cached_property
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from ..core.lists import joined_items
from ..core.schema import DENIAL_COLUMN
from .fast_markup import Cell
from .i18n import SECONDS_FROM_MS, Formatter
from .kit import PageKit
from .timeline_facts import COUNT_END, LISTED, OUTCOME_AND_DENIAL
from .waterfall import StepColumns


class TimelinePlan:
    """Timeline rows for a whole table of steps, in every language, without a loop per row.

    Each cell's text is made in Python once per distinct value in the table and
    per language; Arrow spreads the texts over the rows and joins the cells. The
    distinct values and each row's index into them are computed once, before the
    render workers fork, and shared by them.
    """

    def __init__(
        self, steps: pa.Table, kits: dict[str, PageKit], *, server_href: dict[str, str],
        texts_made: dict[tuple[str, int], dict[Any, str]] | None = None,
    ) -> None:
        """``texts_made`` keeps each cell's texts from one plan to the next (a build makes
        a plan per partition): a value is formatted once per build, not once per plan."""
        texts_made = {} if texts_made is None else texts_made
        self.steps = steps
        self.times = steps.column("crdate")
        self.sequences = steps.column("sequence")
        layouts = {language: kit.timeline.layout(server_href) for language, kit in kits.items()}
        first = next(iter(layouts.values()))
        zone_format = next(iter(kits.values())).format
        sources: dict[str, tuple[pa.ChunkedArray, list[Any]]] = {}
        self.parts: list[str | tuple[pa.ChunkedArray, dict[str, pa.Array]]] = []  # literals; (indices, texts)
        for position, item in enumerate(first):
            if isinstance(item, str):
                assert all(layout[position] == item for layout in layouts.values())
                self.parts.append(item)
                continue
            if item.source not in sources:
                values = self._source(steps, item.source, fmt=zone_format)
                distinct = pc.unique(values).drop_null()
                # a null (no value) indexes the text after the distinct values': the cell's ``missing``
                indices = pc.fill_null(pc.index_in(values, value_set=distinct), pa.scalar(len(distinct), pa.int32()))
                sources[item.source] = (indices, self._keys(distinct, item.source))
            indices, keys = sources[item.source]
            texts = {}
            cells = {language: layout[position] for language, layout in layouts.items()}
            assert all(isinstance(cell, Cell) for cell in cells.values())
            for language, cell in cells.items():
                made, make = texts_made.setdefault((language, position), {}), cast(Cell, cell).make
                texts[language] = pa.array(
                    [made[key] if key in made else made.setdefault(key, str(make(key))) for key in keys]
                    + [cast(Cell, cell).missing], pa.string()
                )
            self.parts.append((indices, texts))

    @staticmethod
    def _source(steps: pa.Table, name: str, *, fmt: Formatter) -> pa.ChunkedArray:
        if name == "second of day":
            return seconds_of_day(steps.column("crdate"), fmt)
        if name == "shown duration":
            return _shown_durations(steps.column("durationMs"))
        if name == OUTCOME_AND_DENIAL:
            return outcome_and_denial(steps)
        if name.startswith(LISTED):
            count, names = name[len(LISTED):].split("+")
            return listed_values(steps.column(count), steps.column(names) if names else None)
        return steps.column(name)

    @staticmethod
    def _keys(distinct: pa.Array, name: str) -> list[Any]:
        if name == "shown duration":  # encoded as +tenths (milliseconds) or -tenths (seconds)
            return [(code < 0, abs(code) / 10) for code in distinct.to_pylist()]
        return distinct.to_pylist()

    @cached_property
    def step_columns(self) -> StepColumns:
        """The columns a run's waterfall draws, as lists: made once per plan, on first use."""
        return StepColumns.of(self.steps)

    def rows(self, language: str, *, start: int, stop: int) -> list[str]:
        """The ``<tr>`` of each step from ``start`` to ``stop`` of the table, as strings."""
        return self.row_texts(language, start=start, stop=stop).to_pylist()

    def row_texts(self, language: str, *, start: int, stop: int) -> pa.ChunkedArray:
        """``rows`` as Arrow strings, for a caller that merges them with other rows first."""
        if stop <= start:
            return pa.chunked_array([], pa.string())
        columns: list[Any] = []
        for part in self.parts:
            if isinstance(part, str):
                columns.append(part)
            else:
                indices, texts = part
                columns.append(pc.take(texts[language], indices.slice(start, stop - start)))
        return pc.binary_join_element_wise(*columns, "")


def outcome_and_denial(steps: pa.Table) -> pa.ChunkedArray:
    """Each step's outcome, with its denial after ``COUNT_END`` where a denial explains it; the
    outcome alone for steps no sweep went over (no ``denial`` column: nothing denied)."""
    outcome = steps.column("outcome")
    if DENIAL_COLUMN not in steps.column_names:
        return outcome
    denial = steps.column(DENIAL_COLUMN)
    return pc.if_else(pc.is_valid(denial), pc.binary_join_element_wise(outcome, denial, COUNT_END), outcome)


def listed_values(counts: pa.ChunkedArray, names: pa.ChunkedArray | None) -> pa.ChunkedArray:
    """A count and a list of names as one string, so that a timeline formats each distinct
    pair once: the count, ``COUNT_END``, then ``1`` and the names (``core.lists.joined_items``)
    or ``0`` for no list; null when both are null."""
    count_text = pc.fill_null(pc.cast(counts, pa.string()), "")
    if names is None:
        present = pc.is_valid(counts)
        joined = pa.scalar("0")
    else:
        present = pc.or_(pc.is_valid(counts), pc.is_valid(names))
        joined = pc.fill_null(pc.binary_join_element_wise("1", joined_items(names), ""), "0")
    key = pc.binary_join_element_wise(count_text, joined, COUNT_END)
    return pc.if_else(present, key, pa.scalar(None, pa.string()))


def seconds_of_day(crdate: pa.ChunkedArray, fmt: Formatter) -> pa.ChunkedArray:
    """The second of the local day of each step (the zone's offset taken per minute)."""
    minutes = pc.divide(crdate, 60)
    distinct = pc.unique(minutes).drop_null()
    offsets = pa.array([fmt.offset_at(minute * 60) for minute in distinct.to_pylist()], pa.int64())
    local = pc.cast(pc.add(crdate, pc.take(offsets, pc.index_in(minutes, value_set=distinct))), pa.float64())
    days = pc.floor(pc.divide(local, 86_400.0))
    return pc.cast(pc.subtract(local, pc.multiply(days, 86_400.0)), pa.int64())


def _shown_durations(milliseconds: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each duration as it is shown, as a whole-number code: tenths of a millisecond under ten
    seconds, minus tenths of a second from there on; null for none (0). Rounded first, so
    each shown value is formatted once, however many raw values round to it."""
    in_milliseconds = _tenths(milliseconds)
    in_seconds = _tenths(pc.divide(milliseconds, 1000.0))
    code = pc.round(pc.if_else(
        pc.less(milliseconds, SECONDS_FROM_MS),
        pc.multiply(in_milliseconds, 10.0),
        pc.multiply(pc.multiply(in_seconds, 10.0), -1.0),
    ))
    return pc.if_else(pc.equal(milliseconds, 0.0), pa.scalar(None, pa.float64()), code)


TENTHS_EXACT_BELOW = 1e15


def _tenths(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Values rounded half-even to one decimal as their decimal text says (``round_tenths``)."""
    exact = pc.less(values, TENTHS_EXACT_BELOW)
    decimals = pc.cast(pc.if_else(exact, values, 0.0), pa.decimal128(38, 6))
    rounded = pc.cast(pc.round(decimals, 1, round_mode="half_to_even"), pa.float64())
    return pc.if_else(exact, rounded, values)


