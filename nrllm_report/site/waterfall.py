"""A run as a waterfall (issue 23): one bar per step on a shared time axis, above its timeline.

Plain HTML and CSS, no script and no inline style: every bar is a link to its timeline row,
placed and sized by classes (``x0``..``x100``, ``w0``..``w100``: whole percent of the time
axis, in ``templates/assets/style.css``), coloured by its kind and patterned by its outcome.
A step's start is what its row tells: its ``crdate`` (a second's resolution) less its
duration, never before the previous step's start. Provider calls and governance decisions
stand on lanes of their own. A long run's steps share a lane per round.

Markup made in Python, per run, because a run page is filled from a skeleton
(``pages.RunPageSkeleton``): every data string is escaped with MarkupSafe; every word
comes from the catalogs, looked up once per language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import pyarrow as pa
from markupsafe import escape

from ..core.model import KNOWN_KINDS, N_
from ..core.schema import DENIAL_COLUMN
from .i18n import SECONDS, round_tenths
from .labels import DECISION_LABEL_KEYS, SOURCE_LABEL_KEYS, label

if TYPE_CHECKING:
    from ..aggregate.whole_run import CallRow, DecisionRow
    from .render import PageKit

GROUP_ABOVE = 60  # steps; a longer run draws a lane per round, so that it stays legible
MAX_LANES = 60  # lanes of rounds; more rounds share lanes
LONGEST_NAMED = 3  # steps the text alternative names
AXIS_TICKS = 4  # at most this many ticks after 0
NICE_STEPS = (1, 2, 5)

CAPTION = N_("A bar starts at its row’s second less its duration, never before the step before it.")
LONGEST = N_("Longest: %(steps)s.")
NO_DURATIONS = N_("No step has a duration.")
ROUND_LANE = N_("Round %(round)s")
ROUNDS_LANE = N_("Rounds %(first)s–%(last)s")


@dataclass(frozen=True, slots=True)
class StepColumns:
    """A table of steps' columns the waterfall draws, as Python lists (made once per table)."""

    crdate: list[Any]
    duration: list[Any]
    kind: list[Any]
    tool: list[Any]
    outcome: list[Any]
    denial: list[Any]
    round: list[Any]
    sequence: list[Any]

    @classmethod
    def of(cls, steps: pa.Table) -> "StepColumns":
        def column(name: str) -> list[Any]:
            return steps.column(name).to_pylist() if name in steps.column_names else [None] * steps.num_rows

        return cls(column("crdate"), column("durationMs"), column("kind"), column("toolName"),
                   column("outcome"), column(DENIAL_COLUMN), column("round"), column("sequence"))


@dataclass(frozen=True, slots=True)
class RunSteps:
    """One run's steps: rows ``start`` to ``stop`` of ``columns``."""

    columns: StepColumns
    start: int
    stop: int


@dataclass(frozen=True, slots=True)
class Bar:
    """A bar: where it starts and how long it is (milliseconds), its label, classes and row."""

    start: float
    duration: float
    label: str
    classes: str
    href: str
    lane: Any = None  # the round a grouped step's lane is of; None for a bar of its own


def step_starts(crdates: Sequence[int | None], durations: Sequence[float | None]) -> list[float]:
    """Each step's start in milliseconds: its time (a second's resolution) less its duration,
    never before the previous step's start; an undated step starts with the one before it."""
    starts: list[float | None] = []
    previous: float | None = None
    for crdate, duration in zip(crdates, durations):
        start = previous if crdate is None else crdate * 1000.0 - (duration or 0.0)
        if previous is not None and start is not None and start < previous:
            start = previous
        starts.append(start)
        previous = start
    first = next((start for start in starts if start is not None), 0.0)
    return [first if start is None else start for start in starts]


def step_bars(kit: "PageKit", steps: RunSteps) -> list[Bar]:
    """The bars of a run's steps, in step order."""
    columns, span = steps.columns, slice(steps.start, steps.stop)
    durations = [duration or 0.0 for duration in columns.duration[span]]
    starts = step_starts(columns.crdate[span], durations)
    kind_labels = kit.kind_labels
    bars = []
    for start, duration, kind, tool, outcome, denial, round_, sequence in zip(
        starts, durations, columns.kind[span], columns.tool[span], columns.outcome[span], columns.denial[span],
        columns.round[span], columns.sequence[span],
    ):
        name = tool if kind == "tool" and tool else kind_labels.get(kind) or kind or ""
        # A tool's bar has no kind class (the CSS's default colour): the most common kind, in fewer bytes.
        classes = "" if kind == "tool" else kind if kind in KNOWN_KINDS else "other"
        if outcome and outcome != "ok":
            classes += " " + outcome
        if denial:
            classes += " denied"
        classes = classes.lstrip(" ")
        bars.append(Bar(start, duration, name, classes, f"#s{sequence}", round_))
    return bars


def entry_bars(kit: "PageKit", calls: Sequence["CallRow"], decisions: Sequence["DecisionRow"]) -> list[Bar]:
    """The bars of a run's provider calls (each ends at its time) and decisions (an instant)."""
    bars = []
    for position, call in enumerate(calls, 1):
        if call.crdate is not None:
            latency = float(call.latency_ms or 0)
            bars.append(Bar(call.crdate * 1000.0 - latency, latency, " ".join(
                part for part in (call.operation, call.model) if part) or kit.gettext(SOURCE_LABEL_KEYS["call"]),
                "call" if call.success else "call failed", f"#c{position}", "call"))
    for position, decision in enumerate(decisions, 1):
        if decision.crdate is not None:
            name = label(kit, DECISION_LABEL_KEYS, decision.decision)
            bars.append(Bar(decision.crdate * 1000.0, 0.0, name, "decision failed", f"#d{position}",
                            "governance"))
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
                count = int(total // step)
                return [index * step for index in range(count + 1)]
        scale *= 10


class WaterfallMarkup:
    """How one language writes a waterfall: its words, escaped once, and the durations it formatted."""

    def __init__(self, kit: "PageKit") -> None:
        _ = kit.gettext
        self.kit = kit
        self.caption = escape(_(CAPTION))
        self.longest = _(LONGEST)
        self.no_durations = escape(_(NO_DURATIONS))
        self.round_lane, self.rounds_lane = _(ROUND_LANE), _(ROUNDS_LANE)
        self.time = escape(_("Time"))
        self.sources = {source: escape(_(key)) for source, key in SOURCE_LABEL_KEYS.items()}
        self.legend = {outcome: f'<span class="{outcome}">{escape(text)}</span>'
                       for outcome, text in kit.outcome_labels.items() if outcome != "ok"}
        self.legend["denied"] = f'<span class="denied">{escape(_("Denied"))}</span>'
        self._durations: dict[float, str] = {}

    def duration(self, milliseconds: float) -> str:
        """Milliseconds under a second; from there on seconds to a tenth, as a glance needs them."""
        text = self._durations.get(milliseconds)
        if text is None:
            fmt = self.kit.format
            text = (fmt.duration(milliseconds) if milliseconds < 1000
                    else fmt.number(round_tenths(milliseconds / 1000)) + SECONDS)
            self._durations[milliseconds] = text
        return text


def waterfall(kit: "PageKit", steps: RunSteps, calls: Sequence["CallRow"] = (),
              decisions: Sequence["DecisionRow"] = ()) -> str:
    """The run's waterfall as a ``<figure>``, or '' for a run without steps."""
    if steps.stop <= steps.start:
        return ""
    words = kit.skeleton("waterfall", lambda: WaterfallMarkup(kit))
    bars = step_bars(kit, steps)
    entries = entry_bars(kit, calls, decisions)
    origin = min(bar.start for bar in bars + entries)
    total = max(bar.start + bar.duration for bar in bars + entries) - origin
    place = _placer(origin, total)
    lines = [f'<figure class="waterfall">\n<figcaption>{words.caption} {_longest(words, bars)}'
             f"{_legend(words, bars + entries)}</figcaption>\n", _axis(words, origin, total, place)]
    if len(bars) > GROUP_ABOVE:
        lines += [_lane(name, group, place) for name, group in _round_lanes(words, bars)]
    else:
        lines += [f'<a href="{bar.href}"{_class(bar.classes, place(bar))}>{escape(bar.label)}</a>' for bar in bars]
        lines.append("\n")
    for source in ("call", "governance"):
        lane = [bar for bar in entries if bar.lane == source]
        if lane:
            lines.append(_lane(words.sources[source], lane, place))
    lines.append("</figure>\n")
    return "".join(lines)


def _placer(origin: float, total: float) -> Any:
    """A bar's position classes: its start and length in whole percent of the axis."""
    scale = 100.0 / total if total > 0 else 0.0

    def place(bar: Bar) -> str:
        x = min(100, round((bar.start - origin) * scale))
        width = min(100 - x, round(bar.duration * scale))
        # No x0 (the CSS's default start) and no w0 (the bar's least width): fewer bytes a page.
        return " ".join(([f"x{x}"] if x else []) + ([f"w{width}"] if width else []))

    return place


def _axis(words: WaterfallMarkup, origin: float, total: float, place: Any) -> str:
    """The shared time axis: round times from the run's first start."""
    ticks = "".join(f"<i{_class(place(Bar(origin + tick, 0.0, '', '', '')))}>{words.duration(tick)}</i>"
                    for tick in nice_ticks(total))
    return f'<div class="lane axis"><span>{words.time}</span>{ticks}</div>\n'


def _class(*names: str) -> str:
    """A class attribute of the names given that are not empty, or '' when all are."""
    joined = " ".join(name for name in names if name)
    return f' class="{joined}"' if joined else ""


def _lane(name: Any, bars: Sequence[Bar], place: Any) -> str:
    """A lane of bars that share a row: each named by its title."""
    links = "".join(f'<a href="{bar.href}"{_class(bar.classes, place(bar))} title="{escape(bar.label)}"></a>'
                    for bar in bars)
    return f'<div class="lane"><span>{name}</span>{links}</div>\n'


def _round_lanes(words: WaterfallMarkup, bars: Sequence[Bar]) -> list[tuple[str, list[Bar]]]:
    """The steps by round, consecutive rounds sharing a lane where there are more than ``MAX_LANES``."""
    rounds: dict[Any, list[Bar]] = {}
    for bar in bars:
        rounds.setdefault(bar.lane, []).append(bar)
    keys = list(rounds)
    per_lane = -(-len(keys) // MAX_LANES)
    lanes = []
    number = words.kit.format.number
    for first in range(0, len(keys), per_lane):
        group = keys[first:first + per_lane]
        shown = [number(key) if isinstance(key, int) else "–" for key in (group[0], group[-1])]
        name = (words.round_lane % {"round": shown[0]} if len(group) == 1
                else words.rounds_lane % {"first": shown[0], "last": shown[1]})
        lanes.append((str(escape(name)), [bar for key in group for bar in rounds[key]]))
    return lanes


def _longest(words: WaterfallMarkup, bars: Sequence[Bar]) -> str:
    """The text alternative: the longest steps, with their durations."""
    timed = sorted((bar for bar in bars if bar.duration > 0), key=lambda bar: -bar.duration)[:LONGEST_NAMED]
    if not timed:
        return str(words.no_durations)
    steps = ", ".join(f"{bar.label} ({words.duration(bar.duration)})" for bar in timed)
    return str(escape(words.longest % {"steps": steps}))


def _legend(words: WaterfallMarkup, bars: Sequence[Bar]) -> str:
    """What the patterns mean, for the outcomes the run's bars have (none for a run of ok steps)."""
    shown = [text for outcome, text in words.legend.items()
             if any(outcome in bar.classes.split(" ") for bar in bars)]
    return f' <span class="legend">{"".join(shown)}</span>' if shown else ""
