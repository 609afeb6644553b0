"""Property tests of the verdicts on synthetic launch/round data with a known effect."""

import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackmatrix.stats.verdict import (
    Thresholds,
    Verdict,
    compare,
    detectable_change,
    higher_is_better,
    interval,
    launch_samples,
)


def simulate(
    rng: random.Random,
    mean: float,
    *,
    launches: int,
    rounds: int,
    launch_sd: float,
    round_sd: float,
) -> list[list[float]]:
    """Launch levels vary by launch_sd; rounds inside a launch by round_sd (relative)."""
    out = []
    for _ in range(launches):
        level = mean * (1 + rng.gauss(0, launch_sd))
        out.append([level * (1 + rng.gauss(0, round_sd)) for _ in range(rounds)])
    return out


def verdict_rates(
    seed: int, trials: int, cell_mean: float, base_mean: float, **noise: Any
) -> dict[Verdict, float]:
    rng = random.Random(seed)
    counts = Counter(
        compare(simulate(rng, cell_mean, **noise), simulate(rng, base_mean, **noise)).verdict
        for _ in range(trials)
    )
    return {v: counts[v] / trials for v in Verdict}


def test_aa_with_one_percent_noise_is_called_a_change_at_most_5_percent():
    rates = verdict_rates(
        11, 2000, 89.5, 89.5, launches=5, rounds=3, launch_sd=0.01, round_sd=0.005
    )
    assert rates[Verdict.FASTER] + rates[Verdict.SLOWER] <= 0.05, rates


def test_aa_with_launch_spread_like_43_vs_51_is_never_called_a_change():
    # the same configuration gave 43 tok/s in one launch and 51 in the next,
    # while rounds inside a launch agreed closely. A 10% launch sd makes such pairs common.
    rng = random.Random(3)
    pairs = [
        simulate(rng, 47, launches=2, rounds=1, launch_sd=0.10, round_sd=0.0) for _ in range(2000)
    ]
    gaps = [abs(a[0] / b[0] - 1) for a, b in pairs]
    assert sum(g >= 0.17 for g in gaps) / len(gaps) > 0.15  # 43 vs 51 is not a freak here
    rates = verdict_rates(12, 2000, 47, 47, launches=5, rounds=3, launch_sd=0.10, round_sd=0.01)
    # 5% at most, within the simulation's own error (2000 runs: 2.58 standard errors)
    assert (
        rates[Verdict.FASTER] + rates[Verdict.SLOWER] <= 0.05 + 2.58 * (0.05 * 0.95 / 2000) ** 0.5
    ), rates
    # at 10% noise 5 launches cannot show equivalence within 2%: "don't know", said so
    assert rates[Verdict.INCONCLUSIVE] >= 0.94, rates


def test_rounds_of_one_launch_would_have_called_that_aa_pair_a_change():
    # Why launches are the samples: the rounds' interval of one launch each excludes no
    # change most of the time on A/A data, so one launch per cell never decides.
    rng = random.Random(5)
    wrong = 0
    for _ in range(300):
        a = simulate(rng, 47, launches=1, rounds=5, launch_sd=0.10, round_sd=0.01)
        b = simulate(rng, 47, launches=1, rounds=5, launch_sd=0.10, round_sd=0.01)
        c = compare(a, b)
        assert c.verdict is Verdict.INCONCLUSIVE and c.low is not None and c.high is not None
        wrong += c.low > 1 or c.high < 1
    assert wrong / 300 > 0.5


def test_true_six_percent_regression_with_one_percent_noise_and_five_launches_is_slower():
    rates = verdict_rates(
        13, 1000, 83.9, 89.5, launches=5, rounds=3, launch_sd=0.01, round_sd=0.005
    )
    assert rates[Verdict.SLOWER] >= 0.99, rates


def test_six_percent_gain_is_faster_and_latency_direction_is_reversed():
    rng = random.Random(1)
    fast = simulate(rng, 95.0, launches=5, rounds=3, launch_sd=0.01, round_sd=0.005)
    base = simulate(rng, 89.5, launches=5, rounds=3, launch_sd=0.01, round_sd=0.005)
    assert compare(fast, base).verdict is Verdict.FASTER
    # A 6% higher TTFT is worse.
    assert compare(fast, base, metric="ttft_p99_ms").verdict is Verdict.SLOWER
    assert higher_is_better("decode_tok_s") and not higher_is_better("itl_median_ms")


def test_small_real_change_within_min_effect_is_equivalent():
    rng = random.Random(2)
    a = simulate(rng, 99.0, launches=8, rounds=3, launch_sd=0.001, round_sd=0.001)
    b = simulate(rng, 100.0, launches=8, rounds=3, launch_sd=0.001, round_sd=0.001)
    result = compare(a, b)
    assert result.high is not None and result.high < 1.0  # significant...
    assert result.verdict is Verdict.EQUIVALENT  # ...but within the 2% margin
    assert "lies within ±2%" in result.reason
    tight = compare(a, b, thresholds=Thresholds(min_effect=0.005))
    assert tight.verdict is Verdict.SLOWER


def test_single_launch_falls_back_to_rounds_and_says_so():
    result = compare([[80.0, 81.0, 80.5]], [[90.0, 90.5, 89.8]])
    assert result.unit == "round" and result.design == "rounds"
    assert result.verdict is Verdict.INCONCLUSIVE  # rounds say nothing of launch noise
    assert "the rounds of one launch alone give [-11" in result.reason


def test_too_few_samples_is_inconclusive_and_says_what_would_settle_it():
    result = compare([[80.0]], [[90.0]])
    assert result.verdict is Verdict.INCONCLUSIVE
    assert "needs >= 2 launches" in result.reason
    assert result.needs_launches == 3


def test_noisy_aa_says_how_many_launches_would_decide():
    rng = random.Random(4)
    a = simulate(rng, 47, launches=3, rounds=3, launch_sd=0.05, round_sd=0.01)
    b = simulate(rng, 47, launches=3, rounds=3, launch_sd=0.05, round_sd=0.01)
    result = compare(a, b)
    assert result.verdict is Verdict.INCONCLUSIVE
    assert result.needs_launches is not None and result.needs_launches > 3
    assert f"({result.needs_launches} in all) would decide it" in result.reason


def test_mixed_launch_counts_use_rounds_for_both_sides():
    result = compare([[80.0, 80.2, 79.9]], [[90.0, 90.1], [89.0, 89.5], [90.2, 90.0]])
    assert result.unit == "round"
    assert result.n_cell == 3 and result.n_baseline == 6


def test_failed_rounds_and_zero_values_are_ignored():
    samples = launch_samples([[0.0, 10.0, 12.0], [], [11.0]])
    assert samples.unit == "launch" and samples.values == (11.0, 11.0)
    iv = interval(samples)
    assert iv is not None and iv.low == pytest.approx(11.0) and iv.high == pytest.approx(11.0)


def test_detectable_change_shrinks_with_more_launches():
    changes = [detectable_change(0.02, k) for k in (2, 3, 5, 10)]
    assert changes == sorted(changes, reverse=True)
    assert changes[-1] < 0.03


positive = st.floats(min_value=1.0, max_value=1000.0, allow_nan=False)
launch = st.lists(positive, min_size=1, max_size=4)
launches = st.lists(launch, min_size=2, max_size=6)


@settings(max_examples=60, deadline=None)
@given(launches, launches, st.floats(min_value=0.01, max_value=100.0))
def test_ratio_is_antisymmetric_and_scale_free(a, b, k):
    ab, ba = compare(a, b), compare(b, a)
    assert ab.ratio is not None and ba.ratio is not None
    assert ab.ratio * ba.ratio == pytest.approx(1.0, rel=1e-9)
    scaled = compare([[v * k for v in r] for r in a], [[v * k for v in r] for r in b])
    assert scaled.verdict is ab.verdict
    assert scaled.ratio == pytest.approx(ab.ratio, rel=1e-9)
    if ab.low is not None and ab.high is not None:
        assert ab.low <= ab.ratio <= ab.high


@settings(max_examples=40, deadline=None)
@given(launches)
def test_a_cell_against_itself_is_never_a_change(a):
    assert compare(a, a).verdict in (Verdict.EQUIVALENT, Verdict.INCONCLUSIVE)
