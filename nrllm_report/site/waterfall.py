"""A run as a waterfall (issue 23): one bar per step on a shared time axis, above its timeline.

Plain HTML and CSS, no script and no inline style: every bar is a link to its timeline row,
placed and sized by classes (``x0``..``x100``, ``w0``..``w100``: whole percent of the time
axis, in ``templates/assets/style.css``), coloured by its kind and patterned by its outcome.
A step's start is what its row tells: its ``crdate`` (a second's resolution) less its
duration, never before the previous step's start. Provider calls and governance decisions
stand on lanes of their own; a long run's steps share a lane per round.

This module computes where the bars stand, and nothing of their markup: a run's geometry
once for all its languages, what does not depend on the run's time axis (each step's classes,
its label in each language) once per table of steps. ``fast_markup.waterfall_markup`` writes
the figure from it, held by a test to the ``waterfall`` macro of ``templates/macros.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa

from ..core.model import KNOWN_KINDS
from ..core.schema import DENIAL_COLUMN
from .i18n import SECONDS, round_tenths
from .labels import DECISION_LABEL_KEYS, SOURCE_LABEL_KEYS, label

if TYPE_CHECKING:
    from ..aggregate.whole_run import CallRow, DecisionRow

GROUP_ABOVE = 60  # steps; a longer run draws a lane per round, so that it stays legible
MAX_LANES = 60  # lanes of rounds; more rounds share lanes
LONGEST_NAMED = 3  # steps the text alternative names
AXIS_TICKS = 4  # at most this many ticks after 0
NICE_STEPS = (1, 2, 5)
# A bar's position classes by (x, w); none for x0 (the CSS's default start) and w0 (the least
# width), so that a page carries fewer bytes.
POSITIONS = tuple(tuple(" ".join(([f"x{x}"] if x else []) + ([f"w{w}"] if w else [])) for w in range(101))
                  for x in range(101))
ROW_IDS = {"call": "c", "governance": "d"}  # a merged row's id, ``cN``, ``dN``: a bar links to it
OUTCOME_FLAGS = (("failed", 1), ("cancelled", 2), ("denied", 4))  # what a bar's pattern says, for the legend



def step_classes(kind: Any, outcome: Any, *, denial: Any) -> str:
    """A step bar's classes: its kind (none for a tool: the CSS's default colour, the most
    common kind in fewer bytes), its outcome but ok, and ``denied``."""
    names = [] if kind == "tool" else [kind if kind in KNOWN_KINDS else "other"]
    if outcome and outcome != "ok":
        names.append(outcome)
    if denial:
        names.append("denied")
    return " ".join(names)


class StepColumns:
    """A table of steps as the waterfall draws it: the columns it needs as lists, each row's
    classes, and (per language, on first use) each row's label; made once per table."""

    def __init__(self, steps: pa.Table) -> None:
        def column(name: str) -> list[Any]:
            return steps.column(name).to_pylist() if name in steps.column_names else [None] * steps.num_rows

        self.crdate, self.kind, self.tool = column("crdate"), column("kind"), column("toolName")
        self.sequence = column("sequence")
        self.duration = [float(duration or 0.0) for duration in column("durationMs")]
        self.candidates = start_candidates(self.crdate, self.duration)
        self.round = column("round")
        outcomes, denials = column("outcome"), column(DENIAL_COLUMN)
        made: dict[tuple[Any, Any, bool], str] = {}  # a few kinds and outcomes: each made once
        self.classes = [made.get(key) or made.setdefault(key, step_classes(key[0], key[1], denial=key[2]))
                        for key in zip(self.kind, outcomes, (bool(denial) for denial in denials))]
        flags = dict(OUTCOME_FLAGS)
        self.flags = [flags.get(outcome, 0) | (4 if denial else 0) for outcome, denial in zip(outcomes, denials)]
        self._geometries: dict[tuple[int, int], RunGeometry] = {}
        self.made: dict[str, Any] = {}  # what fast_markup makes of the table once, for all languages or per one

    @classmethod
    def of(cls, steps: pa.Table) -> StepColumns:
        """The waterfall's columns of a table of steps (as ``TimelinePlan.step_columns`` makes them)."""
        return cls(steps)

    def labels(self, kind_labels: dict[str, str]) -> list[str]:
        """Each row's label: its tool's name, else its kind's word in ``kind_labels``' language
        (or the kind as it stands). ``fast_markup.WaterfallMarkup.labels`` keeps them, escaped."""
        return [tool if kind == "tool" and tool else kind_labels.get(kind) or kind or ""
                for kind, tool in zip(self.kind, self.tool)]

    def geometry(self, start: int, stop: int, *, entries: Sequence[Bar]) -> RunGeometry:
        """Rows ``start`` to ``stop`` (one run, with its ``entries``) on their axis; kept for the
        run's pages in the other languages (the last ``GEOMETRIES_KEPT`` runs': a batch's)."""
        made = self._geometries.get((start, stop))
        if made is None:
            if len(self._geometries) >= GEOMETRIES_KEPT:
                self._geometries.clear()
            made = self._geometries[(start, stop)] = run_geometry(self, start, stop=stop, entries=entries)
        return made


GEOMETRIES_KEPT = 8_192  # runs: more than a render batch holds (32,768 steps, a few steps a run at least)


@dataclass(frozen=True, slots=True)
class RunSteps:
    """One run's steps: rows ``start`` to ``stop`` of ``columns``."""

    columns: StepColumns
    start: int
    stop: int


class Bar(NamedTuple):
    """A provider call's or decision's bar: start and length (milliseconds), label, classes, row
    (a named tuple: a run page makes one per call)."""

    start: float
    duration: float
    label: str
    classes: str
    href: str
    lane: str


@dataclass(frozen=True, slots=True)
class RunGeometry:
    """A run on its time axis: each step's position classes (``POSITIONS``: its x and width in
    whole percent), the entries' too, the axis's length, the longest steps (rows) and which
    outcome patterns its bars show."""

    places: list[str]
    entry_positions: list[str]
    total: float
    longest: list[int]
    flags: int


def step_starts(crdates: Sequence[int | None], durations: Sequence[float]) -> list[float]:
    """Each step's start in milliseconds: its time (a second's resolution) less its duration,
    never before the previous step's start; an undated step starts with the one before it."""
    return _starts(start_candidates(crdates, durations))


def start_candidates(crdates: Sequence[int | None], durations: Sequence[float]) -> list[float | None]:
    """Each step's start before the steps before it hold it back: its time less its duration
    (None for an undated step)."""
    return [None if crdate is None else crdate * 1000.0 - duration for crdate, duration in zip(crdates, durations)]


def _starts(candidates: Sequence[float | None]) -> list[float]:
    """The starts of ``step_starts`` from each step's time less its duration (None: undated)."""
    starts: list[Any] = []
    previous = None
    for candidate in candidates:
        if candidate is None or (previous is not None and candidate < previous):
            candidate = previous
        starts.append(candidate)
        previous = candidate
    if starts and starts[0] is None:  # undated steps before the first dated one start with it
        first = next((start for start in starts if start is not None), 0.0)
        starts = [first if start is None else start for start in starts]
    return starts


def run_geometry(columns: StepColumns, start: int, *, stop: int, entries: Sequence[Bar]) -> RunGeometry:
    """Where a run's bars stand on its axis, which runs from its first start to its last end."""
    durations = columns.duration[start:stop]
    starts = _starts(columns.candidates[start:stop])
    origin = min(starts[0], min((bar.start for bar in entries), default=starts[0]))
    end = max(map(float.__add__, starts, durations))  # durations are floats (0.0 for none)
    end = max(end, max((bar.start + bar.duration for bar in entries), default=end))
    total = end - origin
    scale = 100.0 / total if total > 0 else 0.0
    places = _places(starts, durations, origin=origin, scale=scale)
    entry_positions = _places([bar.start for bar in entries], [bar.duration for bar in entries], origin=origin,
                              scale=scale) if entries else []
    # sorted is stable: of equal durations the first rows, as heapq.nlargest would take them
    longest = [start + offset for offset in sorted(range(len(durations)), key=durations.__getitem__,
                                                   reverse=True)[:LONGEST_NAMED] if durations[offset] > 0]
    flags = 0
    for flag in columns.flags[start:stop]:
        flags |= flag
    for bar in entries:
        flags |= 1 if "failed" in bar.classes else 0
    return RunGeometry(places, entry_positions, total, longest, flags)


def _places(begins: Sequence[float], durations: Sequence[float], *, origin: float, scale: float) -> list[str]:
    """Each bar's position classes (``POSITIONS``): its start and width in whole percent of the
    axis, rounded half up, the width cut at the axis's end."""
    return [POSITIONS[x][width if width < 100 - x else 100 - x]
            for begin, duration in zip(begins, durations)
            for x in (min(100, int((begin - origin) * scale + 0.5)),)
            for width in (int(duration * scale + 0.5),)]


def entry_bars(kit: Any, calls: Sequence[CallRow], *, decisions: Sequence[DecisionRow]) -> list[Bar]:
    """The bars of a run's provider calls (each ends at its time) and decisions (an instant)."""
    bars = []
    for position, call in enumerate(calls, 1):
        if call.crdate is not None:
            latency = float(call.latency_ms or 0)
            operation, model = call.operation, call.model
            name = (f"{operation} {model}" if operation and model
                    else operation or model or kit.gettext(SOURCE_LABEL_KEYS["call"]))
            bars.append(Bar(call.crdate * 1000.0 - latency, latency, name,
                            "call" if call.success else "call failed", f"#{ROW_IDS['call']}{position}", "call"))
    for position, decision in enumerate(decisions, 1):
        if decision.crdate is not None:
            name = label(kit, DECISION_LABEL_KEYS, value=decision.decision)
            bars.append(Bar(decision.crdate * 1000.0, 0.0, name, "decision failed",
                            f"#{ROW_IDS['governance']}{position}", "governance"))
    return bars


def nice_ticks(total: float) -> list[float]:
    """Round times (1, 2 or 5 times a power of ten milliseconds) from 0 to at most ``total``."""
    if total <= 0:
        return [0.0]
    scale = 1.0
    while True:
        for nice in NICE_STEPS:
            step = nice * scale
            if total / step <= AXIS_TICKS:
                return [index * step for index in range(int(total // step) + 1)]
        scale *= 10


def axis_ticks(total: float) -> list[tuple[int, float]]:
    """The time axis's ticks (``nice_ticks``), each with its place in whole percent."""
    scale = 100.0 / total if total > 0 else 0.0
    return [(min(100, int(tick * scale + 0.5)), tick) for tick in nice_ticks(total)]


def waterfall_duration(fmt: Any, milliseconds: float) -> str:
    """Milliseconds under a second; from there on seconds to a tenth, as a glance needs them."""
    if milliseconds < 1000:
        return fmt.duration(milliseconds)
    return fmt.number(round_tenths(milliseconds / 1000)) + SECONDS


class RoundLane(NamedTuple):
    """A lane of a long run's waterfall: its first and last round (as the rows hold them), how many
    rounds share it, and its steps (offsets into the run's rows, by round, then in row order)."""

    first: Any
    last: Any
    rounds: int
    offsets: list[int]


def round_lanes(steps: RunSteps) -> list[RoundLane]:
    """A long run's steps on a lane per round, consecutive rounds sharing one past ``MAX_LANES``."""
    rounds: dict[Any, list[int]] = {}
    for offset, row in enumerate(range(steps.start, steps.stop)):
        rounds.setdefault(steps.columns.round[row], []).append(offset)
    keys = list(rounds)
    per_lane = -(-len(keys) // MAX_LANES)
    lanes = []
    for first in range(0, len(keys), per_lane):
        group = keys[first:first + per_lane]
        lanes.append(RoundLane(group[0], group[-1], len(group), [offset for key in group for offset in rounds[key]]))
    return lanes
