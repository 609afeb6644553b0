"""What the measurement protocol did, for the report: the launch plan (fixed or adaptive,
and why it stopped), the GPU time it took and saved, and a check for drift over time
that the balanced order and the paired analysis are there to cancel."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stackmatrix.records._read import JSONObject, plain
from stackmatrix.report._tdist import t_ppf
from stackmatrix.report.load import CellResults


@dataclass(frozen=True, kw_only=True)
class Drift:
    """The change per cycle of every launch against its own cell's mean (log scale,
    relative): a trend in time that a fixed order would turn into a difference."""

    per_cycle: float
    low: float
    high: float
    launches: int

    def to_dict(self) -> JSONObject:
        return {"per_cycle": self.per_cycle, "low": self.low, "high": self.high,
                "launches": self.launches}  # fmt: skip

    def sentence(self) -> str:
        span = f"{self.per_cycle:+.2%} per cycle [{self.low:+.2%}, {self.high:+.2%}]"
        if self.low <= 0 <= self.high:
            return f"Drift over time: {span}, none shown (from {self.launches} launches)."
        return (
            f"Drift over time: {span} (from {self.launches} launches): launches ran "
            f"{'faster' if self.per_cycle > 0 else 'slower'} as the run went on; the balanced "
            "order and the pairing of launches by cycle keep it out of the verdicts."
        )


@dataclass(frozen=True, kw_only=True)
class Protocol:
    plan: JSONObject | None  # bench.json's launch_plan of the baseline (adaptive runs)
    launches: dict[str, int]  # measured launches per cell
    gpu_minutes: float  # every launch's wall time x the GPUs its cell holds (warm-ups too)
    saved_minutes: float | None  # against the fixed maximum, for adaptive plans
    drift: Drift | None
    decided: bool = True  # every candidate's verdict in this report is decided

    def to_dict(self) -> JSONObject:
        return {
            "plan": self.plan,
            "launches": plain(self.launches),
            "gpu_minutes": self.gpu_minutes,
            "saved_minutes": self.saved_minutes,
            "drift": self.drift.to_dict() if self.drift else None,
        }

    def sentences(self) -> list[str]:
        out = []
        counts = sorted(set(self.launches.values()))
        shown = "-".join(str(c) for c in (counts[0], counts[-1]) if counts) if counts else "0"
        if len(counts) == 1:
            shown = str(counts[0])
        low, high = _bound(self.plan, "min"), _bound(self.plan, "max")
        if self.plan and high > low:
            stopped = self.plan.get("stopped") or "not finished"
            if stopped == "decided" and not self.decided:
                # the verdicts this report gives are what decides, not the run's record
                # (a run resumed with complete candidates once recorded "decided")
                stopped = "max reached"
            out.append(
                f"Adaptive launches: {shown} per cell of {low} to "
                f"{high} ({stopped}); each look at the verdict used "
                f"alpha / {self.plan.get('looks', 1)}, so repeated looks keep the error rates."
            )
        if self.gpu_minutes > 0:
            saved = ""
            if self.saved_minutes:
                saved = f", about {self.saved_minutes:.1f} saved against the fixed maximum"
            out.append(f"GPU time: {self.gpu_minutes:.1f} GPU-minutes of launches{saved}.")
        if self.drift is not None:
            out.append(self.drift.sentence())
        return out


def _bound(plan: Mapping[str, object] | None, key: str) -> int:
    """The launch plan's `min` or `max` (0 where it has none)."""
    value = plan.get(key, 0) if plan else 0
    return value if isinstance(value, int) else 0


def protocol(
    cells: Sequence[CellResults], baseline: str, headline: str, *, decided: bool = True
) -> Protocol | None:
    measured = {c.id: len(c.bench.completed_values(headline)) for c in cells}
    if not any(measured.values()):
        return None
    base = next((c for c in cells if c.id == baseline), None)
    plan = base.bench.extra.get("launch_plan") if base is not None else None
    plan = plan if isinstance(plan, dict) else None
    minutes = sum(_minutes(c) for c in cells)
    return Protocol(plan=plan, launches=measured, gpu_minutes=minutes,
                    saved_minutes=_saved(cells, plan), drift=drift(cells, headline),
                    decided=decided)  # fmt: skip


def _gpus(cell: CellResults) -> int:
    gpus = cell.definition.get("gpus")
    return gpus if isinstance(gpus, int) and gpus > 0 else 1


def _durations(cell: CellResults) -> list[float]:
    spans = [ln.span() for ln in (*cell.bench.warmup_launches, *cell.bench.launches)]
    return [
        (end - start).total_seconds() / 60 for s in spans if s is not None for start, end in [s]
    ]


def _minutes(cell: CellResults) -> float:
    return sum(_durations(cell)) * _gpus(cell)


def _saved(cells: Sequence[CellResults], plan: Mapping[str, object] | None) -> float | None:
    """The launches an adaptive plan did not run (up to its maximum, per cell), at each
    cell's median launch time."""
    high = plan.get("max") if plan else None
    if not isinstance(high, int):
        return None
    saved = 0.0
    for cell in cells:
        durations = _durations(cell)
        if durations:
            left = max(0, high - len(cell.bench.launches))
            saved += left * statistics.median(durations) * _gpus(cell)
    return saved


def drift(cells: Sequence[CellResults], metric: str, confidence: float = 0.95) -> Drift | None:
    """The slope of every launch's log value, less its cell's mean, over its cycle."""
    points: list[tuple[float, float]] = []
    for cell in cells:
        values = cell.bench.completed_values(metric)
        blocks = cell.bench.completed_blocks()
        logs = [(b, math.log(statistics.median(v))) for b, v in zip(blocks, values, strict=False)
                if v and min(v) > 0]  # fmt: skip
        if len(logs) < 2:
            continue
        mean = statistics.fmean(x for _, x in logs)
        points += [(float(b), x - mean) for b, x in logs]
    n = len(points)
    xs = [x for x, _ in points]
    if n < 4 or len(set(xs)) < 3:
        return None
    mx = statistics.fmean(xs)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * y for x, y in points) / sxx
    rss = sum((y - slope * (x - mx)) ** 2 for x, y in points)
    se = math.sqrt(rss / (n - 2) / sxx)
    half = t_ppf(0.5 + confidence / 2, n - 2) * se
    return Drift(per_cycle=math.expm1(slope), low=math.expm1(slope - half),
                 high=math.expm1(slope + half), launches=n)  # fmt: skip
