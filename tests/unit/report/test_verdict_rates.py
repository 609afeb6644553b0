"""The verdicts' error rates, measured by simulation with noise shaped like the H200's:
a log-normal launch effect, an occasional cold launch (15-30% slow), a drift over time
and an effect of the launch's position in its cycle. Launch orders come from the
balanced design the bench phase uses, and adaptive runs look at the verdict after every
cycle exactly as bench/adaptive.py does (the same `compare`, alpha / looks)."""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass

import pytest

from stackmatrix.bench.schedule import balanced_cycle
from stackmatrix.stats.outliers import rejected
from stackmatrix.stats.verdict import Thresholds, Verdict, compare

SIMS = 1000


@dataclass(frozen=True)
class Noise:
    launch_sd: float = 0.005  # log-normal launch-to-launch effect
    cold_rate: float = 0.05  # a launch that paid for a cold start
    cold_slow: tuple[float, float] = (0.15, 0.30)
    drift_per_cycle: float = 0.002  # clocks, temperature: later cycles slower
    first_in_cycle: float = 0.03  # the first launch of a cycle runs this much slower


H200 = Noise()


def _launch(rng: random.Random, true: float, cycle: int, position: int, noise: Noise) -> float:
    log_value = math.log(true) + rng.gauss(0.0, noise.launch_sd)
    log_value -= noise.drift_per_cycle * cycle + (noise.first_in_cycle if position == 0 else 0.0)
    if rng.random() < noise.cold_rate:
        log_value += math.log1p(-rng.uniform(*noise.cold_slow))
    return math.exp(log_value)


def simulate(
    rng: random.Random,
    change: float,
    *,
    low: int,
    high: int,
    noise: Noise = H200,
    order: str = "balanced",
) -> tuple[Verdict, int]:
    """One run of a baseline and a candidate whose true decode speed differs by
    `change`; launches low..high per cell, as the bench phase runs them."""
    th = Thresholds(plan=(low, high) if high > low else None)
    seed = rng.randrange(2**31)
    cells: dict[str, list[list[float]]] = {"base": [], "cand": []}
    slots: dict[str, list[int | None]] = {"base": [], "cand": []}
    truth = {"base": 100.0, "cand": 100.0 * (1 + change)}
    for cycle in range(1, high + 1):
        sequence = (
            balanced_cycle(["base", "cand"], cycle, seed)
            if order == "balanced"
            else ["base", "cand"]
        )
        for position, cid in enumerate(sequence):
            cells[cid].append([_launch(rng, truth[cid], cycle, position, noise)])
            slots[cid].append(2 * cycle + position)
        if cycle < low:
            continue
        verdict = compare(
            cells["cand"],
            cells["base"],
            metric="decode_tok_s",
            thresholds=th,
            slots=(slots["cand"], slots["base"]),
        ).verdict
        if verdict.decided or cycle == high:
            return verdict, cycle
    raise AssertionError("unreachable")


def rates(
    change: float,
    *,
    low: int,
    high: int,
    noise: Noise = H200,
    order: str = "balanced",
    seed: int = 1,
) -> tuple[Counter[Verdict], float]:
    rng = random.Random(seed)
    runs = [
        simulate(rng, change, low=low, high=high, noise=noise, order=order) for _ in range(SIMS)
    ]
    counts = Counter(v for v, _ in runs)
    return counts, sum(n for _, n in runs) / len(runs)


def _called_a_change(counts: Counter[Verdict]) -> float:
    return (counts[Verdict.FASTER] + counts[Verdict.SLOWER]) / sum(counts.values())


def test_aa_adaptive_is_called_faster_or_slower_at_most_5_percent_of_the_time():
    counts, mean_launches = rates(0.0, low=3, high=12)
    assert _called_a_change(counts) <= 0.05, counts
    # and it mostly ends decided: equivalence is shown, not merely "no difference found"
    assert counts[Verdict.EQUIVALENT] / SIMS >= 0.8, counts
    print(f"A/A, 3..12 launches: {dict(counts)}, mean launches {mean_launches:.1f}")


def test_aa_fixed_three_launches_is_called_a_change_at_most_5_percent_of_the_time():
    counts, _ = rates(0.0, low=3, high=3)
    assert _called_a_change(counts) <= 0.05, counts


@pytest.mark.parametrize("change", [-0.02, 0.02])
def test_a_true_2_percent_change_is_found_80_percent_of_the_time_within_12_launches(change):
    counts, mean_launches = rates(change, low=3, high=12, seed=2)
    right = Verdict.SLOWER if change < 0 else Verdict.FASTER
    assert counts[right] / SIMS >= 0.8, counts
    wrong = Verdict.FASTER if change < 0 else Verdict.SLOWER
    assert counts[wrong] / SIMS <= 0.01, counts
    print(f"{change:+.0%}, 3..12 launches: {dict(counts)}, mean launches {mean_launches:.1f}")


def test_a_position_effect_makes_a_fixed_order_call_an_aa_pair_a_change_not_a_balanced_one():
    """The H200's A/A false alarm: the baseline first in every cycle, a position effect."""
    noise = Noise(launch_sd=0.005, cold_rate=0.0, first_in_cycle=0.03, drift_per_cycle=0.0)
    fixed, _ = rates(0.0, low=3, high=3, noise=noise, order="fixed")
    balanced, _ = rates(0.0, low=3, high=3, noise=noise, order="balanced")
    assert _called_a_change(fixed) >= 0.5, fixed
    assert _called_a_change(balanced) <= 0.05, balanced


def test_one_cold_launch_neither_decides_nor_hides_a_verdict():
    # H200: flashinfer 587.5, 588.0 and one launch 15% slow, again 587.2 / 586.9
    base = [[587.5], [588.0], [496.9], [587.2]]
    same = [[587.0], [587.9], [587.6], [587.1]]
    c = compare(same, base, metric="output_throughput")
    assert c.verdict is Verdict.EQUIVALENT, c.reason
    assert c.rejected and "L3" in c.rejected[0]
    slower = [[570.0], [569.4], [569.8], [570.3]]
    assert compare(slower, base, metric="output_throughput").verdict is Verdict.SLOWER


def test_the_rule_rarely_rejects_an_ordinary_launch():
    rng = random.Random(3)
    trials = 4000
    hits = sum(
        bool(rejected([math.exp(rng.gauss(0, 0.01)) for _ in range(3)])) for _ in range(trials)
    )
    assert hits / trials <= 0.01
    noisy = sum(
        bool(rejected([math.exp(rng.gauss(0, 0.10)) for _ in range(5)])) for _ in range(trials)
    )
    assert noisy / trials <= 0.05


def test_the_h200_aa_pair_is_not_called_faster():
    """Per-launch TPOT of two identical flashinfer cells, the baseline first in every
    cycle (the run that was reported "faster +3.8% [+0.2%, +7.5%]")."""
    base = [[1.876], [1.844], [1.868]]
    copy = [[1.849], [1.751], [1.768]]
    c = compare(copy, base, metric="tpot_median_ms")
    assert c.verdict is Verdict.INCONCLUSIVE, c.reason
    assert c.needs_launches is not None


def test_the_h200_steady_decode_gap_is_slower():
    """triton vs flashinfer, TPOT in every launch (reports/examples/h200-sglang)."""
    flashinfer = [[1.751], [1.753], [1.752]]
    triton = [[1.795], [1.798], [1.796]]
    c = compare(triton, flashinfer, metric="tpot_median_ms")
    assert c.verdict is Verdict.SLOWER, c.reason
    assert c.change is not None and 0.02 < c.change < 0.03


def test_a_wide_interval_is_inconclusive_not_no_change():
    """ "+5.2% [-9.0%, +21.5%]" was worded "no significant change"."""
    base = [[100.0], [112.0], [91.0]]
    cand = [[109.0], [104.0], [103.0]]
    c = compare(cand, base, metric="output_throughput")
    assert c.verdict is Verdict.INCONCLUSIVE
    assert "more launch" in c.reason
