"""The Explanation section of matrix.html: what `stackmatrix explain` measured, per
explained cell, in its own sentences and as a plot of the candidate and every revert
cell against the baseline."""

from __future__ import annotations

from typing import Any

from stackmatrix.report import _fmt, _svg
from stackmatrix.report._html import TONE, esc
from stackmatrix.report.matrix import MatrixReport


def explanations(report: MatrixReport) -> str:
    blocks = []
    for ex in report.explanations:
        items = [*(ex.get("sentences") or []), *(ex.get("notes") or [])]
        items += [
            f"cannot be isolated: {_fmt.cannot_isolate_text(c)}"
            for c in ex.get("cannot_isolate") or []
        ]
        lis = "".join(f"<li>{esc(x)}</li>" for x in items)
        blocks.append(f"<h3>{esc(ex.get('cell'))}: {esc(ex.get('status'))}</h3><ul>{lis}</ul>"
                      + _explanation_plot(ex))  # fmt: skip
    return "<h2>Explanation</h2>" + "".join(blocks) if blocks else ""


def _explanation_plot(ex: dict[str, Any]) -> str:
    """The candidate and every revert cell against the baseline (ratios with their
    intervals), round by round: what each revert brought back, at a glance."""
    rows = [_ratio_row(f"{ex.get('cell')} (the candidate)", ex.get("gap"))]
    for i, effects in enumerate(ex.get("rounds") or [], 1):
        for effect in (effects or {}).get("effects") or []:
            if isinstance(effect, dict):
                keys = ", ".join(str(g.get("key")) for g in effect.get("group") or []
                                 if isinstance(g, dict))  # fmt: skip
                rows.append(_ratio_row(f"round {i}: without {keys}", effect.get("vs_baseline")))
    shown = [r for r in rows if r is not None]
    if not shown:
        return ""
    unit = f"ratio to {ex.get('baseline')}"
    title = "the candidate and its reverts against the baseline"
    return _svg.interval_plot(shown, reference=1.0, unit=unit, title=title)


def _ratio_row(label: str, comparison: Any) -> _svg.IntervalRow | None:
    if not isinstance(comparison, dict) or not isinstance(comparison.get("ratio"), int | float):
        return None
    verdict = comparison.get("verdict")
    tone = next((t for v, t in TONE.items() if v.value == verdict), "open")
    low, high = comparison.get("ci_low"), comparison.get("ci_high")
    return _svg.IntervalRow(
        label=label, points=(), center=float(comparison["ratio"]),
        low=float(low) if isinstance(low, int | float) else None,
        high=float(high) if isinstance(high, int | float) else None, tone=tone,
    )  # fmt: skip
