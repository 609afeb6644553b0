"""Verdicts on the headline metric: a cell against the baseline, launches as the samples.

Method (docs/report.md says the same at more length):

* A launch's value is the median of its measured rounds. Launches are the independent
  samples: rounds inside one server launch share its warm-up, its memory layout and
  its clocks, so they are nested, not independent.
* Launches run in cycles (blocks): one launch of every cell per cycle, in a randomized
  balanced order (bench/schedule.py). The comparison pairs the cell's launch with the
  baseline's launch of the same cycle and works on the log ratios of those pairs, so a
  drift over time or an effect of the position in the cycle cancels instead of becoming
  a difference between cells. Without two common cycles it falls back to Welch's
  unpaired interval, and with one launch per cell to the rounds of that launch.
* One bad launch (a cold start) is rejected by a stated rule (report/outliers.py) and
  its cycle left out of the pairs.
* The interval is a t interval on the mean log ratio, exponentiated: a confidence
  interval for cell/baseline. With adaptive launches (`launches = {min, max}`) the
  verdict may be looked at after every cycle, so each look uses alpha / looks
  (Bonferroni over the planned looks): the error rates hold under repeated looks.
* Four verdicts: `equivalent` when the whole interval lies within +-min_effect;
  otherwise `slower` or `faster` when it excludes no change; otherwise `inconclusive`,
  with the launches per cell that would decide it.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from stackmatrix.records._read import JSONObject
from stackmatrix.report._tdist import t_cdf, t_ppf
from stackmatrix.report.estimate import (
    Blocks,
    Design,
    Estimate,
    Side,
    estimate,
    medians_ratio,
    side,
    welch,
)

# the calibration lives in report/power.py; these names stay importable from here
from stackmatrix.report.power import Calibration as Calibration
from stackmatrix.report.power import calibrate as calibrate
from stackmatrix.report.power import detectable_change as detectable_change
from stackmatrix.report.power import positive

SampleUnit = Literal["launch", "round"]
_LOWER_IS_BETTER = frozenset({"duration_s", "e2e_s", "errors"})
MAX_LAUNCHES_HINT = 200


class Verdict(enum.StrEnum):
    BASELINE = "baseline"
    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    NOT_MEASURED = "not measured"

    @property
    def decided(self) -> bool:
        """A verdict more launches would not be asked to change."""
        return self in (Verdict.FASTER, Verdict.SLOWER, Verdict.EQUIVALENT, Verdict.BASELINE)


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """When a difference counts (Spec.report carries `confidence` and `min_effect`)."""

    confidence: float = 0.95
    min_effect: float = 0.02  # relative: the equivalence margin, +-min_effect
    max_halfwidth: float = 0.5  # kept in matrix.json for readers of older reports
    power: float = 0.8  # used to say how many launches would settle an open question
    looks: int = 1  # planned looks at the verdict (adaptive launches: max - min + 1)

    @property
    def alpha(self) -> float:
        """The error rate of one look (Bonferroni over the planned looks)."""
        return (1 - self.confidence) / max(1, self.looks)


def higher_is_better(metric: str) -> bool:
    """Throughputs (`*_throughput`, `*_tok_s`) grow when faster; latencies (`*_ms`) shrink."""
    return not (metric.endswith("_ms") or metric in _LOWER_IS_BETTER)


@dataclass(frozen=True, kw_only=True)
class Samples:
    """The independent samples of one cell: launch medians, or rounds of one launch."""

    values: tuple[float, ...]
    unit: SampleUnit
    launches: int
    rounds: int

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def to_dict(self) -> JSONObject:
        return {
            "values": list(self.values),
            "unit": self.unit,
            "launches": self.launches,
            "rounds": self.rounds,
        }


def launch_samples(
    launches: Sequence[Sequence[float]], *, unit: SampleUnit | None = None
) -> Samples:
    """Collapse rounds into one value per launch (their median).

    With a single measured launch the rounds themselves become the samples, unless
    `unit` forces a choice (both sides of a comparison must use the same unit).
    """
    measured = [positive(rounds) for rounds in launches]
    measured = [rounds for rounds in measured if rounds]
    total_rounds = sum(len(r) for r in measured)
    chosen: SampleUnit = unit or ("launch" if len(measured) >= 2 else "round")
    if chosen == "launch":
        values = tuple(statistics.median(r) for r in measured)
    else:
        values = tuple(v for r in measured for v in r)
    return Samples(values=values, unit=chosen, launches=len(measured), rounds=total_rounds)


@dataclass(frozen=True, kw_only=True)
class Interval:
    """One cell's typical value (geometric mean of its samples) and a t interval for it."""

    center: float
    median: float
    low: float | None
    high: float | None
    n: int
    unit: SampleUnit

    def to_dict(self) -> JSONObject:
        return {
            "center": self.center,
            "median": self.median,
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "unit": self.unit,
        }


def interval(samples: Samples, *, confidence: float = 0.95) -> Interval | None:
    """The cell's geometric mean with a t interval on the log scale."""
    if not samples.values:
        return None
    median = statistics.median(samples.values)
    n = len(samples.values)
    logs = [math.log(v) for v in samples.values]
    mean = statistics.fmean(logs)
    if n < 2:
        return Interval(
            center=math.exp(mean), median=median, low=None, high=None, n=n, unit=samples.unit
        )
    half = t_ppf(0.5 + confidence / 2, n - 1) * statistics.stdev(logs) / math.sqrt(n)
    return Interval(
        center=math.exp(mean),
        median=median,
        low=math.exp(mean - half),
        high=math.exp(mean + half),
        n=n,
        unit=samples.unit,
    )


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """A cell against the baseline on one metric: ratio, interval, verdict and why."""

    metric: str
    verdict: Verdict
    reason: str
    confidence: float
    unit: SampleUnit | None = None
    n_cell: int = 0
    n_baseline: int = 0
    ratio: float | None = None  # cell / baseline, the interval's center
    ratio_of_medians: float | None = None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    df: float | None = None
    resolvable: float | None = None  # relative half-width: smaller changes are invisible
    needs_launches: int | None = None  # launches per cell that would settle the question
    design: Design | None = None  # paired by cycle, unpaired (Welch), or rounds of a launch
    pairs: int = 0  # cycles with a launch of both (paired design)
    looks: int = 1
    rejected: tuple[str, ...] = ()  # launches left out by the rejection rule, and why
    position_effect: float | None = None  # relative: running first in a cycle (modelled)

    @property
    def change(self) -> float | None:
        return None if self.ratio is None else self.ratio - 1.0

    def to_dict(self) -> JSONObject:
        return {
            "metric": self.metric,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "confidence": self.confidence,
            "unit": self.unit,
            "n_cell": self.n_cell,
            "n_baseline": self.n_baseline,
            "ratio": self.ratio,
            "change": self.change,
            "ratio_of_medians": self.ratio_of_medians,
            "ci_low": self.low,
            "ci_high": self.high,
            "p_value": self.p_value,
            "df": self.df,
            "resolvable": self.resolvable,
            "needs_launches": self.needs_launches,
            "design": self.design,
            "pairs": self.pairs,
            "looks": self.looks,
            "rejected": list(self.rejected),
            "position_effect": self.position_effect,
        }


class _Common(TypedDict):
    """What every comparison of one metric shares, decided or not."""

    metric: str
    confidence: float
    looks: int
    rejected: tuple[str, ...]


def compare(
    cell: Sequence[Sequence[float]],
    baseline: Sequence[Sequence[float]],
    *,
    metric: str = "output_throughput",
    thresholds: Thresholds | None = None,
    blocks: tuple[Blocks, Blocks] | None = None,
    slots: tuple[Sequence[int | None], Sequence[int | None]] | None = None,
) -> Comparison:
    """Compare a cell's launches (each a list of round values) with the baseline's.

    `blocks` gives each launch's cycle (its launch index: launch k of every cell runs in
    cycle k), cell's then baseline's; without it the i-th launches are taken as one
    cycle. Launches of one cycle are paired. `slots` (each launch's place in the run's
    time order) let the paired analysis remove the effect of running first or second in
    a cycle (see `_paired`)."""
    th = thresholds or Thresholds()
    a = side(cell, blocks[0] if blocks else None, "cell", th.min_effect,
              slots[0] if slots else None)  # fmt: skip
    b = side(baseline, blocks[1] if blocks else None, "baseline", th.min_effect,
              slots[1] if slots else None)  # fmt: skip
    common: _Common = {"metric": metric, "confidence": th.confidence, "looks": th.looks,
                              "rejected": (*a.rejected, *b.rejected)}  # fmt: skip
    est = estimate(a, b)
    if est is None:
        return _rounds_only(a, b, th, common)
    return _decide(est, th, common, n=(len(a.by_block), len(b.by_block)),
                   medians=medians_ratio(a, b))  # fmt: skip


def _rounds_only(a: Side, b: Side, th: Thresholds, common: _Common) -> Comparison:
    """One launch on a side: its rounds are the samples, which say nothing about launch
    noise; never decided, whatever the rounds say."""
    xs = [v for r in a.rounds for v in r]
    ys = [v for r in b.rounds for v in r]
    ratio = statistics.median(xs) / statistics.median(ys) if xs and ys else None
    reason = (
        f"too few launches for a verdict ({len(a.rounds)} vs {len(b.rounds)}); "
        "needs >= 2 launches per cell in common cycles, better 3 or more"
    )
    low = high = None
    if len(xs) >= 2 and len(ys) >= 2:
        est = welch(xs, ys)
        half = t_ppf(1 - th.alpha / 2, est.df) * est.se if est.se > 0 else 0.0
        low, high = math.exp(est.diff - half), math.exp(est.diff + half)
        reason += f"; the rounds of one launch alone give [{low - 1:+.1%}, {high - 1:+.1%}]"
    return Comparison(verdict=Verdict.INCONCLUSIVE, reason=reason, unit="round",
                      n_cell=len(xs), n_baseline=len(ys), ratio=ratio, ratio_of_medians=ratio,
                      low=low, high=high, needs_launches=3, design="rounds",
                      **common)  # fmt: skip


def _decide(
    est: Estimate,
    th: Thresholds,
    common: _Common,
    *,
    n: tuple[int, int],
    medians: float | None,
) -> Comparison:
    if est.se == 0:
        half, p_value = 0.0, (1.0 if est.diff == 0 else 0.0)
    else:
        half = t_ppf(1 - th.alpha / 2, est.df) * est.se
        p_value = min(1.0, th.looks * 2 * (1 - t_cdf(abs(est.diff) / est.se, est.df)))
    low, high = math.exp(est.diff - half), math.exp(est.diff + half)
    verdict, reason = verdict_of(low, high, th, common["metric"])
    needs = None
    if verdict is Verdict.INCONCLUSIVE:
        needs = launches_to_decide(est, th)
        reason += _settle_hint(needs, est.pairs or min(n))
    reason += _design_note(est) + _rejected_note(common["rejected"])
    return Comparison(
        verdict=verdict,
        reason=reason,
        unit="launch",
        n_cell=n[0],
        n_baseline=n[1],
        ratio=math.exp(est.diff),
        ratio_of_medians=medians,
        low=low,
        high=high,
        p_value=p_value,
        df=None if math.isinf(est.df) else est.df,
        resolvable=math.expm1(half),
        needs_launches=needs,
        design=est.design,
        pairs=est.pairs,
        position_effect=None if est.position is None else math.expm1(est.position),
        **common,
    )


def verdict_of(low: float, high: float, th: Thresholds, metric: str) -> tuple[Verdict, str]:
    """The verdict of an interval [low, high] for cell/baseline (ratios)."""
    change = math.sqrt(low * high) - 1  # the interval's center (symmetric on logs)
    span = f"{change:+.1%} [{low - 1:+.1%}, {high - 1:+.1%}]"
    level = f"{th.confidence:.0%} confidence" + (f", {th.looks} looks" if th.looks > 1 else "")
    margin = th.min_effect
    if low > 1 / (1 + margin) and high < 1 + margin:
        return Verdict.EQUIVALENT, f"{span} lies within ±{margin:.0%} ({level})"
    if low > 1.0 or high < 1.0:
        better = (low > 1.0) == higher_is_better(metric)
        verdict = Verdict.FASTER if better else Verdict.SLOWER
        return verdict, f"{span} excludes no change ({level})"
    return Verdict.INCONCLUSIVE, (
        f"{span} contains no change and reaches beyond ±{margin:.0%}: "
        "neither a difference nor equivalence is shown"
    )


def launches_to_decide(est: Estimate, th: Thresholds) -> int | None:
    """Fewest launches per cell (cycles) whose interval, at this spread and this estimate,
    would be narrow enough to decide: to exclude no change when the estimate is at least
    half the margin, else to fit within +-min_effect."""
    if est.sd <= 0:
        return None
    margin = math.log1p(th.min_effect)
    d = abs(est.diff)
    target = d if d >= margin / 2 else margin - d
    for k in range(2, MAX_LAUNCHES_HINT + 1):
        if t_ppf(1 - th.alpha / 2, k - 1) * est.sd / math.sqrt(k) < target:
            return k
    return None


def _settle_hint(needs: int | None, have: int) -> str:
    if needs is None:
        return f"; more than {MAX_LAUNCHES_HINT} launches per cell would be needed to decide"
    more = max(needs - have, 1)
    return (
        f"; about {more} more launch(es) per cell ({max(needs, have + 1)} in all) would decide it"
    )


def _design_note(est: Estimate) -> str:
    if est.design == "unpaired":
        return "; launches not paired by cycle (no common cycles): Welch's interval"
    if est.position is not None:
        return (
            f"; running first in a cycle: {math.expm1(est.position):+.1%} "
            "(modelled, kept out of the comparison)"
        )
    return ""


def _rejected_note(rejected: Sequence[str]) -> str:
    if not rejected:
        return ""
    return "; left out by the one-bad-launch rule: " + "; ".join(rejected)
