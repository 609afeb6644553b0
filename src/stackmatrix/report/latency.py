"""TTFT, ITL and TPOT percentiles of every cell at each load, with their sample counts.

Each round's percentile is of its own samples (bench/metrics.py: a request's TTFT and
TPOT, every inter-token gap); a cell's figure is the median over its completed
launches of each launch's median over rounds, as for every other figure. A p99.9 of
fewer than SMALL_P999 samples per round lies within the few largest of them, and the
report labels it so. Results of versions without p99.9 have no such table.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from stackmatrix.jsontypes import JSONObject
from stackmatrix.report.load import CellResults

KINDS = (("ttft", "TTFT"), ("itl", "ITL"), ("tpot", "TPOT"))
# (label, the round's metric stat): p50 is the round's median
LEVELS = (("p50", "median"), ("p90", "p90"), ("p99", "p99"), ("p99.9", "p999"))
SMALL_P999 = 1000  # samples per round below which a p99.9 is labelled


@dataclass(frozen=True, kw_only=True)
class Percentiles:
    """One kind of latency of one cell at one load (milliseconds)."""

    kind: str  # "ttft", "itl", "tpot"
    values: tuple[float | None, ...]  # in LEVELS' order
    samples: int | None  # per round (the median over rounds and launches)

    @property
    def few_for_p999(self) -> bool:
        return self.samples is not None and self.samples < SMALL_P999

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            f"{label}_ms": v for (label, _), v in zip(LEVELS, self.values, strict=True)
        }
        out["samples_per_round"] = self.samples
        out["p99.9_few_samples"] = self.few_for_p999
        return out


@dataclass(frozen=True, kw_only=True)
class LatencyRow:
    cell: str
    percentiles: tuple[Percentiles, ...]  # in KINDS' order

    def to_dict(self) -> JSONObject:
        return {"cell": self.cell, **{p.kind: p.to_dict() for p in self.percentiles}}


def latency_rows(cells: Sequence[CellResults], point: str | None = None) -> tuple[LatencyRow, ...]:
    """A row per cell measured at the headline's load (or at load point `point`); none
    where no cell's rounds have a p99.9."""
    return tuple(row for c in cells if (row := latency_row(c, point)) is not None)


def latency_row(cell: CellResults, point: str | None = None) -> LatencyRow | None:
    """The cell's row at the headline's load (or at load point `point`); None where its
    rounds have no p99.9."""
    if not any(cell.launches("ttft_p999_ms", point)):
        return None
    return LatencyRow(
        cell=cell.id, percentiles=tuple(_percentiles(cell, k, point) for k, _ in KINDS)
    )


def _percentiles(cell: CellResults, kind: str, point: str | None) -> Percentiles:
    values = tuple(_figure(cell, f"{kind}_{stat}_ms", point) for _, stat in LEVELS)
    samples = _figure(cell, f"{kind}_samples", point)
    return Percentiles(
        kind=kind, values=values, samples=None if samples is None else round(samples)
    )


def _figure(cell: CellResults, metric: str, point: str | None) -> float | None:
    """The median over completed launches of each one's median over rounds."""
    launches = [statistics.median(v) for v in cell.launches(metric, point) if v]
    return statistics.median(launches) if launches else None
