"""Whether a cell's measured launches ran interleaved with the baseline's.

Interleaving (A1 B1 A2 B2 ...) spreads drift over time (GPU clocks, temperature, other
tenants) over both cells. A cell run later into the same results (`run --cell X` after
the others, a resumed run that measures one cell only, pieces merged from jobs that ran
at different times) has all its launches after the baseline's: the drift between the
two periods is then part of its comparison, and the report says so. On the H200,
flashmla was run after flashinfer and triton had finished (reports/examples/h200-sglang/).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from stackmatrix.records import LaunchRecord
from stackmatrix.report.load import CellResults

__all__ = ["not_interleaved"]

_MIN_LAUNCHES = 2  # with one launch a side, any order is "before" or "after"


def not_interleaved(cells: Sequence[CellResults], baseline: str) -> list[str]:
    """A note for each cell whose measured launches all ran before the baseline's first
    or after its last."""
    base = next((c for c in cells if c.id == baseline), None)
    base_span = _span(base.bench.launches) if base is not None else None
    if base_span is None:
        return []
    out = []
    for cell in cells:
        span = _span(cell.bench.launches) if cell.id != baseline else None
        if span is None:
            continue
        if span[0] > base_span[1]:
            when = "after"
        elif span[1] < base_span[0]:
            when = "before"
        else:
            continue
        out.append(
            f"{cell.id}: its measured launches ran {when} the baseline's ({_when(span)} "
            f"against {_when(base_span)}), not interleaved with them: drift over time "
            "(GPU clocks, temperature, other tenants) between the two periods is part of "
            "its comparison; measuring both cells in one run interleaves them"
        )
    return out


def _span(launches: Sequence[LaunchRecord]) -> tuple[datetime, datetime] | None:
    """(first start, last end) of the measured launches that ran to the end."""
    spans = [span for launch in launches if launch.ok and (span := launch.span())]
    if len(spans) < _MIN_LAUNCHES:
        return None
    return min(s[0] for s in spans), max(s[1] for s in spans)


def _when(span: tuple[datetime, datetime]) -> str:
    start, end = span
    fmt = "%H:%M" if start.date() == end.date() else "%Y-%m-%d %H:%M"
    return f"{start:%Y-%m-%d %H:%M}-{end.strftime(fmt)} UTC"
