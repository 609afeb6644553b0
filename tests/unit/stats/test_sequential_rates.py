"""The sequential design's error rates and cost, measured on simulated runs shaped like
the H200's noise (tests/support/sequential_sim.py), and the parts it is built from."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest
from tests.support.sequential_sim import H200, NEW, OLD, Noise, rates, run

from stackmatrix.bench.schedule import schedule
from stackmatrix.stats import sequential
from stackmatrix.stats.estimate import Estimate
from stackmatrix.stats.verdict import Thresholds, Verdict, compare, detectable

RUNS = 400


def test_pocock_boundaries_are_the_published_ones() -> None:
    """Lan-DeMets Pocock-type spending, 5 equally spaced looks, two-sided alpha 0.05:
    2.438, 2.427, 2.410, 2.397, 2.386 (Jennison and Turnbull, table 7.6)."""
    bounds = sequential.boundaries([k / 5 for k in range(1, 6)], 0.05)
    assert bounds == pytest.approx([2.438, 2.427, 2.410, 2.397, 2.386], abs=0.004)


def test_spending_spends_all_of_alpha_and_nothing_before_the_first_look() -> None:
    assert sequential.spent(0.0, 0.05) == 0.0
    assert sequential.spent(1.0, 0.05) == pytest.approx(0.05)
    fractions = [k / 8 for k in range(3, 9)]
    assert all(
        sequential.spent(a, 0.05) < sequential.spent(b, 0.05)
        for a, b in itertools.pairwise(fractions)
    )


def test_each_look_is_stricter_than_alpha_and_looser_than_an_even_split() -> None:
    th = Thresholds(plan=(3, 8))
    for pairs in range(3, 9):
        level = th.level(pairs)
        assert th.alpha / th.looks < level < th.alpha
    # a fixed plan has one look, at alpha
    assert Thresholds(plan=(5, 5)).level(5) == pytest.approx(0.05)


def test_an_a_a_pair_is_rarely_called_a_change_and_mostly_decided_equivalent() -> None:
    new = rates(0.0, runs=RUNS, design=NEW)
    assert new.called_a_change <= 0.05
    assert new.equivalent >= 0.95
    assert new.median_launches <= 5


def test_the_error_rate_holds_at_a_noisier_host_and_under_a_drift_the_cells_share() -> None:
    noisy = rates(0.0, runs=RUNS, noise=replace(H200, launch_sd=0.01, drift_per_cycle=-0.01))
    assert noisy.called_a_change <= 0.05


def test_equivalence_at_the_margin_is_rarely_claimed() -> None:
    """TOST's error: a true change of exactly min_effect called equivalent at most alpha."""
    for change in (0.02, -0.02):
        assert rates(change, runs=RUNS).equivalent <= 0.05


def test_a_three_percent_change_is_found_in_few_launches() -> None:
    for change in (0.03, -0.03):
        r = rates(change, runs=RUNS)
        assert r.right >= 0.95
        assert r.median_launches <= 4


def test_the_design_costs_fewer_launches_than_the_even_split() -> None:
    """Launches run (warm-ups included) per decided verdict, both designs on the same
    simulated host: an A/A pair and a 3% change."""
    for change in (0.0, 0.03):
        new, old = rates(change, runs=RUNS, design=NEW), rates(change, runs=RUNS, design=OLD)
        assert new.cost_per_decided < 0.85 * old.cost_per_decided
        assert new.called_a_change >= old.called_a_change - 0.05 or change == 0.0


def test_a_cell_of_its_own_drifting_is_not_called_equivalent_by_when_the_run_stopped() -> None:
    """Only the candidate drifts, 2.5% per cycle (as flashinfer did against triton on
    the H200): its ratio to the baseline moves 2.5% per cycle, so "equivalent" would be
    true at one end of the run and false at the other."""
    drifting = replace(H200, cell_drift=0.025)
    r = rates(0.0, runs=RUNS, noise=drifting)
    assert r.equivalent <= 0.05


def test_a_trend_the_verdict_survives_leaves_it_decided() -> None:
    """-7% with the candidate drifting 0.3% per cycle: slower at either end of the run."""
    r = rates(-0.07, runs=200, noise=replace(H200, cell_drift=-0.003))
    assert r.right >= 0.95


def test_the_trend_rule_is_said_in_the_reason() -> None:
    """+3% on average, the candidate drifting +1% per cycle over 8 cycles: "faster" on
    the mean, but no change at the run's first cycle and +6.5% at its last."""
    rng = random.Random(4)
    base = [[100.0 * math.exp(rng.gauss(0, 0.002))] for _ in range(8)]
    cand = [[100.0 * math.exp(0.03 + 0.01 * (k - 3.5) + rng.gauss(0, 0.002))] for k in range(8)]
    c = compare(cand, base, metric="decode_tok_s", thresholds=Thresholds(plan=(8, 8)))
    assert c.trend is not None and c.trend == pytest.approx(0.01, abs=0.003)
    assert c.low is not None and c.low > 1.0  # the mean's interval alone excludes no change
    assert c.verdict is Verdict.INCONCLUSIVE
    assert "trends +1." in c.reason and "depends on when the run stopped" in c.reason
    # the same data without the drift is decided
    flat = [[v[0] / math.exp(0.01 * (k - 3.5))] for k, v in enumerate(cand)]
    assert (
        compare(flat, base, metric="decode_tok_s", thresholds=Thresholds(plan=(8, 8))).verdict
        is Verdict.FASTER
    )


def test_the_order_stays_balanced_for_the_cells_that_continue() -> None:
    """Three cells, the third decided after three cycles: in the cycles left, the
    continuing candidate runs before and after the baseline so that its count is even
    (the design's row for three cells alone put the baseline first twice)."""
    cells = ["base", "a", "b"]
    starts: dict[str, list[int]] = {c: [] for c in cells}
    clock = 0
    for k in range(1, 7):
        active = cells if k <= 3 else ["base", "a"]
        net = {
            c: sum(1 if s < b else -1 for s, b in zip(starts[c], starts["base"], strict=False))
            for c in ("a", "b")
        }
        for cid, _ in schedule(
            {c: [k] for c in active}, cells, "balanced", 11, baseline="base", balance=net
        ):
            clock += 1
            starts[cid].append(clock)
    before = sum(s < b for s, b in zip(starts["a"], starts["base"], strict=True))
    assert before == 3  # 3 of 6 cycles before the baseline, 3 after


def test_the_power_figure_is_the_power_the_design_has() -> None:
    """`detectable` says which change the plan finds with 80% power; runs of that change
    (pure launch noise of the same spread) find it about that often."""
    sd_launch = 0.004
    th = Thresholds(plan=(3, 6))
    est = Estimate(diff=0.0, se=0.0, df=5, sd=sd_launch * math.sqrt(2), design="paired", pairs=6)
    change = detectable(est, th)
    assert change is not None and 0.004 < change < 0.02
    quiet = Noise(
        launch_sd=sd_launch,
        host_cold=(0.0, 0.0),
        drift_per_cycle=0.0,
        first_in_cycle=0.0,
        cold_rate=0.0,
    )
    rng = random.Random(2)
    found = sum(
        run(rng, [change], low=3, high=6, noise=quiet, margin=1e-4).verdicts["c0"] is Verdict.FASTER
        for _ in range(RUNS)
    )
    assert 0.7 <= found / RUNS <= 0.95
