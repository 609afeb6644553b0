"""stats.estimate.ratio_interval: the cross-checks' geometric mean of paired ratios and
its t interval, on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from stackmatrix.stats.estimate import ratio_interval
from stackmatrix.stats.tdist import t_ppf


def test_the_geometric_mean_and_its_t_interval() -> None:
    ratios = [1.02, 1.06, 1.04]
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = t_ppf(0.975, 2) * sd / math.sqrt(3)
    got = ratio_interval(ratios)
    assert got is not None
    assert got == pytest.approx(
        (math.exp(mean) - 1, math.exp(mean - half) - 1, math.exp(mean + half) - 1)
    )
    assert got[1] < got[0] < got[2]


def test_one_ratio_has_no_interval_and_none_no_mean() -> None:
    one = ratio_interval([0.9])
    assert one is not None and one[0] == pytest.approx(-0.1)
    assert math.isnan(one[1]) and math.isnan(one[2])
    assert ratio_interval([]) is None
