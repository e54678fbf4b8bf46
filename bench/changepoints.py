"""How often the change-point search is right, and how often it raises a false alarm.

    python bench/changepoints.py                 # 2,000 series a scenario, seed 11
    python bench/changepoints.py --series 500    # quicker

Seeded simulation of daily (failed, ok + failed) counts. Every row draws its own
series: a length of 30 to 90 days, a server's daily volume and, for the step
scenarios, the day of the step (at least 7 days on each side). Prints Markdown
tables: the false-alarm rate of stationary series, and for series with one step
the detection rate, how often the true day lies in the reported range, how
often the reported day is within 2 days of it; each against issue 11's target.

Beside each fixed step, the *reach*: how often the best test that must also find
the day could detect it at 5 % false alarms (a likelihood-ratio scan over every
possible day, its bar set on steady series of the same shape at the mean rate).
A target above the reach is out of reach for any method at that false-alarm rate.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nrllm_report.aggregate.changepoints import MIN_SEGMENT_DAYS, THRESHOLD, Change, find_changes  # noqa: E402

SEED = 11
Daily = list[tuple[int, int, int]]
Draw = Callable[[random.Random], tuple[Daily, int | None]]

MAX_FALSE_ALARMS = 0.05
MIN_DETECTED = 0.90
MIN_IN_RANGE = 0.90
MIN_WITHIN_TWO_DAYS = 0.80


def binomial(rng: random.Random, trials: int, rate: float) -> int:
    """A binomial draw by counting Bernoulli trials (Python 3.10 has no binomialvariate)."""
    return sum(rng.random() < rate for _ in range(trials))


def daily_trials(rng: random.Random, least: int, most: int) -> Callable[[], int]:
    """A server's daily volume: a level between least and most, each day within ±50 % of it."""
    level = rng.randint(least, most)
    low, high = max(least, level // 2), min(most, level * 3 // 2)
    return lambda: rng.randint(low, high)


def is_quiet(day: int, gaps: bool) -> bool:
    """Whether ``day`` has no calls: the weekend, when the scenario has gaps."""
    return gaps and day % 7 in (5, 6)


def stationary(
    least: int = 5,
    most: int = 200,
    rate: float | None = None,
    days: int | None = None,
    gaps: bool = False,
    spread: float = 0.0,
    outage: bool = False,
) -> Draw:
    """Series of one rate; ``spread``: each day's rate varies (relative sd); ``outage``: 80 % fail one day."""

    def draw(rng: random.Random) -> tuple[Daily, int | None]:
        length = days or rng.randint(30, 90)
        level = rng.uniform(0.0, 0.30) if rate is None else rate
        outage_day = rng.randrange(length) if outage else None
        trials = daily_trials(rng, least, most)
        series = []
        for day in range(length):
            if not is_quiet(day, gaps):
                count = trials()
                day_rate = 0.8 if day == outage_day else wobble(rng, level, spread)
                series.append((day, binomial(rng, count, day_rate), count))
        return series, None

    return draw


def wobble(rng: random.Random, rate: float, spread: float) -> float:
    """A day's rate: ``rate`` itself, or a Beta draw with mean ``rate`` and relative sd ``spread``."""
    if spread == 0.0 or rate in (0.0, 1.0):
        return rate
    variance = (spread * rate) ** 2
    concentration = rate * (1 - rate) / variance - 1
    if concentration <= 0:
        return rate
    return rng.betavariate(rate * concentration, (1 - rate) * concentration)


def step(
    before: float, after: float, least: int = 20, most: int = 200, days: int | None = None, gaps: bool = False
) -> Draw:
    """Series whose rate moves from ``before`` to ``after`` on a day with at least 7 days each side."""

    def draw(rng: random.Random) -> tuple[Daily, int | None]:
        length = days or rng.randint(30, 90)
        true_day = rng.randint(7, length - 7)
        trials = daily_trials(rng, least, most)
        series = []
        for day in range(length):
            if not is_quiet(day, gaps):
                count = trials()
                series.append((day, binomial(rng, count, before if day < true_day else after), count))
        return series, true_day

    return draw


def step_and_steady(
    before: float, after: float, least: int = 20, most: int = 200, days: int | None = None, gaps: bool = False
) -> tuple[Draw, Draw]:
    """The step's draw, and steady series of the same shape at the mean of the two rates."""
    middle = (before + after) / 2
    return step(before, after, least, most, days, gaps), step(middle, middle, least, most, days, gaps)


def scan_statistic(series: Daily) -> float:
    """The largest log-likelihood ratio of two rates (before and from a day) against one, over
    every day with at least MIN_SEGMENT_DAYS days each side."""
    events, trials = [0], [0]
    for _day, day_events, day_trials in series:
        events.append(events[-1] + day_events)
        trials.append(trials[-1] + day_trials)
    days = len(series)
    whole = log_likelihood(events[days], trials[days])
    return max(
        (log_likelihood(events[cut], trials[cut])
         + log_likelihood(events[days] - events[cut], trials[days] - trials[cut]) - whole
         for cut in range(MIN_SEGMENT_DAYS, days - MIN_SEGMENT_DAYS + 1)),
        default=0.0,
    )


def log_likelihood(events: int, trials: int) -> float:
    """The binomial log-likelihood of ``events`` of ``trials`` at their own rate (constant terms left out)."""
    result = 0.0
    if 0 < events:
        result += events * math.log(events / trials)
    if events < trials:
        result += (trials - events) * math.log(1 - events / trials)
    return result


def reach(steady: Draw, drawn: list[tuple[Daily, int | None]], seed: int) -> float:
    """The share of ``drawn`` whose scan statistic passes the bar that steady series pass 5 % of the time."""
    rng = random.Random(seed)
    bars = sorted(scan_statistic(steady(rng)[0]) for _ in range(len(drawn)))
    bar = bars[min(len(bars) - 1, int((1 - MAX_FALSE_ALARMS) * len(bars)))]
    return sum(scan_statistic(series) > bar for series, _ in drawn) / len(drawn)


def population(rng: random.Random) -> tuple[Daily, int | None]:
    """A step from the issue's population: a base of 1 to 20 %, tripled or 10 points more, up or down."""
    base = rng.uniform(0.01, 0.20)
    higher = base * 3 if rng.random() < 0.5 else base + 0.10
    before, after = (base, higher) if rng.random() < 0.5 else (higher, base)
    return step(before, after)(rng)


def two_steps(
    rates: tuple[float, float, float], days: int = 20, calls: int = 50
) -> Callable[[random.Random], tuple[Daily, tuple[int, int]]]:
    """Series of three levels of ``days`` each, ``calls`` a day: two steps."""

    def draw(rng: random.Random) -> tuple[Daily, tuple[int, int]]:
        series = [(day, binomial(rng, calls, rates[day // days]), calls) for day in range(3 * days)]
        return series, (days, 2 * days)

    return draw


@dataclass
class Tally:
    """What one scenario's series came to."""

    series: int = 0
    reported: int = 0
    several: int = 0
    in_range: int = 0
    within_two_days: int = 0
    seconds: float = 0.0
    widths: list[int] | None = None

    def add(self, changes: list[Change[int]], true_day: int | None, seconds: float) -> None:
        self.series += 1
        self.seconds += seconds
        if not changes:
            return
        self.reported += 1
        self.several += len(changes) > 1
        if true_day is None:
            return
        nearest = min(changes, key=lambda change: abs(change.day - true_day))
        self.in_range += nearest.earliest <= true_day <= nearest.latest
        self.within_two_days += abs(nearest.day - true_day) <= 2
        self.widths = (self.widths or []) + [nearest.latest - nearest.earliest + 1]


def run(draw: Draw, count: int, seed: int, threshold: float = THRESHOLD) -> Tally:
    """Draw ``count`` series and search each for changes."""
    rng = random.Random(seed)
    return tally_of([draw(rng) for _ in range(count)], threshold)


def tally_of(drawn: list[tuple[Daily, int | None]], threshold: float) -> Tally:
    """Search each drawn series for changes and count how it went."""
    tally = Tally()
    for series, true_day in drawn:
        started = time.perf_counter()
        changes = find_changes(series, threshold=threshold)
        tally.add(changes, true_day, time.perf_counter() - started)
    return tally


def print_tables(tables: list[list[str]], series: int, seed: int, started: float) -> None:
    """A simulation's tables, and how many series, which seed and how long it took (bench/latency.py too)."""
    print("\n\n".join("\n".join(table) for table in tables))
    seconds = time.perf_counter() - started
    print(f"\n{series} series a scenario, seed {seed}, {seconds:.0f} s in all.")


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "–"


def mark(passed: bool) -> str:
    return "pass" if passed else "FAIL"


STATIONARY: list[tuple[str, Draw, bool]] = [
    ("30–90 days, 5–200 calls/day, rate 0–30 % (the target)", stationary(), True),
    ("the same, no calls on weekends", stationary(gaps=True), True),
    ("90 days, 200 calls/day, rate 1 %", stationary(200, 200, 0.01, 90), True),
    ("90 days, 200 calls/day, rate 30 %", stationary(200, 200, 0.30, 90), True),
    ("30 days, 5 calls/day, rate 10 %", stationary(5, 5, 0.10, 30), True),
    ("90 days, 200 calls/day, rate 0 %", stationary(200, 200, 0.0, 90), True),
    ("not binomial: day rate varies ±20 % (sd) around 0–30 %", stationary(spread=0.2), False),
    ("not binomial: day rate varies ±50 % (sd) around 0–30 %", stationary(spread=0.5), False),
    ("not binomial: one outage day failing 80 % of calls", stationary(outage=True), False),
]

POPULATION = "the issue's population: base 1–20 %, ×3 or +10 points, worse or better"
# Each step with the steady series that set its reach (none for the mixed population).
STEPS: list[tuple[str, Draw, Draw | None]] = [
    (POPULATION, population, None),
    ("5 % → 15 %", *step_and_steady(0.05, 0.15)),
    ("10 % → 30 %", *step_and_steady(0.10, 0.30)),
    ("2 % → 12 %", *step_and_steady(0.02, 0.12)),
    ("1 % → 11 %", *step_and_steady(0.01, 0.11)),
    ("20 % → 30 %", *step_and_steady(0.20, 0.30)),
    ("15 % → 5 % (better)", *step_and_steady(0.15, 0.05)),
    ("30 % → 10 % (better)", *step_and_steady(0.30, 0.10)),
    ("12 % → 2 % (better)", *step_and_steady(0.12, 0.02)),
    ("5 % → 15 %, no calls on weekends", *step_and_steady(0.05, 0.15, gaps=True)),
    ("3 % → 9 %", *step_and_steady(0.03, 0.09)),
    ("2 % → 6 %", *step_and_steady(0.02, 0.06)),
    ("1 % → 3 %", *step_and_steady(0.01, 0.03)),
    ("shortest and quietest: 14 days, 20 calls/day, 10 % → 30 %", *step_and_steady(0.10, 0.30, 20, 20, 14)),
    ("shortest and quietest: 14 days, 20 calls/day, 5 % → 15 %", *step_and_steady(0.05, 0.15, 20, 20, 14)),
]


def stationary_table(count: int, seed: int) -> list[str]:
    lines = [
        "| stationary series | series | change reported | target ≤ 5 % | µs/series |",
        "| --- | ---: | ---: | --- | ---: |",
    ]
    for offset, (name, draw, targeted) in enumerate(STATIONARY):
        tally = run(draw, count, seed + offset)
        passed = tally.reported <= MAX_FALSE_ALARMS * tally.series
        lines.append(
            f"| {name} | {tally.series} | {percent(tally.reported, tally.series)} "
            f"| {mark(passed) if targeted else 'outside the target'} "
            f"| {1e6 * tally.seconds / tally.series:.0f} |"
        )
    return lines


def step_table(count: int, seed: int) -> list[str]:
    lines = [
        "| one step, 30–90 days, 20–200 calls/day, ≥ 7 days each side unless said | series | detected ≥ 90 % "
        "| true day in range ≥ 90 % | day within 2 days ≥ 80 % | more than one change | median range (days) "
        "| reach | target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    missed, beyond = [], []
    for offset, (name, draw, steady) in enumerate(STEPS):
        rng = random.Random(seed + 100 + offset)
        drawn = [draw(rng) for _ in range(count)]
        tally = tally_of(drawn, THRESHOLD)
        passed = (
            tally.reported >= MIN_DETECTED * tally.series
            and tally.in_range >= MIN_IN_RANGE * tally.reported
            and tally.within_two_days >= MIN_WITHIN_TWO_DAYS * tally.reported
        )
        reachable = reach(steady, drawn, seed + 500 + offset) if steady is not None else None
        out_of_reach = not passed and reachable is not None and reachable < MIN_DETECTED
        missed += [] if passed or out_of_reach else [name]
        beyond += [name] if out_of_reach else []
        width = f"{statistics.median(tally.widths):g}" if tally.widths else "–"
        reach_text = "–" if reachable is None else f"{100 * reachable:.1f} %"
        lines.append(
            f"| {name} | {tally.series} | {percent(tally.reported, tally.series)} "
            f"| {percent(tally.in_range, tally.reported)} | {percent(tally.within_two_days, tally.reported)} "
            f"| {percent(tally.several, tally.series)} | {width} | {reach_text} "
            f"| {'out of reach' if out_of_reach else mark(passed)} |"
        )
    summary = "Every row within reach meets the targets." if not missed else (
        "Rows missing a target within reach: " + "; ".join(missed) + "."
    )
    if beyond:
        summary += " Out of reach at 5 % false alarms for any method: " + "; ".join(beyond) + "."
    return [*lines, "", summary]


def two_step_table(count: int, seed: int) -> list[str]:
    lines = [
        "| two steps, 20 days a level, 50 calls/day (no target) | series | both found "
        "| exactly two reported |",
        "| --- | ---: | ---: | ---: |",
    ]
    for offset, rates in enumerate(((0.05, 0.20, 0.05), (0.05, 0.15, 0.40), (0.20, 0.05, 0.20))):
        rng = random.Random(seed + 200 + offset)
        both = exactly_two = 0
        for _ in range(count):
            series, true_days = two_steps(rates)(rng)
            changes = find_changes(series)
            both += all(
                any(change.earliest <= day <= change.latest for change in changes) for day in true_days
            )
            exactly_two += len(changes) == 2
        name = " → ".join(f"{100 * rate:.0f} %" for rate in rates)
        lines.append(f"| {name} | {count} | {percent(both, count)} | {percent(exactly_two, count)} |")
    return lines


def threshold_table(count: int, seed: int) -> list[str]:
    scenarios = [
        ("false alarms, stationary (target)", stationary()),
        ("false alarms, day rate ±50 %", stationary(spread=0.5)),
        ("false alarms, one outage day", stationary(outage=True)),
        ("detected, 2 % → 6 %", step(0.02, 0.06)),
        ("detected, 1 % → 3 %", step(0.01, 0.03)),
        ("detected, 14 days, 20 calls/day, 10 % → 30 %", step(0.10, 0.30, 20, 20, 14)),
    ]
    thresholds = sorted({0.75, 0.80, 0.90, 0.95, 0.99, THRESHOLD})
    lines = [
        "| what the threshold trades (the default is "
        + f"{THRESHOLD:.2f}) | "
        + " | ".join(f"{threshold:.2f}" for threshold in thresholds)
        + " |",
        "| --- |" + " ---: |" * len(thresholds),
    ]
    for offset, (name, draw) in enumerate(scenarios):
        rng = random.Random(seed + 300 + offset)
        drawn = [draw(rng) for _ in range(count)]
        cells = [percent(tally_of(drawn, threshold).reported, count) for threshold in thresholds]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def timing_table(seed: int) -> list[str]:
    lines = ["| build-sized load | seconds |", "| --- | ---: |"]
    rng = random.Random(seed + 1000)
    for servers, days in ((50, 90), (50, 400)):
        loads = [stationary(5, 200, None, days)(rng)[0] for _ in range(servers)]
        loads[::5] = [step(0.05, 0.20, days=days)(rng)[0] for _ in loads[::5]]
        started = time.perf_counter()
        for series in loads:
            find_changes(series)
        seconds = time.perf_counter() - started
        lines.append(f"| {servers} servers × {days} days (every fifth with a step) | {seconds:.3f} |")
    return lines


def main() -> int:
    """Run every scenario and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=2000, help="series per scenario")
    parser.add_argument("--seed", type=int, default=SEED)
    options = parser.parse_args()
    started = time.perf_counter()
    tables = [
        stationary_table(options.series, options.seed),
        step_table(options.series, options.seed),
        two_step_table(max(1, options.series // 4), options.seed),
        threshold_table(max(1, options.series // 2), options.seed),
        timing_table(options.seed),
    ]
    print_tables(tables, options.series, options.seed, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
