"""How often `diff`'s comparison of two failure rates is right, and how often it raises a false alarm.

    python bench/compare.py                  # 4,000 pairs a row, seed 13
    python bench/compare.py --pairs 1000     # quicker

Seeded simulation of two samples of calls (baseline and current). Prints
Markdown tables: how often a pair with identical rates is reported as changed
(target at most 5 %), and how often a tripled rate at 200 calls a side is
reported as worse (target at least 90 %), per base rate. Beside each simulated
share stands the exact one, summed over every outcome of the two samples (all
but those less likely than 1e-12); the targets are judged on the exact share,
which no simulation noise can tip over a threshold.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nrllm_report.aggregate.compare import SIGNIFICANCE_LEVEL, Comparison, Decision, compare  # noqa: E402

SEED = 13
NEGLIGIBLE = 1e-12
MAX_FALSE_ALARMS = 0.05
MIN_POWER = 0.90
POWER_CALLS = 200

SAME_RATES = (0.005, 0.01, 0.02, 0.05, 0.10, 0.20, 0.30)
SAME_SIZES = ((20, 20), (50, 50), (200, 200), (1000, 1000), (50, 500))
BASE_RATES = (0.01, 0.02, 0.03, 0.04, 0.05, 0.07, 0.10, 0.20)


def binomial(rng: random.Random, trials: int, rate: float) -> int:
    """A binomial draw by counting Bernoulli trials (Python 3.10 has no binomialvariate)."""
    return sum(rng.random() < rate for _ in range(trials))


def decisions(
    rng: random.Random, pairs: int, sides: tuple[int, int], rates: tuple[float, float]
) -> list[Decision]:
    """The decisions on ``pairs`` simulated pairs of samples."""
    found = []
    for _ in range(pairs):
        baseline_failed = binomial(rng, sides[0], rates[0])
        current_failed = binomial(rng, sides[1], rates[1])
        found.append(outcome(sides, baseline_failed, current_failed).decision)
    return found


def binomial_pmf(trials: int, rate: float) -> dict[int, float]:
    """The binomial probabilities of each count, the negligible ones left out."""
    if rate in (0.0, 1.0):
        return {round(rate * trials): 1.0}
    log_rate, log_rest = math.log(rate), math.log1p(-rate)
    probabilities = {}
    for count in range(trials + 1):
        log_choose = math.lgamma(trials + 1) - math.lgamma(count + 1) - math.lgamma(trials - count + 1)
        probability = math.exp(log_choose + count * log_rate + (trials - count) * log_rest)
        if probability >= NEGLIGIBLE:
            probabilities[count] = probability
    return probabilities


def exact_share(sides: tuple[int, int], rates: tuple[float, float], wanted: set[Decision]) -> float:
    """The probability that the comparison of two such samples ends in one of ``wanted``."""
    share = 0.0
    for baseline_failed, baseline_probability in binomial_pmf(sides[0], rates[0]).items():
        for current_failed, current_probability in binomial_pmf(sides[1], rates[1]).items():
            if outcome(sides, baseline_failed, current_failed).decision in wanted:
                share += baseline_probability * current_probability
    return share


def outcome(sides: tuple[int, int], baseline_failed: int, current_failed: int) -> Comparison:
    return compare(baseline_ok=sides[0] - baseline_failed, baseline_failed=baseline_failed,
                   current_ok=sides[1] - current_failed, current_failed=current_failed)


def cell(exact: float, simulated: float) -> str:
    return f"{100 * exact:.1f} % (sim. {100 * simulated:.1f} %)"


def same_rate_table(pairs: int, seed: int) -> list[str]:
    header = " | ".join(f"{baseline} vs {current}" for baseline, current in SAME_SIZES)
    lines = [
        f"| identical rates: reported as changed, exact (simulated) | {header} | target ≤ 5 % |",
        "| --- |" + " ---: |" * len(SAME_SIZES) + " --- |",
    ]
    rng = random.Random(seed)
    changed = {Decision.WORSE, Decision.BETTER}
    for rate in SAME_RATES:
        exact = [exact_share(sides, (rate, rate), changed) for sides in SAME_SIZES]
        simulated = [
            sum(decision in changed for decision in decisions(rng, pairs, sides, (rate, rate))) / pairs
            for sides in SAME_SIZES
        ]
        cells = " | ".join(map(cell, exact, simulated))
        lines.append(f"| rate {100 * rate:g} % | {cells} | {mark(max(exact) <= MAX_FALSE_ALARMS)} |")
    return lines


def power_table(pairs: int, seed: int) -> list[str]:
    lines = [
        f"| tripled rate, {POWER_CALLS} calls a side | reported worse, exact (simulated) "
        "| the reverse reported better, exact (simulated) | target ≥ 90 % |",
        "| --- | ---: | ---: | --- |",
    ]
    rng = random.Random(seed + 1)
    sides = (POWER_CALLS, POWER_CALLS)
    held_from = None
    for base in BASE_RATES:
        worse = exact_share(sides, (base, 3 * base), {Decision.WORSE})
        better = exact_share(sides, (3 * base, base), {Decision.BETTER})
        simulated_worse = decisions(rng, pairs, sides, (base, 3 * base)).count(Decision.WORSE) / pairs
        simulated_better = decisions(rng, pairs, sides, (3 * base, base)).count(Decision.BETTER) / pairs
        lines.append(
            f"| {100 * base:g} % → {300 * base:g} % | {cell(worse, simulated_worse)} "
            f"| {cell(better, simulated_better)} | {mark(min(worse, better) >= MIN_POWER)} |"
        )
        passed = min(worse, better) >= MIN_POWER
        held_from = (held_from or base) if passed else None
    where = (
        f"for base rates of {100 * held_from:g} % and more" if held_from else "for none of these base rates"
    )
    return lines + [
        "",
        f"The power target holds {where} (of those tried: "
        + ", ".join(f"{100 * base:g} %" for base in BASE_RATES)
        + ").",
    ]


def mark(passed: bool) -> str:
    return "pass" if passed else "FAIL"


def main() -> int:
    """Run every scenario and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=4000, help="pairs of samples a cell")
    parser.add_argument("--seed", type=int, default=SEED)
    options = parser.parse_args()
    started = time.perf_counter()
    tables = [same_rate_table(options.pairs, options.seed), power_table(options.pairs, options.seed)]
    print("\n\n".join("\n".join(table) for table in tables))
    print(
        f"\nFisher's exact test, two-sided, level {SIGNIFICANCE_LEVEL:g}; {options.pairs} pairs a cell, "
        f"seed {options.seed}, {time.perf_counter() - started:.0f} s in all."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
