"""A run as a waterfall (issue 23): one bar per step on a shared time axis, above its timeline.

Plain HTML and CSS, no script and no inline style: every bar is a link to its timeline row,
placed and sized by classes (``x0``..``x100``, ``w0``..``w100``: whole percent of the time
axis, in ``templates/assets/style.css``), coloured by its kind and patterned by its outcome.
A step's start is what its row tells: its ``crdate`` (a second's resolution) less its
duration, never before the previous step's start. Provider calls and governance decisions
stand on lanes of their own; a long run's steps share a lane per round.

Markup made in Python, per run, because a run page is filled from a skeleton
(``fast_markup.RunPageFrame``); what does not depend on the run's time axis (each step's link
and classes, its label in each language) is made once per table of steps, and a run's
geometry once for all its languages. Every data string is escaped with MarkupSafe; every
word comes from the catalogs.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa
from markupsafe import escape

from ..core.model import KNOWN_KINDS, N_
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
OUTCOME_FLAGS = (("failed", 1), ("cancelled", 2), ("denied", 4))  # what a bar's pattern says, for the legend

CAPTION = N_("A bar starts at its row’s second less its duration, never before the step before it.")
LONGEST = N_("Longest: %(steps)s.")
NO_DURATIONS = N_("No step has a duration.")
ROUND_LANE = N_("Round %(round)s")
ROUNDS_LANE = N_("Rounds %(first)s–%(last)s")


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
    link and classes, and (per language, on first use) each row's label; made once per table."""

    def __init__(self, steps: pa.Table) -> None:
        def column(name: str) -> list[Any]:
            return steps.column(name).to_pylist() if name in steps.column_names else [None] * steps.num_rows

        self.crdate, self.kind, self.tool = column("crdate"), column("kind"), column("toolName")
        self.duration = [float(duration or 0.0) for duration in column("durationMs")]
        self.round = column("round")
        outcomes, denials = column("outcome"), column(DENIAL_COLUMN)
        made: dict[tuple[Any, Any, bool], str] = {}  # a few kinds and outcomes: each made once
        classes = [made.get(key) or made.setdefault(key, step_classes(key[0], key[1], denial=key[2]))
                   for key in zip(self.kind, outcomes, (bool(denial) for denial in denials))]
        # '<a href="#s3" class="llm' with classes, '<a href="#s3"' without: the position follows.
        self.openings = [f'<a href="#s{sequence}" class="{names}' if names else f'<a href="#s{sequence}"'
                         for sequence, names in zip(column("sequence"), classes)]
        flags = dict(OUTCOME_FLAGS)
        self.flags = [flags.get(outcome, 0) | (4 if denial else 0) for outcome, denial in zip(outcomes, denials)]
        self._labels: dict[str, list[str]] = {}
        self._geometry: tuple[tuple[int, int], RunGeometry] | None = None

    @classmethod
    def of(cls, steps: pa.Table) -> StepColumns:
        """The waterfall's columns of a table of steps (as ``TimelinePlan.step_columns`` makes them)."""
        return cls(steps)

    def labels(self, language: str, kind_labels: dict[str, str]) -> list[str]:
        """Each row's label, escaped: its tool's name, else its kind's word in ``language``."""
        made = self._labels.get(language)
        if made is None:
            kinds = {kind: str(escape(text)) for kind, text in kind_labels.items()}
            tools = {tool: str(escape(tool)) for tool in set(self.tool) if tool}
            made = self._labels[language] = [
                tools[tool] if kind == "tool" and tool else kinds.get(kind) or str(escape(kind or ""))
                for kind, tool in zip(self.kind, self.tool)]
        return made

    def geometry(self, start: int, stop: int, *, entries: Sequence[Bar]) -> RunGeometry:
        """Rows ``start`` to ``stop`` (one run, with its ``entries``) on their axis; the last one
        made is kept, for the run's page in the next language."""
        if self._geometry is not None and self._geometry[0] == (start, stop):
            return self._geometry[1]
        made = run_geometry(self, start, stop=stop, entries=entries)
        self._geometry = ((start, stop), made)
        return made


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
    """A run on its time axis: each step's (x, w) in percent, the entries' position classes, the
    axis's length, the longest steps (rows) and which outcome patterns its bars show."""

    positions: list[tuple[int, int]]
    entry_positions: list[str]
    total: float
    longest: list[int]
    flags: int


def step_starts(crdates: Sequence[int | None], durations: Sequence[float]) -> list[float]:
    """Each step's start in milliseconds: its time (a second's resolution) less its duration,
    never before the previous step's start; an undated step starts with the one before it."""
    starts: list[float | None] = []
    previous: float | None = None
    for crdate, duration in zip(crdates, durations):
        start = previous if crdate is None else crdate * 1000.0 - duration
        if previous is not None and start is not None and start < previous:
            start = previous
        starts.append(start)
        previous = start
    first = next((start for start in starts if start is not None), 0.0)
    return [first if start is None else start for start in starts]


def run_geometry(columns: StepColumns, start: int, *, stop: int, entries: Sequence[Bar]) -> RunGeometry:
    """Where a run's bars stand on its axis, which runs from its first start to its last end."""
    durations = columns.duration[start:stop]
    starts = step_starts(columns.crdate[start:stop], durations)
    origin = min(starts[0], min((bar.start for bar in entries), default=starts[0]))
    end = max(map(float.__add__, starts, durations))  # durations are floats (0.0 for none)
    end = max(end, max((bar.start + bar.duration for bar in entries), default=end))
    total = end - origin
    scale = 100.0 / total if total > 0 else 0.0
    positions = []
    for begin, duration in zip(starts, durations):
        x = min(100, int((begin - origin) * scale + 0.5))
        positions.append((x, min(100 - x, int(duration * scale + 0.5))))
    entry_positions = []
    for bar in entries:
        x = min(100, int((bar.start - origin) * scale + 0.5))
        entry_positions.append(POSITIONS[x][min(100 - x, int(bar.duration * scale + 0.5))])
    longest = [start + offset for offset in heapq.nlargest(LONGEST_NAMED, range(len(durations)),
                                                           key=durations.__getitem__) if durations[offset] > 0]
    flags = 0
    for flag in columns.flags[start:stop]:
        flags |= flag
    for bar in entries:
        flags |= 1 if "failed" in bar.classes else 0
    return RunGeometry(positions, entry_positions, total, longest, flags)


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
                            "call" if call.success else "call failed", f"#c{position}", "call"))
    for position, decision in enumerate(decisions, 1):
        if decision.crdate is not None:
            name = label(kit, DECISION_LABEL_KEYS, value=decision.decision)
            bars.append(Bar(decision.crdate * 1000.0, 0.0, name, "decision failed", f"#d{position}", "governance"))
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


class WaterfallMarkup:
    """How one language writes a waterfall: its words, escaped once, and the durations it formatted."""

    def __init__(self, kit: Any) -> None:
        _ = kit.gettext
        self.kit = kit
        self.opening = f'<figure class="waterfall">\n<figcaption>{escape(_(CAPTION))} '
        self.longest = str(escape(_(LONGEST)))
        self.no_durations = str(escape(_(NO_DURATIONS)))
        self.round_lane, self.rounds_lane = _(ROUND_LANE), _(ROUNDS_LANE)
        self.axis = f'<div class="lane axis"><span>{escape(_("Time"))}</span>'
        self.sources = {source: str(escape(_(key))) for source, key in SOURCE_LABEL_KEYS.items()}
        words = {**kit.outcome_labels, "denied": _("Denied")}
        self.legend = [(flag, f'<span class="{name}">{escape(words[name])}</span>') for name, flag in OUTCOME_FLAGS]
        self._durations: dict[int, str] = {}
        self._axes: dict[float, str] = {}
        self.titles: dict[str, str] = {}  # the entries' labels, escaped: a few operations and models

    def duration(self, milliseconds: float) -> str:
        """Milliseconds under a second; from there on seconds to a tenth, as a glance needs them.
        Made once per value as shown (keyed by it in tenths; negative: of a second)."""
        key = round(milliseconds * 10) if milliseconds < 1000 else -round(milliseconds / 100)
        text = self._durations.get(key)
        if text is None:
            fmt = self.kit.format
            text = (fmt.duration(milliseconds) if milliseconds < 1000
                    else fmt.number(round_tenths(milliseconds / 1000)) + SECONDS)
            self._durations[key] = text
        return text

    def axis_line(self, total: float) -> str:
        """The shared time axis: round times from the run's first start, placed by their classes."""
        line = self._axes.get(total)
        if line is None:
            scale = 100.0 / total if total > 0 else 0.0
            ticks = []
            for tick in nice_ticks(total):
                x = min(100, int(tick * scale + 0.5))
                ticks.append(f'<i class="x{x}">' if x else "<i>")
                ticks.append(f"{self.duration(tick)}</i>")
            line = f'{self.axis}{"".join(ticks)}</div>\n'
            if len(self._axes) < 100_000:
                self._axes[total] = line
        return line


def waterfall(kit: Any, steps: RunSteps, *, calls: Sequence[CallRow] = (),
              decisions: Sequence[DecisionRow] = ()) -> str:
    """The run's waterfall as a ``<figure>``, or '' for a run without steps."""
    if steps.stop <= steps.start:
        return ""
    words: WaterfallMarkup = kit.once("waterfall", lambda: WaterfallMarkup(kit))
    columns, start, stop = steps.columns, steps.start, steps.stop
    entries = entry_bars(kit, calls, decisions=decisions) if calls or decisions else []
    geometry = columns.geometry(start, stop, entries=entries)
    labels = columns.labels(kit.language, kit.kind_labels)
    lines = [words.opening, _longest(words, columns, labels=labels, geometry=geometry), _legend(words, geometry.flags),
             "</figcaption>\n", words.axis_line(geometry.total)]
    if stop - start > GROUP_ABOVE:
        lines += _round_lanes(words, columns, labels=labels, steps=steps, geometry=geometry)
    else:
        lines += [_step_link(columns.openings[row], position, text=labels[row])
                  for row, position in zip(range(start, stop), geometry.positions)]
        lines.append("\n")
    titles = words.titles
    for source in ("call", "governance"):
        links = [f'<a href="{bar.href}" class="{bar.classes} {position}" '
                 f'title="{titles.get(bar.label) or titles.setdefault(bar.label, str(escape(bar.label)))}"></a>'
                 for bar, position in zip(entries, geometry.entry_positions) if bar.lane == source]
        if links:
            lines.append(f'<div class="lane"><span>{words.sources[source]}</span>{"".join(links)}</div>\n')
    lines.append("</figure>\n")
    return "".join(lines)


def _step_link(opening: str, position: tuple[int, int], *, text: str, title: str = "") -> str:
    """A step's bar: its link and classes (``StepColumns.openings``), position, and label or title."""
    place = POSITIONS[position[0]][position[1]]
    if opening.endswith('"'):  # no class of its kind or outcome
        opening = f'{opening} class="{place}"' if place else opening
    else:
        opening = f'{opening} {place}"' if place else f'{opening}"'
    return f'{opening} title="{title}"></a>' if title else f"{opening}>{text}</a>"


def _round_lanes(words: WaterfallMarkup, columns: StepColumns, *, labels: list[str], steps: RunSteps,
                 geometry: RunGeometry) -> list[str]:
    """A long run's steps on a lane per round, consecutive rounds sharing one past ``MAX_LANES``."""
    rounds: dict[Any, list[int]] = {}
    for offset, row in enumerate(range(steps.start, steps.stop)):
        rounds.setdefault(columns.round[row], []).append(offset)
    keys = list(rounds)
    per_lane = -(-len(keys) // MAX_LANES)
    number = words.kit.format.number
    lanes = []
    for first in range(0, len(keys), per_lane):
        group = keys[first:first + per_lane]
        shown = [number(key) if isinstance(key, int) else "–" for key in (group[0], group[-1])]
        name = (words.round_lane % {"round": shown[0]} if len(group) == 1
                else words.rounds_lane % {"first": shown[0], "last": shown[1]})
        links = "".join(_step_link(columns.openings[steps.start + offset], geometry.positions[offset], text="",
                                   title=labels[steps.start + offset]) for key in group for offset in rounds[key])
        lanes.append(f'<div class="lane"><span>{escape(name)}</span>{links}</div>\n')
    return lanes


def _longest(words: WaterfallMarkup, columns: StepColumns, *, labels: list[str], geometry: RunGeometry) -> str:
    """The text alternative: the longest steps, with their durations."""
    if not geometry.longest:
        return words.no_durations
    steps = ", ".join(f"{labels[row]} ({words.duration(columns.duration[row])})" for row in geometry.longest)
    return words.longest % {"steps": steps}


def _legend(words: WaterfallMarkup, flags: int) -> str:
    """What the patterns mean, for the outcomes the run's bars show (none for a run of ok steps)."""
    if not flags:
        return ""
    return f' <span class="legend">{"".join(text for flag, text in words.legend if flags & flag)}</span>'
