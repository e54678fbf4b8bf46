"""Arrow list arrays taken apart and put back together: the items of each list worked on as
one flat array, then the lists rebuilt around them. Used by the readers, the checker and
the store, so it lives with the model."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc


def combined(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def relisted(lists: pa.Array | pa.ChunkedArray, items: pa.Array | pa.ChunkedArray) -> pa.ListArray:
    """``lists`` with their items replaced by ``items`` (as many, in ``list_flatten``'s order)."""
    lists = combined(lists)
    counts = pc.fill_null(pc.list_value_length(lists), 0)
    offsets = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(pc.cast(counts, pa.int64()))])
    return pa.ListArray.from_arrays(pc.cast(offsets, pa.int32()), combined(items), mask=pc.is_null(lists))


def rows_holding(lists: pa.Array | pa.ChunkedArray, flagged_items: pa.Array | pa.ChunkedArray) -> pa.BooleanArray:
    """For each list, whether one of its items is flagged (one flag per ``list_flatten`` item)."""
    lists = combined(lists)
    parents = pc.filter(pc.list_parent_indices(lists), pc.fill_null(combined(flagged_items), True))
    return pc.is_in(pa.array(range(len(lists)), pa.int64()), value_set=pc.unique(pc.cast(parents, pa.int64())))


def all_true(length: int) -> pa.BooleanArray:
    return pa.repeat(pa.scalar(True), length)


ITEM_END = "\x1e"
ESCAPES = (("\\", "\\\\"), ("\x1e", "\\i"), ("\x1f", "\\e"))


def with_positions(flags: pa.Array, positions: list[int], *, value: bool) -> pa.BooleanArray:
    """``flags`` with the rows at ``positions`` set to ``value`` (a few, found one by one)."""
    if not positions:
        return flags
    marks = flags.to_pylist()
    for position in positions:
        marks[position] = value
    return pa.array(marks, pa.bool_())


def escaped(texts: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Text that holds no separator (``\\x1e``, ``\\x1f``): backslashes doubled, separators escaped."""
    for plain, escape in ESCAPES:
        texts = pc.replace_substring(texts, plain, escape)
    return texts


def joined_items(lists: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Each list of strings as one string: its items escaped, each ended by ``ITEM_END``; null stays null."""
    ended = pc.binary_join_element_wise(escaped(pc.list_flatten(lists)), "", ITEM_END)
    return pc.binary_join(relisted(lists, ended), "")


def split_items(joined: str) -> list[str]:
    """The items of one of ``joined_items``' strings, unescaped."""
    items = joined.split(ITEM_END)[:-1]
    return [_unescaped(item) for item in items]


def _unescaped(text: str) -> str:
    if "\\" not in text:
        return text
    meaning = {"\\": "\\", "i": "\x1e", "e": "\x1f"}
    return re.sub(r"\\(.)", lambda match: meaning.get(match.group(1), match.group(1)), text, flags=re.S)
