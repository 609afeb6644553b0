"""Verdicts on the headline metric: a cell against the baseline, launches as the samples.

Method (docs/report.md says the same at more length):

* A launch's value is the median of its measured rounds. Launches are the independent
  samples (issue 7): rounds inside one server launch share its warm-up, its memory
  layout and its clocks, so they are nested, not independent.
* The interval is Welch's t interval on the log of the launch values, exponentiated:
  a confidence interval for the ratio cell/baseline. It is analytic and deterministic,
  exact for log-normal noise, and still defined with two launches per cell, where a
  bootstrap (which cannot see beyond the values it resamples) is far too narrow.
* The point estimate is the ratio of geometric means of the launch values, the center
  of that interval, so the number and its interval always agree. (Within a launch the
  median of rounds is used; the plain ratio of medians of launch values is kept too.)
* Only one launch per cell: the rounds become the samples and the verdict says that its
  interval ignores launch-to-launch noise.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from stackmatrix.report._tdist import t_cdf, t_ppf

# the calibration moved to report/power.py; these names stay importable from here
from stackmatrix.report.power import Calibration as Calibration
from stackmatrix.report.power import calibrate as calibrate
from stackmatrix.report.power import detectable_change as detectable_change
from stackmatrix.report.power import launches_needed, positive

SampleUnit = Literal["launch", "round"]
_LOWER_IS_BETTER = frozenset({"duration_s", "e2e_s", "errors"})


class Verdict(enum.StrEnum):
    BASELINE = "baseline"
    FASTER = "faster"
    SLOWER = "slower"
    NO_CHANGE = "no significant change"
    INCONCLUSIVE = "inconclusive"
    NOT_MEASURED = "not measured"


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """When a difference counts (Spec.report carries `confidence` and `min_effect`)."""

    confidence: float = 0.95
    min_effect: float = 0.02  # relative; smaller real changes are "no significant change"
    # An interval reaching further than this either side says nothing useful.
    max_halfwidth: float = 0.5
    power: float = 0.8  # used to say how many launches would settle an open question


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

    def to_dict(self) -> dict[str, Any]:
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

    def to_dict(self) -> dict[str, Any]:
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
    ratio: float | None = None  # cell / baseline, ratio of geometric means (interval center)
    ratio_of_medians: float | None = None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    df: float | None = None
    resolvable: float | None = None  # relative half-width: smaller changes are invisible
    needs_launches: int | None = None  # launches per cell that would settle the question

    @property
    def change(self) -> float | None:
        return None if self.ratio is None else self.ratio - 1.0

    def to_dict(self) -> dict[str, Any]:
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
        }


@dataclass(frozen=True)
class _Welch:
    diff: float  # mean log difference
    se: float
    df: float
    pooled_sd: float  # per-sample sd on the log scale, for "how many would it take"


def _welch(cell: Sequence[float], base: Sequence[float]) -> _Welch:
    a = [math.log(v) for v in cell]
    b = [math.log(v) for v in base]
    var_a, var_b = statistics.variance(a), statistics.variance(b)
    ea, eb = var_a / len(a), var_b / len(b)
    se = math.sqrt(ea + eb)
    denominator = ea * ea / (len(a) - 1) + eb * eb / (len(b) - 1)
    df = (ea + eb) ** 2 / denominator if denominator > 0 else math.inf
    pooled = math.sqrt(((len(a) - 1) * var_a + (len(b) - 1) * var_b) / (len(a) + len(b) - 2))
    return _Welch(statistics.fmean(a) - statistics.fmean(b), se, df, pooled)


def compare(
    cell: Sequence[Sequence[float]],
    baseline: Sequence[Sequence[float]],
    *,
    metric: str = "output_throughput",
    thresholds: Thresholds | None = None,
) -> Comparison:
    """Compare a cell's launches (each a list of round values) with the baseline's."""
    th = thresholds or Thresholds()
    both_launches = (
        sum(1 for r in cell if positive(r)) >= 2 and sum(1 for r in baseline if positive(r)) >= 2
    )
    unit: SampleUnit = "launch" if both_launches else "round"
    a = launch_samples(cell, unit=unit)
    b = launch_samples(baseline, unit=unit)
    common = {"metric": metric, "confidence": th.confidence, "unit": unit}
    if len(a.values) < 2 or len(b.values) < 2:
        return Comparison(
            verdict=Verdict.INCONCLUSIVE,
            reason=(
                f"too few samples for an interval ({len(a.values)} vs {len(b.values)} "
                f"{unit}s); needs >= 2 launches per cell, better 3 or more"
            ),
            n_cell=len(a.values),
            n_baseline=len(b.values),
            ratio_of_medians=_ratio(a, b),
            needs_launches=3,
            **common,  # type: ignore[arg-type]
        )
    return _decide(a, b, th, common)


def _ratio(a: Samples, b: Samples) -> float | None:
    if a.median is None or b.median is None:
        return None
    return a.median / b.median


def _decide(a: Samples, b: Samples, th: Thresholds, common: dict[str, Any]) -> Comparison:
    w = _welch(a.values, b.values)
    alpha = 1 - th.confidence
    if w.se == 0:
        half, p_value = 0.0, (1.0 if w.diff == 0 else 0.0)
    else:
        half = t_ppf(1 - alpha / 2, w.df) * w.se
        p_value = 2 * (1 - t_cdf(abs(w.diff) / w.se, w.df))
    low, high = math.exp(w.diff - half), math.exp(w.diff + half)
    verdict, reason = _verdict(w.diff, low, high, half, th, common["metric"])
    needs = None
    open_question = verdict in (Verdict.NO_CHANGE, Verdict.INCONCLUSIVE)
    # Rounds of one launch say nothing about launch noise: no launch count from them.
    if open_question and common["unit"] == "launch" and math.expm1(half) > th.min_effect:
        needs = launches_needed(w.pooled_sd, th.min_effect, alpha=alpha, power=th.power)
        reason += _settle_hint(needs, th.min_effect)
    if common["unit"] == "round":
        reason += (
            "; this interval comes from rounds inside one launch and ignores "
            "launch-to-launch noise: run >= 3 launches per cell"
        )
    return Comparison(
        verdict=verdict,
        reason=reason,
        n_cell=len(a.values),
        n_baseline=len(b.values),
        ratio=math.exp(w.diff),
        ratio_of_medians=_ratio(a, b),
        low=low,
        high=high,
        p_value=p_value,
        df=None if math.isinf(w.df) else w.df,
        resolvable=math.expm1(half),
        needs_launches=needs,
        **common,
    )


def _settle_hint(needs: int | None, min_effect: float) -> str:
    if needs is None:
        return f"; more than 200 launches per cell would be needed to resolve {min_effect:.0%}"
    return f"; needs >= {needs} launches per cell to resolve a {min_effect:.0%} change"


def _verdict(
    diff: float, low: float, high: float, half: float, th: Thresholds, metric: str
) -> tuple[Verdict, str]:
    span = f"[{low - 1:+.1%}, {high - 1:+.1%}]"
    if low <= 1.0 <= high:
        if math.expm1(half) > th.max_halfwidth:
            return (
                Verdict.INCONCLUSIVE,
                f"too noisy: the interval {span} spans more than ±{th.max_halfwidth:.0%}",
            )
        return Verdict.NO_CHANGE, f"the interval {span} contains no change"
    effect = math.expm1(diff)
    if abs(effect) < th.min_effect:
        return Verdict.NO_CHANGE, (
            f"a real but small change of {effect:+.1%} {span}, below min_effect {th.min_effect:.0%}"
        )
    better = (effect > 0) == higher_is_better(metric)
    verdict = Verdict.FASTER if better else Verdict.SLOWER
    return verdict, f"{effect:+.1%} {span} at {th.confidence:.0%} confidence"
