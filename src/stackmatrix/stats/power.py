"""Noise and power: what an A/A run of one cell says about its noise (`calibrate`), and
the smallest change a verdict can find with K launches per cell (docs/report.md).

Standard deviations are of log values, so 0.01 is about 1%.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from stackmatrix.jsontypes import JSONObject
from stackmatrix.stats.tdist import t_ppf


def positive(values: Sequence[float]) -> list[float]:
    # A log-scale interval needs positive values; a zero throughput is a failed round.
    return [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]


def detectable_change(
    sd: float, launches: int, *, alpha: float = 0.05, power: float = 0.8
) -> float:
    """Smallest relative change a two-sided Welch test finds with `power`, K launches each.

    `sd` is the per-launch standard deviation on the log scale. The usual normal-theory
    formula with t quantiles at 2K-2 degrees of freedom: (t_{1-a/2} + t_{power}) * sd * sqrt(2/K).
    """
    if launches < 2:
        return math.inf
    df = 2 * launches - 2
    k = t_ppf(1 - alpha / 2, df) + t_ppf(power, df)
    return math.expm1(k * sd * math.sqrt(2.0 / launches))


def launches_needed(
    sd: float, effect: float, *, alpha: float = 0.05, power: float = 0.8, limit: int = 200
) -> int | None:
    """Fewest launches per cell whose detectable change is at most `effect` (None: > limit)."""
    if detectable_change(sd, limit, alpha=alpha, power=power) > effect:
        return None
    low, high = 1, limit  # the detectable change shrinks as launches grow: bisect
    while high - low > 1:
        mid = (low + high) // 2
        if detectable_change(sd, mid, alpha=alpha, power=power) <= effect:
            high = mid
        else:
            low = mid
    return high


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """What an A/A run of one cell says about noise and the changes a verdict can see.

    Standard deviations are relative (log scale, so 0.01 is about 1%).
    """

    launches: int
    rounds_per_launch: float
    per_launch_sd: float  # sd of a launch's value: what verdicts compare
    launch_sd: float  # launch-to-launch component (variance components, floored at 0)
    within_sd: float | None  # round-to-round inside a launch (None: one round per launch)
    alpha: float
    power: float
    detectable: tuple[tuple[int, float], ...]  # (launches per cell, smallest change found)

    def launches_for(self, effect: float, *, limit: int = 200) -> int | None:
        """Fewest launches per cell that find a relative change of `effect` with `power`."""
        return launches_needed(
            self.per_launch_sd, effect, alpha=self.alpha, power=self.power, limit=limit
        )

    def to_dict(self) -> JSONObject:
        return {
            "launches": self.launches,
            "rounds_per_launch": self.rounds_per_launch,
            "per_launch_sd": self.per_launch_sd,
            "launch_sd": self.launch_sd,
            "within_sd": self.within_sd,
            "alpha": self.alpha,
            "power": self.power,
            "detectable": [{"launches": k, "change": c} for k, c in self.detectable],
        }


def calibrate(
    launch_values: Sequence[Sequence[float]],
    *,
    launches_options: Sequence[int] = (2, 3, 5, 8, 10),
    alpha: float = 0.05,
    power: float = 0.8,
) -> Calibration:
    """Noise components of an A/A run and the smallest change detectable with K launches.

    `launch_values` holds one sequence of round values per launch of the same cell.
    """
    launches = [[math.log(v) for v in positive(r)] for r in launch_values]
    launches = [r for r in launches if r]
    if len(launches) < 2:
        raise ValueError(
            f"calibration needs >= 2 launches with measured rounds, got {len(launches)}; "
            "run the cell as an A/A experiment with --launches 3 or more"
        )
    per_launch_sd = statistics.stdev(statistics.median(r) for r in launches)
    within = _within_variance(launches)
    mean_rounds = statistics.fmean(len(r) for r in launches)
    between = statistics.variance(statistics.fmean(r) for r in launches)
    launch_var = max(0.0, between - (within or 0.0) / mean_rounds)
    return Calibration(
        launches=len(launches),
        rounds_per_launch=mean_rounds,
        per_launch_sd=per_launch_sd,
        launch_sd=math.sqrt(launch_var),
        within_sd=None if within is None else math.sqrt(within),
        alpha=alpha,
        power=power,
        detectable=tuple(
            (k, detectable_change(per_launch_sd, k, alpha=alpha, power=power))
            for k in launches_options
        ),
    )


def _within_variance(launches: Sequence[Sequence[float]]) -> float | None:
    """Pooled round-to-round variance inside launches (None when no launch has 2 rounds)."""
    sums = [(len(r) - 1, statistics.variance(r)) for r in launches if len(r) >= 2]
    dof = sum(d for d, _ in sums)
    return sum(d * v for d, v in sums) / dof if dof else None
