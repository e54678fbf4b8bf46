"""Dataclasses that cross between processes by the hundred thousand, pickled as their fields' tuple.

The sweep's workers send each partition's figures back to the build (a summary, a span and
a few counts per run, counts per run and server and per run and tool: some 400,000 objects
at 50,000 runs), and the build unpickles them one partition after another, on one core.
A slotted dataclass pickles through ``dataclasses``' own ``__getstate__``/``__setstate__``,
which look the fields up per object (``fields(self)``) and set them one by one; its class
and the tuple of its values, read by one ``attrgetter``, pickle in a third of that time and
unpickle in less than half.
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter
from typing import Any, TypeVar

Class = TypeVar("Class", bound=type)


def pickled_as_fields(cls: Class) -> Class:
    """``cls`` (a dataclass whose fields are all its ``__init__``'s, in order) pickled as ``cls(*fields)``."""
    names = [field.name for field in dataclasses.fields(cls)]
    if any(not field.init for field in dataclasses.fields(cls)) or len(names) < 2:
        raise TypeError(f"{cls.__name__}: every field must be an __init__ argument, and there must be two or more")
    values = attrgetter(*names)

    def __reduce__(self: Any) -> tuple[type, tuple[Any, ...]]:
        return cls, values(self)

    cls.__reduce__ = __reduce__  # type: ignore[assignment]
    return cls
