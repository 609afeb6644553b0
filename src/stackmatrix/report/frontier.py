"""Each cell's frontier: its loads (the headline workload and every load point, by
request rate, then by concurrency: `order_key`), at each the output throughput (per GPU
where the cell's GPUs are known) and the per-user speed, with their intervals over
launches, and, with an SLO, goodput and attainment (report/slo.py). Two verdicts
against the baseline: goodput at the headline load, paired by cycle as the headline is
(report/compare.py), and the largest load that meets the SLO in every launch.
"""

from __future__ import annotations

import math
import statistics
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from stackmatrix.jsontypes import JSONObject
from stackmatrix.metric_registry import OUTPUT_THROUGHPUT
from stackmatrix.records import PointInfo
from stackmatrix.records.decode import integer
from stackmatrix.report.compare import judged
from stackmatrix.report.latency import LatencyRow, latency_row
from stackmatrix.report.load import CellResults, RunResults
from stackmatrix.report.protocol import cell_gpus
from stackmatrix.report.slo import LaunchSlo, cell_slo
from stackmatrix.spec_model import SloBound, Workload
from stackmatrix.stats.verdict import (
    Comparison,
    Interval,
    Thresholds,
    Verdict,
    interval,
    launch_samples,
)

THROUGHPUT = OUTPUT_THROUGHPUT.name
PER_USER = "decode_tok_s"  # a round's median over requests of 1 / TPOT (bench/metrics.py)
GOODPUT = "goodput"
HEADLINE = "headline"
# launches per cell the largest load within the SLO is judged on, the headline verdict's
# own minimum (stats/verdict.py): one launch's rounds say nothing of launch-to-launch spread
MIN_LAUNCHES = 2


@dataclass(frozen=True, kw_only=True)
class Load:
    """The headline workload (`point` None) or a load point."""

    point: str | None
    max_concurrency: int | None
    num_prompts: int | None
    # requests per second; None: none, sent as fast as max_concurrency allows (or unknown)
    request_rate: float | None = None

    @property
    def name(self) -> str:
        return HEADLINE if self.point is None else self.point

    def label(self) -> str:
        """`c4 (concurrency 4)`, `r2 (rate 2/s, concurrency 4)`, `the headline load
        (concurrency 1)`."""
        name = "the headline load" if self.point is None else self.point
        said = self.described("concurrency ")
        return f"{name} ({said})" if said else name

    def described(self, concurrency: str) -> str:
        """`rate 2/s, concurrency 4` (`concurrency`: how concurrency is said)."""
        parts = [] if self.request_rate is None else [f"rate {self.request_rate:g}/s"]
        if self.max_concurrency is not None:
            parts.append(f"{concurrency}{self.max_concurrency}")
        return ", ".join(parts)

    def to_dict(self) -> JSONObject:
        return {
            "load": self.name,
            "point": self.point,
            "max_concurrency": self.max_concurrency,
            "request_rate": self.request_rate,
            "num_prompts": self.num_prompts,
        }


def order_key(load: Load) -> tuple[int, float, int]:
    """Loads with a request rate first, by rate (then concurrency); then those without
    one, which send as fast as their concurrency allows, by concurrency."""
    concurrency = load.max_concurrency or 0
    if load.request_rate is not None:
        return (0, load.request_rate, concurrency)
    return (1, float(concurrency), 0)


@dataclass(frozen=True, kw_only=True)
class FrontierPoint:
    """One cell at one load."""

    load: Load
    launches: int  # that ran to the end with a throughput at this load
    throughput: Interval | None  # output tok/s of the whole server
    per_user: Interval | None  # decode tok/s of one request
    goodput: Interval | None = None  # requests within the SLO per second
    attainment: float | None = None  # their share of the requests (median over launches)
    figures: dict[str, float | None] = field(default_factory=dict)  # bound key -> percentile
    slo_met: bool | None = None  # the figures (medians over launches) within every bound
    met_launches: int = 0  # launches whose own figures are within every bound
    latency: LatencyRow | None = None

    @property
    def holds(self) -> bool:
        """The SLO held in every launch at this load."""
        return self.launches > 0 and self.met_launches == self.launches

    def to_dict(self, gpus: int) -> JSONObject:
        return {
            **self.load.to_dict(),
            "launches": self.launches,
            "throughput": _dict(self.throughput),
            "throughput_per_gpu": _dict(per_gpu(self.throughput, gpus)),
            "gpus": gpus or None,
            "per_user_tok_s": _dict(self.per_user),
            "goodput": _dict(self.goodput),
            "attainment": self.attainment,
            "slo_figures": dict(self.figures),
            "slo_met": self.slo_met,
            "slo_met_launches": self.met_launches,
            "latency": self.latency.to_dict() if self.latency else None,
        }


@dataclass(frozen=True, kw_only=True)
class CellFrontier:
    """A cell's loads, and with an SLO its verdicts against the baseline."""

    cell: str
    gpus: int  # 0: unknown, throughput stays the server's total
    points: tuple[FrontierPoint, ...]  # in the order of Load
    slo: bool = False  # judged against an SLO
    # each completed launch's rounds' goodput at the headline load (what `judge` compares)
    goodputs: tuple[tuple[float, ...], ...] = ()
    goodput: Comparison | None = None  # at the headline load, against the baseline
    largest: Load | None = None  # the largest load that meets the SLO in every launch
    # largest against the baseline's: higher, lower, same, neither, or open (too few
    # launches on a side to judge, as the headline's verdict: MIN_LAUNCHES)
    versus: str | None = None
    sentence: str = ""  # the headline's verdict and the SLO's, in one sentence

    def at(self, load: Load) -> FrontierPoint | None:
        return next((p for p in self.points if p.load == load), None)

    def goodput_dict(self) -> JSONObject:
        head = next((p for p in self.points if p.load.point is None), None)
        return {
            "load": HEADLINE,
            "value": _dict(head.goodput if head else None),
            "comparison": self.goodput.to_dict() if self.goodput else None,
            "largest_load": self.largest.to_dict() if self.largest else None,
            "largest_load_vs_baseline": self.versus,
            "sentence": self.sentence,
        }


def loads(results: RunResults, points: Mapping[str, PointInfo]) -> tuple[Load, ...]:
    """The headline's load and every load point's, in `order_key`'s order (ties in the
    spec's order, the headline first)."""
    bench = _spec_bench(results.spec_text)
    workload = bench.get("workload", {}) if bench is not None else None
    workload = workload if isinstance(workload, dict) else None
    head = _headline(workload)
    rates = _point_rates(bench, workload)
    rest = [
        Load(
            point=name,
            max_concurrency=info.max_concurrency,
            num_prompts=info.num_prompts,
            request_rate=info.request_rate if info.request_rate is not None else rates.get(name),
        )
        for name, info in points.items()
    ]
    return tuple(sorted([head, *rest], key=order_key))


def _spec_bench(spec_text: str | None) -> dict[str, object] | None:
    """The [bench] table of the spec as run (RUN/spec.toml: results of any version have
    it; bench.json records a point's request rate only from this version on, the
    headline's never); None where it cannot be read."""
    try:
        raw = tomllib.loads(spec_text) if spec_text is not None else None
    except tomllib.TOMLDecodeError:
        return None
    bench = raw.get("bench") if isinstance(raw, dict) else None
    return bench if isinstance(bench, dict) else None


def _headline(workload: Mapping[str, object] | None) -> Load:
    """The headline's load: max_concurrency, num_prompts and request_rate of
    [bench.workload]; None where it cannot be read."""
    if workload is None:
        return Load(point=None, max_concurrency=None, num_prompts=None)
    defaults = Workload()
    return Load(
        point=None,
        max_concurrency=integer(workload.get("max_concurrency", defaults.max_concurrency)),
        num_prompts=integer(workload.get("num_prompts", defaults.num_prompts)),
        request_rate=_rate(workload.get("request_rate")),
    )


def _point_rates(
    bench: Mapping[str, object] | None, workload: Mapping[str, object] | None
) -> dict[str, float | None]:
    """Each [[bench.points]] entry's request rate, its own or the headline's."""
    points = bench.get("points") if bench is not None else None
    if not isinstance(points, list):
        return {}
    head = (workload or {}).get("request_rate")
    return {
        point["name"]: _rate(point.get("request_rate", head))
        for point in points
        if isinstance(point, dict) and isinstance(point.get("name"), str)
    }


def _rate(value: object) -> float | None:
    """A request rate as the spec gives it (a number, or a string such as "inf"); None
    for none (inf) or one that cannot be read."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        rate = float(value)
    except ValueError:
        return None
    return rate if math.isfinite(rate) and rate > 0 else None


def frontier(
    cell: CellResults, where: Sequence[Load], bounds: Sequence[SloBound], confidence: float
) -> CellFrontier:
    """The cell at every load, without verdicts (see `judge`)."""
    slos = {load: cell_slo(cell, load.point, bounds) if bounds else [] for load in where}
    points = tuple(_point(cell, load, slos[load], bounds, confidence) for load in where)
    largest = [p.load for p in points if bounds and p.holds]
    head = next((slos[load] for load in where if load.point is None), [])
    return CellFrontier(
        cell=cell.id,
        gpus=cell_gpus(cell),
        points=points,
        slo=bool(bounds),
        goodputs=tuple(tuple(s.goodputs) for s in head),
        largest=largest[-1] if largest else None,
    )


def _point(
    cell: CellResults,
    load: Load,
    slos: Sequence[LaunchSlo],
    bounds: Sequence[SloBound],
    confidence: float,
) -> FrontierPoint:
    throughput = cell.launches(THROUGHPUT, load.point)
    plain = FrontierPoint(
        load=load,
        launches=sum(1 for r in throughput if r),
        throughput=band(throughput, confidence),
        per_user=band(cell.launches(PER_USER, load.point), confidence),
        latency=latency_row(cell, load.point),
    )
    if not bounds or not plain.launches:
        return plain
    figures = {b.key: _median([s.figures.get(b.key) for s in slos]) for b in bounds}
    return FrontierPoint(
        load=load,
        launches=plain.launches,
        throughput=plain.throughput,
        per_user=plain.per_user,
        goodput=band([s.goodputs for s in slos], confidence),
        attainment=_median([s.attainment for s in slos]),
        figures=figures,
        slo_met=_within(figures, bounds),
        met_launches=sum(1 for s in slos if s.meets(bounds)),
        latency=plain.latency,
    )


def _within(figures: Mapping[str, float | None], bounds: Sequence[SloBound]) -> bool | None:
    values = [figures.get(b.key) for b in bounds]
    if any(v is None for v in values):
        return None
    return all(v is not None and v <= b.ms for v, b in zip(values, bounds, strict=True))


def band(launches: Sequence[Sequence[float]], confidence: float) -> Interval | None:
    """The value over launches with its t interval, as the headline's (stats/verdict.py);
    where a launch has a zero (no request met the SLO), the median of launches alone:
    a geometric mean of a zero says nothing."""
    measured = [list(r) for r in launches if r]
    if not measured:
        return None
    if all(v > 0 for r in measured for v in r):
        return interval(launch_samples(measured), confidence=confidence)
    value = statistics.median(statistics.median(r) for r in measured)
    return Interval(center=value, median=value, low=None, high=None, n=len(measured), unit="launch")


def per_gpu(value: Interval | None, gpus: int) -> Interval | None:
    """An interval of a server's throughput per GPU of its cell (None: GPUs unknown)."""
    if value is None or gpus <= 0:
        return None
    low, high = value.low, value.high
    return Interval(
        center=value.center / gpus,
        median=value.median / gpus,
        low=None if low is None else low / gpus,
        high=None if high is None else high / gpus,
        n=value.n,
        unit=value.unit,
    )


def judge(
    mine: CellFrontier,
    base: CellFrontier,
    cells: tuple[CellResults, CellResults],
    where: Sequence[Load],
    thresholds: Thresholds,
) -> CellFrontier:
    """`mine` with its verdicts against the baseline's frontier `base` (`cells`: this
    cell's results and the baseline's, for the design of the comparison)."""
    return replace(
        mine,
        goodput=goodput_verdict(mine, base, cells, thresholds),
        versus=versus(mine.largest, base.largest, where, launches=(fewest(mine), fewest(base))),
    )


def fewest(f: CellFrontier) -> int:
    """The fewest launches that ran to the end at any of the cell's loads."""
    return min((p.launches for p in f.points), default=0)


def versus(
    mine: Load | None,
    theirs: Load | None,
    where: Sequence[Load],
    *,
    launches: tuple[int, int] = (MIN_LAUNCHES, MIN_LAUNCHES),
) -> str:
    """The cell's largest load within the SLO against the baseline's, by their order;
    `open` where either side has fewer than MIN_LAUNCHES launches (`launches`: the
    cell's, the baseline's)."""
    if min(launches) < MIN_LAUNCHES:
        return "open"
    if mine is None and theirs is None:
        return "neither"
    rank = {load: i for i, load in enumerate(where)}
    a = -1 if mine is None else rank.get(mine, -1)
    b = -1 if theirs is None else rank.get(theirs, -1)
    return "higher" if a > b else "lower" if a < b else "same"


def goodput_verdict(
    mine: CellFrontier,
    base: CellFrontier,
    cells: tuple[CellResults, CellResults],
    thresholds: Thresholds,
) -> Comparison | None:
    """Goodput at the headline load against the baseline's: the headline's statistics
    on each launch's rounds; where a launch's goodput is 0, the rule of `_zero`."""
    zero = _zero(mine.goodputs, base.goodputs, base.cell, thresholds)
    if zero is not None:
        return zero
    values = (_launch_values(mine.goodputs), _launch_values(base.goodputs))
    return judged(
        *cells, values, metric=GOODPUT, thresholds=thresholds, where=" at the headline load"
    )


def _launch_values(launches: Sequence[Sequence[float]]) -> list[list[float]]:
    """A launch's rounds, or its median alone where a round's goodput is 0: the
    statistics leave out non-positive rounds, which would raise that launch's value."""
    return [list(r) if all(v > 0 for v in r) else [statistics.median(r)] for r in launches if r]


def _zero(
    mine: Sequence[Sequence[float]],
    theirs: Sequence[Sequence[float]],
    baseline: str,
    thresholds: Thresholds,
) -> Comparison | None:
    """No ratio where a launch's goodput is 0: with two launches or more on each side, a
    cell with none in any launch against a baseline with some in every one is slower
    (and the other way round, faster); any other zero leaves it open. None: no zero."""
    a = [statistics.median(r) for r in mine if r]
    b = [statistics.median(r) for r in theirs if r]
    zeros = (sum(v <= 0 for v in a), sum(v <= 0 for v in b))
    if not a or not b or zeros == (0, 0):
        return None
    if min(len(a), len(b)) >= 2 and zeros in ((len(a), 0), (0, len(b))):
        slower = zeros[0] == len(a)
        base = f"the baseline {baseline!r}"
        reason = (
            f"no request met the SLO in any of {len(a) if slower else len(b)} launches of "
            f"{'this cell' if slower else base}, and some did in every launch of "
            f"{base if slower else 'this cell'}"
        )
        return Comparison(
            metric=GOODPUT,
            verdict=Verdict.SLOWER if slower else Verdict.FASTER,
            reason=reason,
            confidence=thresholds.confidence,
            unit="launch",
            n_cell=len(a),
            n_baseline=len(b),
        )
    reason = (
        f"goodput is 0 in {zeros[0]} of {len(a)} launches of this cell and {zeros[1]} of "
        f"{len(b)} of the baseline {baseline!r}: no ratio to judge"
    )
    return Comparison(
        metric=GOODPUT,
        verdict=Verdict.INCONCLUSIVE,
        reason=reason,
        confidence=thresholds.confidence,
        n_cell=len(a),
        n_baseline=len(b),
    )


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _dict(value: Interval | None) -> JSONObject | None:
    return value.to_dict() if value is not None else None
