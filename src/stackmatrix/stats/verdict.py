"""Verdicts on the headline metric: a cell against the baseline, launches as the samples.

Method (docs/report.md says the same at more length):

* A launch's value is the median of its measured rounds. Launches are the independent
  samples: rounds inside one server launch share its warm-up, its memory layout and
  its clocks, so they are nested, not independent.
* Launches run in cycles (blocks): one launch of every cell per cycle, in a randomized
  balanced order (bench/schedule.py). The comparison pairs the cell's launch with the
  baseline's launch of the same cycle and works on the log ratios of those pairs, so a
  drift that both cells share, or an effect of the position in the cycle, cancels
  instead of becoming a difference between cells. A drift of one cell alone does not
  cancel: the ratios then trend, and a verdict whose ratios trend is not decided (it
  would depend on when the run stopped). Without two common cycles it falls back to
  Welch's unpaired interval, and with one launch per cell to the rounds of that launch.
* One bad launch (a cold start) is rejected by a stated rule (stats/outliers.py) and
  its cycle left out of the pairs.
* Two tests, each at the report's alpha (1 - confidence): the difference (two-sided:
  `faster` or `slower` when its interval excludes no change) and equivalence (two
  one-sided tests against +-min_effect, TOST: `equivalent` when the (1 - 2 alpha)
  interval lies within the margin). With adaptive launches (`launches = {min, max}`)
  the verdict is looked at after every cycle, and each look is held to the level a
  group-sequential error-spending design gives it (stats/sequential.py): the error
  rates hold under repeated looks without the waste of an even split.
* Four verdicts: `equivalent`, `slower`, `faster`, or `inconclusive` with the launches
  per cell that would decide it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypedDict

from stackmatrix.jsontypes import JSONObject
from stackmatrix.metric_registry import DEFAULT_HEADLINE

# a metric's direction is the registry's; the name stays importable from here
from stackmatrix.metric_registry import higher_is_better as higher_is_better
from stackmatrix.stats import sequential
from stackmatrix.stats.estimate import (
    Blocks,
    Design,
    Estimate,
    Side,
    estimate,
    medians_ratio,
    side,
    welch,
)

# the calibration lives in stats/power.py; these names stay importable from here
from stackmatrix.stats.power import Calibration as Calibration
from stackmatrix.stats.power import calibrate as calibrate
from stackmatrix.stats.power import detectable_change as detectable_change
from stackmatrix.stats.power import positive
from stackmatrix.stats.tdist import t_cdf, t_ppf

# the verdicts and what each means to its readers are the registry's; the name stays
# importable from here
from stackmatrix.verdict_registry import Verdict as Verdict

SampleUnit = Literal["launch", "round"]
Spending = Literal["pocock", "bonferroni"]
MAX_LAUNCHES_HINT = 200
# a trend of the ratio undoes a decided verdict only when shown at this level: a check
# of the model, not a second verdict, so its false alarms stay at 1 in 100
TREND_CONFIDENCE = 0.99


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """When a difference counts (Spec.report carries `confidence` and `min_effect`)."""

    confidence: float = 0.95
    min_effect: float = 0.02  # relative: the equivalence margin, +-min_effect
    max_halfwidth: float = 0.5  # kept in matrix.json for readers of older reports
    power: float = 0.8  # used to say how many launches would settle an open question
    # the adaptive plan's launches per cell (min, max); None: a fixed plan, one look
    plan: tuple[int, int] | None = None
    # how looks share alpha: error spending (stats/sequential.py), or an even split
    # over the looks with equivalence from the (1 - alpha) interval, the earlier rule,
    # kept to measure the design against (benchmarks/bench_sequential.py)
    spending: Spending = "pocock"
    # fewest pairs with which the paired model fits a term for the position in the
    # cycle (None: stats/estimate.py's rule); a term costs a degree of freedom
    position_from: int | None = None

    @property
    def looks(self) -> int:
        """Planned looks at the verdict: max - min + 1 for an adaptive plan, else 1."""
        return self.plan[1] - self.plan[0] + 1 if self.adaptive and self.plan else 1

    @property
    def adaptive(self) -> bool:
        return self.plan is not None and self.plan[1] > self.plan[0]

    @property
    def alpha(self) -> float:
        """The error rate of each test over all looks: 1 - confidence."""
        return 1 - self.confidence

    def level(self, pairs: int, *, sides: int = 2) -> float:
        """The nominal level of the look at `pairs` pairs: two-sided for the difference,
        one-sided (each half of TOST) for equivalence."""
        alpha = self.alpha
        if not self.adaptive or self.plan is None:
            return alpha
        if self.spending == "bonferroni":
            return alpha / self.looks / (2 if sides == 1 else 1)
        low, high = self.plan
        return sequential.nominal_alpha(pairs, low, high, alpha, sides=sides)


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
    interval: Literal["difference", "equivalence"] = "difference"  # which one low/high is
    level: float | None = None  # the nominal level of this look's difference test
    trend: float | None = None  # relative change of the ratio per cycle (paired, >= 4)
    detectable: float | None = None  # the change found with `power` at the plan's last look
    fitted: tuple[str, ...] = ()  # the terms of the model: "change", "position"

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
            "interval": self.interval,
            "level": self.level,
            "trend_per_cycle": self.trend,
            "detectable": self.detectable,
            "fitted": list(self.fitted),
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
    metric: str = DEFAULT_HEADLINE,
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
    a = side(
        cell, blocks[0] if blocks else None, "cell", th.min_effect, slots[0] if slots else None
    )
    b = side(
        baseline,
        blocks[1] if blocks else None,
        "baseline",
        th.min_effect,
        slots[1] if slots else None,
    )
    common: _Common = {
        "metric": metric,
        "confidence": th.confidence,
        "looks": th.looks,
        "rejected": (*a.rejected, *b.rejected),
    }
    est = estimate(a, b, position_from=th.position_from)
    if est is None:
        return _rounds_only(a, b, th, common)
    return _decide(
        est, th, common, n=(len(a.by_block), len(b.by_block)), medians=medians_ratio(a, b)
    )


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
        half = t_ppf(1 - th.level(1) / 2, est.df) * est.se if est.se > 0 else 0.0
        low, high = math.exp(est.diff - half), math.exp(est.diff + half)
        reason += f"; the rounds of one launch alone give [{low - 1:+.1%}, {high - 1:+.1%}]"
    return Comparison(
        verdict=Verdict.INCONCLUSIVE,
        reason=reason,
        unit="round",
        n_cell=len(xs),
        n_baseline=len(ys),
        ratio=ratio,
        ratio_of_medians=ratio,
        low=low,
        high=high,
        needs_launches=3,
        design="rounds",
        **common,
    )


def _decide(
    est: Estimate,
    th: Thresholds,
    common: _Common,
    *,
    n: tuple[int, int],
    medians: float | None,
) -> Comparison:
    pairs = est.pairs or min(n)
    level, one_sided = th.level(pairs), th.level(pairs, sides=1)
    diff = _span(est, 1 - level / 2)
    equal = _span(est, 1 - one_sided)
    p_value = None
    if est.se > 0:
        p_value = 2 * (1 - t_cdf(abs(est.diff) / est.se, est.df))
    elif est.se == 0:
        p_value = 1.0 if est.diff == 0 else 0.0
    verdict, reason, shown = verdict_of(
        diff, equal, th, common["metric"], levels=(level, one_sided)
    )
    drifting = _trend_decides(est, th, common["metric"], (diff, equal), (level, one_sided), verdict)
    if drifting:
        assert est.trend is not None
        reason = (
            f"{reason}, but the ratio trends {math.expm1(est.trend.slope):+.2%} per cycle "
            "(one cell drifts and the other does not) and the verdict at the run's first "
            "or last cycle would differ: it depends on when the run stopped, so it is not "
            "decided"
        )
        verdict = Verdict.INCONCLUSIVE
    needs = None
    if verdict is Verdict.INCONCLUSIVE and not drifting:
        needs = launches_to_decide(est, th)
        reason += _settle_hint(needs, pairs)
    reason += _design_note(est) + _rejected_note(common["rejected"])
    return Comparison(
        verdict=verdict,
        reason=reason,
        unit="launch",
        n_cell=n[0],
        n_baseline=n[1],
        ratio=math.exp(est.diff),
        ratio_of_medians=medians,
        low=shown[0],
        high=shown[1],
        p_value=p_value,
        df=None if math.isinf(est.df) else est.df,
        resolvable=diff[1] / math.exp(est.diff) - 1,
        needs_launches=needs,
        design=est.design,
        pairs=est.pairs,
        position_effect=None if est.position is None else math.expm1(est.position),
        interval="equivalence" if verdict is Verdict.EQUIVALENT else "difference",
        level=level,
        trend=None if est.trend is None else math.expm1(est.trend.slope),
        detectable=detectable(est, th),
        fitted=("change", "position") if est.position is not None else ("change",),
        **common,
    )


def _span(est: Estimate, quantile: float) -> tuple[float, float]:
    half = t_ppf(quantile, est.df) * est.se if est.se > 0 else 0.0
    return math.exp(est.diff - half), math.exp(est.diff + half)


def _trend_decides(
    est: Estimate,
    th: Thresholds,
    metric: str,
    spans: tuple[tuple[float, float], tuple[float, float]],
    levels: tuple[float, float],
    verdict: Verdict,
) -> bool:
    """A decided verdict that a shown trend of the ratio would change: the intervals
    moved to the trend line's value at the first and at the last cycle of the pairs
    give another verdict. A trend that could not change it (a -7% change drifting 0.7%
    per cycle) leaves it decided."""
    if est.trend is None or not verdict.decided or not est.trend.shown(TREND_CONFIDENCE):
        return False
    half = est.trend.slope * est.trend.cycles / 2
    for shift in (math.exp(-half), math.exp(half)):
        moved = tuple((lo * shift, hi * shift) for lo, hi in spans)
        if verdict_of(moved[0], moved[1], th, metric, levels=levels)[0] is not verdict:
            return True
    return False


def verdict_of(
    diff: tuple[float, float],
    equal: tuple[float, float],
    th: Thresholds,
    metric: str,
    *,
    levels: tuple[float, float] | None = None,
) -> tuple[Verdict, str, tuple[float, float]]:
    """The verdict of a difference interval and an equivalence (TOST) interval for
    cell/baseline (ratios), its reason, and the interval the reason quotes. `levels`:
    the look's two-sided level of the difference and one-sided level of each half of
    TOST (a fixed plan's: alpha and alpha)."""
    level, one_sided = levels or (th.alpha, th.alpha)
    margin = th.min_effect
    if equal[0] > 1 / (1 + margin) and equal[1] < 1 + margin:
        return (
            Verdict.EQUIVALENT,
            (
                f"{_span_text(equal)} lies within ±{margin:.0%} "
                f"({_level_text(th, 1 - 2 * one_sided)}, two one-sided tests)"
            ),
            equal,
        )
    low, high = diff
    if low > 1.0 or high < 1.0:
        better = (low > 1.0) == higher_is_better(metric)
        verdict = Verdict.FASTER if better else Verdict.SLOWER
        return (
            verdict,
            f"{_span_text(diff)} excludes no change ({_level_text(th, 1 - level)})",
            diff,
        )
    return (
        Verdict.INCONCLUSIVE,
        (
            f"{_span_text(diff)} contains no change and reaches beyond ±{margin:.0%} "
            f"({_level_text(th, 1 - level)}): neither a difference nor equivalence is shown"
        ),
        diff,
    )


def _span_text(span: tuple[float, float]) -> str:
    low, high = span
    change = math.sqrt(low * high) - 1  # the interval's center (symmetric on logs)
    return f"{change:+.1%} [{low - 1:+.1%}, {high - 1:+.1%}]"


def _level_text(th: Thresholds, coverage: float) -> str:
    """ "95% interval" for a fixed plan; an adaptive plan's look says its own level."""
    if not th.adaptive:
        return f"{coverage:.0%} interval"
    return f"{coverage:.1%} interval at this look of {th.looks}, {th.confidence:.0%} over all"


def detectable(est: Estimate, th: Thresholds) -> float | None:
    """The smallest change the difference test finds with `th.power` at the plan's last
    look: the verdict's own analysis (its pairs' spread, its fitted terms' degrees of
    freedom, the last look's level), not a separate calibration."""
    if est.sd <= 0 or est.design != "paired":
        return None
    high = th.plan[1] if th.adaptive and th.plan else max(est.pairs, 2)
    high = max(high, est.pairs)
    fitted = 2 if est.position is not None else 1
    df = max(high - fitted, 1)
    z = t_ppf(1 - th.level(high) / 2, df) + t_ppf(th.power, df)
    return math.expm1(z * est.sd / math.sqrt(high))


def launches_to_decide(est: Estimate, th: Thresholds) -> int | None:
    """Fewest launches per cell (cycles) whose interval, at this spread and this estimate,
    would be narrow enough to decide: to exclude no change when the estimate is at least
    half the margin, else to fit within +-min_effect."""
    if est.sd <= 0:
        return None
    margin = math.log1p(th.min_effect)
    d = abs(est.diff)
    equivalence = d < margin / 2
    target = margin - d if equivalence else d
    for k in range(2, MAX_LAUNCHES_HINT + 1):
        quantile = 1 - th.level(k, sides=1) if equivalence else 1 - th.level(k) / 2
        if t_ppf(quantile, k - 1) * est.sd / math.sqrt(k) < target:
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
