"""What the measurement protocol did, for the report: the launch plan (fixed or adaptive,
and why it stopped), the time its launches took and the launches its design chose not
to run, and each cell's drift over time, which the pairing by cycle cancels only where
the cells share it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from stackmatrix.jsontypes import JSONObject
from stackmatrix.records.decode import plain
from stackmatrix.report.load import CellResults
from stackmatrix.results import Status
from stackmatrix.stats.tdist import t_ppf
from stackmatrix.stats.verdict import Thresholds


@dataclass(frozen=True, kw_only=True)
class Drift:
    """The change per cycle of launches against their cell's mean (log scale, relative):
    of every cell together, or of one cell (`cell`)."""

    per_cycle: float
    low: float
    high: float
    launches: int
    cell: str | None = None

    @property
    def shown(self) -> bool:
        return not self.low <= 0 <= self.high

    def span(self) -> str:
        return f"{self.per_cycle:+.2%} per cycle [{self.low:+.2%}, {self.high:+.2%}]"

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "per_cycle": self.per_cycle,
            "low": self.low,
            "high": self.high,
            "launches": self.launches,
        }
        if self.cell is not None:
            out["cell"] = self.cell
        return out


@dataclass(frozen=True, kw_only=True)
class Protocol:
    plan: JSONObject | None  # bench.json's launch_plan of the baseline (adaptive runs)
    launches: dict[str, int]  # measured launches per cell
    minutes: float  # every launch's wall time x the GPUs its cell holds (warm-ups too)
    gpus: bool  # some cell holds a GPU: the minutes are GPU-minutes
    saved_minutes: float | None  # launches the design chose not to run (None: no stop)
    drift: Drift | None  # every cell's launches together
    cell_drifts: tuple[Drift, ...] = ()  # each cell's own, where it has enough launches
    decided: bool = True  # every candidate's verdict in this report is decided
    levels: tuple[float, float] | None = None  # two-sided level of the first and last look
    spending: str = "pocock"

    @property
    def adaptive(self) -> bool:
        return _bound(self.plan, "max") > _bound(self.plan, "min")

    @property
    def stopped(self) -> str | None:
        """Why the launches ended: "decided" (every candidate's verdict is), "max reached",
        or "not finished" (interrupted before the design stopped); None for a fixed plan.
        The verdicts this report gives decide, not the run's record: a run resumed with
        complete candidates once recorded "decided"."""
        if not self.adaptive or self.plan is None:
            return None
        recorded = self.plan.get("stopped")
        if recorded not in ("decided", "max reached"):
            return "not finished"
        return "decided" if recorded == "decided" and self.decided else "max reached"

    def to_dict(self) -> JSONObject:
        plan = None if self.plan is None else {**self.plan}
        if plan is not None and self.stopped is not None:
            if plan.get("stopped") not in (None, self.stopped):
                plan["recorded_stopped"] = plan["stopped"]
            plan["stopped"] = self.stopped
        return {
            "plan": plan,
            "stopped": self.stopped,
            "launches": plain(self.launches),
            "gpu_minutes": self.minutes if self.gpus else 0.0,
            "launch_minutes": self.minutes,
            "saved_minutes": self.saved_minutes,
            "drift": self.drift.to_dict() if self.drift else None,
            "cell_drift": [d.to_dict() for d in self.cell_drifts],
        }

    def sentences(self) -> list[str]:
        out = []
        counts = sorted(set(self.launches.values()))
        shown = f"{counts[0]}-{counts[-1]}" if len(counts) > 1 else str(counts[0] if counts else 0)
        if self.adaptive:
            out.append(
                f"Adaptive launches: {shown} per cell of {_bound(self.plan, 'min')} to "
                f"{_bound(self.plan, 'max')} ({self.stopped}); {self._looks_text()}"
            )
        if self.minutes > 0:
            unit = "GPU-minutes" if self.gpus else "minutes (no GPU)"
            saved = ""
            if self.saved_minutes:
                saved = (
                    f", about {self.saved_minutes:.1f} saved by the launches the "
                    "design chose not to run"
                )
            out.append(f"Launch time: {self.minutes:.1f} {unit}{saved}.")
        out += self._drift_sentences()
        return out

    def _looks_text(self) -> str:
        if self.spending == "bonferroni" or self.levels is None:
            looks = self.plan.get("looks", 1) if self.plan else 1
            return (
                f"each look at the verdict used alpha / {looks}, "
                "so repeated looks keep the error rates."
            )
        first, last = self.levels
        return (
            "the looks spend the error rate by a Pocock-type error-spending design (a "
            f"two-sided level of {first:.1%} at the first look, {last:.1%} at the last), so "
            "stopping at the first look that decides keeps the error rates."
        )

    def _drift_sentences(self) -> list[str]:
        own = [d for d in self.cell_drifts if d.shown]
        if self.drift is None and not own:
            return []
        pooled = ""
        if self.drift is not None:
            pooled = f"Drift over time: {self.drift.span()} (from {self.drift.launches} launches)"
        if not own:
            if self.drift is not None and self.drift.shown:
                return [
                    f"{pooled}; no cell's own drift is shown, so the cells share it and the "
                    "pairing of launches by cycle cancels it."
                ]
            return [f"{pooled}, none shown."] if pooled else []
        cells = "; ".join(f"`{d.cell}` {d.span()}" for d in own)
        head = f"{pooled}. " if pooled else "Drift over time: "
        return [
            f"{head}Cells that drifted on their own: {cells}. The pairing of launches by "
            "cycle cancels only the drift the cells share; a verdict whose ratio trends "
            "over the cycles says so."
        ]


def _bound(plan: Mapping[str, object] | None, key: str) -> int:
    """The launch plan's `min` or `max` (0 where it has none)."""
    value = plan.get(key, 0) if plan else 0
    return value if isinstance(value, int) else 0


def protocol(
    cells: Sequence[CellResults],
    baseline: str,
    headline: str,
    *,
    decided: bool = True,
    thresholds: Thresholds | None = None,
) -> Protocol | None:
    measured = {c.id: len(c.bench.completed_values(headline)) for c in cells}
    if not any(measured.values()):
        return None
    base = next((c for c in cells if c.id == baseline), None)
    plan = base.bench.extra.get("launch_plan") if base is not None else None
    plan = plan if isinstance(plan, dict) else None
    th = thresholds or Thresholds()
    if th.plan is None and base is not None and base.bench.launch_bounds():
        th = replace(th, plan=base.bench.launch_bounds())  # as the verdicts take it
    levels = None
    if th.adaptive and th.plan is not None:
        levels = (th.level(th.plan[0]), th.level(th.plan[1]))
    out = Protocol(
        plan=plan,
        launches=measured,
        minutes=sum(_minutes(c) for c in cells),
        gpus=any(cell_gpus(c) > 0 for c in cells),
        saved_minutes=None,
        drift=drift(cells, headline),
        cell_drifts=tuple(d for c in cells if (d := drift([c], headline, cell=c.id))),
        decided=decided,
        levels=levels,
        spending=th.spending,
    )
    if out.stopped in ("decided", "max reached"):
        out = _with_saved(out, cells, _bound(plan, "max"))
    return out


def _with_saved(out: Protocol, cells: Sequence[CellResults], high: int) -> Protocol:
    """The launches the design chose not to run (up to its maximum, per cell whose bench
    ended well), at each cell's median launch time."""
    saved = 0.0
    for cell in cells:
        result = cell.phase("bench")
        durations = _durations(cell)
        if result is None or result.status is not Status.OK or not durations:
            continue
        left = max(0, high - len(cell.bench.launches))
        saved += left * statistics.median(durations) * max(cell_gpus(cell), 1)
    return replace(out, saved_minutes=saved)


def cell_gpus(cell: CellResults) -> int:
    """The GPUs the cell's definition holds; 0 for none or unknown."""
    gpus = cell.definition.get("gpus")
    return gpus if isinstance(gpus, int) and gpus > 0 else 0


def _durations(cell: CellResults) -> list[float]:
    spans = [ln.span() for ln in (*cell.bench.warmup_launches, *cell.bench.launches)]
    return [
        (end - start).total_seconds() / 60 for s in spans if s is not None for start, end in [s]
    ]


def _minutes(cell: CellResults) -> float:
    return sum(_durations(cell)) * max(cell_gpus(cell), 1)


def drift(
    cells: Sequence[CellResults], metric: str, confidence: float = 0.95, *, cell: str | None = None
) -> Drift | None:
    """The slope of every launch's log value, less its cell's mean, over its cycle."""
    points: list[tuple[float, float]] = []
    for c in cells:
        values = c.bench.completed_values(metric)
        blocks = c.bench.completed_blocks()
        logs = [
            (b, math.log(statistics.median(v)))
            for b, v in zip(blocks, values, strict=False)
            if v and min(v) > 0
        ]
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
    return Drift(
        per_cycle=math.expm1(slope),
        low=math.expm1(slope - half),
        high=math.expm1(slope + half),
        launches=n,
        cell=cell,
    )
