"""A cell's values against the baseline's under the run's design: each launch's cycle
and start time (which pairs them and which ran first), and the adaptive plan's looks;
the headline, every load point and goodput are judged so (stats/verdict.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from stackmatrix.report.load import CellResults
from stackmatrix.stats.verdict import Comparison, Thresholds, Verdict, compare


def judged(
    cell: CellResults,
    base: CellResults,
    values: tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]],
    *,
    metric: str,
    thresholds: Thresholds,
    where: str = "",
) -> Comparison | None:
    """`values`: the round values of each launch that ran to the end, the cell's then
    the baseline's (as `CellResults.launches` lists them); None where the cell has none.
    `where` says of what the baseline has none ("at load point 'c32'")."""
    mine, theirs = values
    if not any(mine):
        return None
    blocks = (cell.bench.completed_blocks(), base.bench.completed_blocks())
    plans = [b for b in (cell.bench.launch_bounds(), base.bench.launch_bounds()) if b]
    thresholds = replace(thresholds, plan=max(plans, key=lambda b: b[1] - b[0], default=None))
    if not any(theirs):
        return Comparison(
            metric=metric,
            verdict=Verdict.INCONCLUSIVE,
            reason=f"the baseline {base.id!r} has no {metric} measurements{where}",
            confidence=thresholds.confidence,
        )
    slots = (cell.bench.completed_slots(), base.bench.completed_slots())
    return compare(mine, theirs, metric=metric, thresholds=thresholds, blocks=blocks, slots=slots)
