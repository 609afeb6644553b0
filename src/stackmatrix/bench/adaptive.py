"""Adaptive launches (`launches = {min = 3, max = 12}`): after the first `min` cycles,
one more cycle at a time for the cells still undecided (and the baseline, whose
launch in the same cycle each of them is paired with), until every cell is decided
or `max` is reached.

The decision is the report's own (stats/verdict.py `compare`), each look held to the
level a group-sequential error-spending design gives it (stats/sequential.py): the
error rates hold however often the verdict is looked at (docs/report.md). Each
look and its outcome is recorded in the cells' bench.json under "launch_plan"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stackmatrix.bench._cell import CellState
from stackmatrix.records import BenchData
from stackmatrix.spec_model import Bench, Spec
from stackmatrix.stats.verdict import Comparison, Thresholds, compare


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The launches per cell: fixed (`low == high`) or adaptive."""

    low: int
    high: int

    @classmethod
    def of(cls, bench: Bench) -> Plan:
        low = bench.min_launches if bench.min_launches is not None else bench.launches
        return cls(low=min(low, bench.launches), high=bench.launches)

    @property
    def adaptive(self) -> bool:
        return self.low < self.high

    @property
    def looks(self) -> int:
        return self.high - self.low + 1

    def to_dict(self) -> dict[str, int]:
        return {"min": self.low, "max": self.high, "looks": self.looks}


def thresholds(spec: Spec, plan: Plan) -> Thresholds:
    return Thresholds(
        confidence=spec.report.confidence,
        min_effect=spec.report.min_effect,
        plan=(plan.low, plan.high) if plan.adaptive else None,
    )


def look(
    spec: Spec, plan: Plan, states: Mapping[str, CellState], active: Sequence[str]
) -> dict[str, Comparison]:
    """Every active candidate cell against the baseline, as the report would say it now."""
    base = states.get(spec.baseline)
    if base is None:
        return {}
    th = thresholds(spec, plan)
    metric = spec.report.headline
    out = {}
    for cid in active:
        st = states[cid]
        if cid == spec.baseline or st.failed:
            continue
        out[cid] = compare(
            _values(st, metric),
            _values(base, metric),
            metric=metric,
            thresholds=th,
            blocks=(_blocks(st), _blocks(base)),
            slots=(_slots(st), _slots(base)),
        )
    return out


def _values(st: CellState, metric: str) -> list[list[float]]:
    return [ln.values(metric) for ln in st.launches if ln.ok]


def _slots(st: CellState) -> list[int | None]:
    return BenchData(launches=tuple(st.launches)).completed_slots()


def _blocks(st: CellState) -> list[int]:
    return BenchData(launches=tuple(st.launches)).completed_blocks()


def next_cells(
    spec: Spec, plan: Plan, states: Mapping[str, CellState], verdicts: Mapping[str, Comparison]
) -> list[str]:
    """The cells the next cycle runs: the undecided ones below `max`, with the baseline;
    none when every cell is decided, the baseline failed, or `max` is reached."""
    base = states.get(spec.baseline)
    if base is None or base.failed or len(base.launches) >= plan.high:
        return []
    undecided = [
        cid
        for cid, c in verdicts.items()
        if not c.verdict.decided and len(states[cid].launches) < plan.high
    ]
    return [spec.baseline, *undecided] if undecided else []
