"""Noise calibration: variance components of an A/A run and the launches a verdict needs."""

import random
from typing import Any

import pytest
from tests.unit.stats.test_stats import simulate

from stackmatrix.stats.verdict import Verdict, calibrate, compare


def test_recovers_launch_and_within_launch_noise():
    rng = random.Random(21)
    data = simulate(rng, 47.0, launches=40, rounds=5, launch_sd=0.08, round_sd=0.01)
    cal = calibrate(data)
    assert cal.launches == 40 and cal.rounds_per_launch == 5
    assert cal.launch_sd == pytest.approx(0.08, rel=0.3)
    assert cal.within_sd == pytest.approx(0.01, rel=0.2)
    assert cal.per_launch_sd == pytest.approx(0.08, rel=0.3)
    changes = [change for _, change in cal.detectable]
    assert changes == sorted(changes, reverse=True)
    assert [k for k, _ in cal.detectable] == [2, 3, 5, 8, 10]


def test_six_percent_change_is_found_with_the_launches_calibration_recommends():
    # calibrate on A/A data, then a true 6% change measured with the
    # recommended number of launches must be found about `power` of the time.
    rng = random.Random(22)
    noise: dict[str, Any] = {"rounds": 3, "launch_sd": 0.03, "round_sd": 0.01}
    cal = calibrate(simulate(rng, 47.0, launches=30, **noise), power=0.9)
    k = cal.launches_for(0.06)
    assert k is not None and 3 <= k <= 10, k
    found = sum(
        compare(
            simulate(rng, 47.0 * 0.94, launches=k, **noise),
            simulate(rng, 47.0, launches=k, **noise),
        ).verdict
        is Verdict.SLOWER
        for _ in range(400)
    )
    assert found / 400 >= 0.8, (k, found)
    # One launch fewer than recommended is visibly weaker.
    assert cal.launches_for(0.06, limit=k - 1) is None


def test_big_launch_noise_needs_many_launches_for_a_small_effect():
    rng = random.Random(23)
    cal = calibrate(simulate(rng, 47.0, launches=10, rounds=3, launch_sd=0.08, round_sd=0.01))
    needed = cal.launches_for(0.02)
    assert needed is None or needed > 50
    detectable = cal.to_dict()["detectable"]
    assert isinstance(detectable, list) and isinstance(detectable[0], dict)
    assert detectable[0]["launches"] == 2


def test_calibration_needs_two_launches():
    with pytest.raises(ValueError, match="needs >= 2 launches"):
        calibrate([[47.0, 47.2, 46.9]])


def test_one_round_per_launch_has_no_within_component():
    cal = calibrate([[47.0], [48.0], [46.5]])
    assert cal.within_sd is None
    assert cal.per_launch_sd > 0
