"""The estimate behind a verdict (stats/verdict.py): each side's launches after the
one-bad-launch rule, paired by cycle (with a term for the position in the cycle when
the design allows it), or unpaired (Welch) without common cycles. Log scale: a
difference of 0.01 is about 1%."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from stackmatrix.stats.outliers import rejected
from stackmatrix.stats.power import positive
from stackmatrix.stats.tdist import t_ppf

Design = Literal["paired", "unpaired", "rounds"]


@dataclass(frozen=True)
class Estimate:
    diff: float  # mean log ratio, cell over baseline
    se: float
    df: float
    sd: float  # per-launch (paired: per-pair) sd on the log scale, for "how many more"
    design: Design
    pairs: int = 0
    position: float | None = None  # log effect of running first in the cycle, if modelled
    trend: Trend | None = None  # the pairs' log ratio against their cycle (paired, >= 4)


@dataclass(frozen=True)
class Trend:
    """How the pairs' log ratio moves per cycle: the cells drifting apart."""

    slope: float  # log ratio per cycle
    se: float
    df: int
    cycles: int  # the span of cycles the pairs cover (last - first)

    def shown(self, confidence: float = 0.95) -> bool:
        """The slope's interval excludes no trend."""
        return (self.se == 0 and self.slope != 0) or (
            self.se > 0 and abs(self.slope) > t_ppf(0.5 + confidence / 2, self.df) * self.se
        )

    def moved(self) -> float:
        """How far the ratio moved over the run's cycles, on the log scale."""
        return abs(self.slope) * self.cycles


Blocks = Sequence[int]


@dataclass(frozen=True)
class Side:
    """One side's launches after the rejection rule: launch value by block."""

    by_block: dict[int, float]
    rounds: list[list[float]]
    rejected: list[str] = field(default_factory=list)
    slot: dict[int, int] = field(default_factory=dict)  # block -> the launch's slot in time


def side(
    launches: Sequence[Sequence[float]],
    blocks: Blocks | None,
    who: str,
    min_effect: float,
    slots: Sequence[int | None] | None = None,
) -> Side:
    keys = list(blocks) if blocks is not None else list(range(1, len(launches) + 1))
    slot = {k: s for k, s in zip(keys, slots or (), strict=False) if s}
    measured = [(k, positive(r)) for k, r in zip(keys, launches, strict=False)]
    measured = [(k, r) for k, r in measured if r]
    values = [statistics.median(r) for _, r in measured]
    gone = {x.position: x for x in rejected(values, min_effect=min_effect)}
    notes = [f"{who} L{measured[i][0]}: {x.reason()}" for i, x in sorted(gone.items())]
    kept = {
        k: v for i, ((k, _), v) in enumerate(zip(measured, values, strict=True)) if i not in gone
    }
    return Side(by_block=kept, rounds=[r for _, r in measured], rejected=notes, slot=slot)


def medians_ratio(a: Side, b: Side) -> float | None:
    if not a.by_block or not b.by_block:
        return None
    return statistics.median(a.by_block.values()) / statistics.median(b.by_block.values())


def estimate(a: Side, b: Side, *, position_from: int | None = None) -> Estimate | None:
    shared = sorted(set(a.by_block) & set(b.by_block))
    if len(shared) >= 2:
        d = [math.log(a.by_block[k] / b.by_block[k]) for k in shared]
        first = [ran_first(a, b, k) for k in shared]
        return replace(paired(d, first, position_from=position_from), trend=trend(shared, d))
    if len(a.by_block) >= 2 and len(b.by_block) >= 2:
        return welch(list(a.by_block.values()), list(b.by_block.values()))
    return None


def ran_first(a: Side, b: Side, block: int) -> int | None:
    """+1 when the cell's launch ran before the baseline's in this cycle, -1 after."""
    if block not in a.slot or block not in b.slot:
        return None
    return 1 if a.slot[block] < b.slot[block] else -1


MIN_PAIRS_FOR_POSITION = 6  # chosen by simulation (tests/unit/stats/test_sequential_rates.py)
MIN_PAIRS_FOR_TREND = 4


def trend(blocks: Sequence[int], d: Sequence[float]) -> Trend | None:
    """The least-squares slope of the pairs' log ratios over their cycles."""
    n = len(d)
    if n < MIN_PAIRS_FOR_TREND or len(set(blocks)) < 3:
        return None
    mx, my = statistics.fmean(blocks), statistics.fmean(d)
    sxx = sum((x - mx) ** 2 for x in blocks)
    slope = sum((x - mx) * (y - my) for x, y in zip(blocks, d, strict=True)) / sxx
    rss = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(blocks, d, strict=True))
    se = math.sqrt(rss / (n - 2) / sxx)
    return Trend(slope=slope, se=se, df=n - 2, cycles=max(blocks) - min(blocks))


def paired(
    d: Sequence[float], first: Sequence[int | None], *, position_from: int | None = None
) -> Estimate:
    """The mean log ratio of the cycles' pairs. When the launch order is known, varies
    (a balanced order) and there are at least MIN_PAIRS_FOR_POSITION pairs, the model
    also has a term for which of the two ran first in its cycle, so that effect (3.8% in
    an H200 A/A pair) leaves the error instead of widening it: d = change + position * s
    + error, with s = +1 or -1. A rule of the design alone, never of the values: the
    error rates hold."""
    n = len(d)
    signs = [s for s in first if s is not None]
    least = MIN_PAIRS_FOR_POSITION if position_from is None else position_from
    if len(signs) == n and n >= least and len(set(signs)) == 2:
        return with_position(d, signs)
    sd = statistics.stdev(d)
    return Estimate(statistics.fmean(d), sd / math.sqrt(n), n - 1, sd, "paired", n)


def ratio_interval(
    ratios: Sequence[float], *, confidence: float = 0.95
) -> tuple[float, float, float] | None:
    """The geometric mean of paired ratios and its t interval, each as a relative change
    (0.05: 5% more); the interval is NaN for one ratio, None for none. What the
    benchmarks' cross-checks report of their reps."""
    if not ratios:
        return None
    d = [math.log(r) for r in ratios]
    mean = statistics.fmean(d)
    if len(d) < 2:
        return (math.exp(mean) - 1, math.nan, math.nan)
    est = paired(d, [None] * len(d))
    half = t_ppf(0.5 + confidence / 2, est.df) * est.se
    return (math.exp(mean) - 1, math.exp(mean - half) - 1, math.exp(mean + half) - 1)


def with_position(d: Sequence[float], s: Sequence[int]) -> Estimate:
    n = len(d)
    ms, md = statistics.fmean(s), statistics.fmean(d)
    sxx = sum((x - ms) ** 2 for x in s)
    slope = sum((x - ms) * (y - md) for x, y in zip(s, d, strict=True)) / sxx
    intercept = md - slope * ms  # the change at s = 0: first and second equally often
    rss = sum((y - intercept - slope * x) ** 2 for x, y in zip(s, d, strict=True))
    sigma = math.sqrt(rss / (n - 2))
    se = sigma * math.sqrt(1 / n + ms * ms / sxx)
    return Estimate(intercept, se, n - 2, sigma, "paired", n, position=slope)


def welch(cell: Sequence[float], base: Sequence[float]) -> Estimate:
    x = [math.log(v) for v in cell]
    y = [math.log(v) for v in base]
    var_x, var_y = statistics.variance(x), statistics.variance(y)
    ex, ey = var_x / len(x), var_y / len(y)
    denominator = ex * ex / (len(x) - 1) + ey * ey / (len(y) - 1)
    df = (ex + ey) ** 2 / denominator if denominator > 0 else math.inf
    # a pair's sd from the pooled per-launch sd: what "how many more" assumes
    pooled = math.sqrt(((len(x) - 1) * var_x + (len(y) - 1) * var_y) / (len(x) + len(y) - 2))
    diff = statistics.fmean(x) - statistics.fmean(y)
    return Estimate(diff, math.sqrt(ex + ey), df, pooled * math.sqrt(2), "unpaired")
