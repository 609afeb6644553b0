"""The Explanation section of matrix.html: what `stackmatrix explain` measured, per
explained cell, in its own sentences and as a plot of the candidate and every revert
cell against the baseline."""

from __future__ import annotations

from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.report import _svg
from stackmatrix.report import fmt as _fmt
from stackmatrix.report._html import TONE, esc
from stackmatrix.report.matrix import MatrixReport


def explanations(report: MatrixReport) -> str:
    blocks = []
    for ex in report.explanations:
        items = [*_fmt.items(ex.get("sentences")), *_fmt.items(ex.get("notes"))]
        items += [
            f"cannot be isolated: {_fmt.cannot_isolate_text(c)}"
            for c in _fmt.items(ex.get("cannot_isolate"))
        ]
        lis = "".join(f"<li>{esc(x)}</li>" for x in items)
        blocks.append(
            f"<h3>{esc(ex.get('cell'))}: {esc(ex.get('status'))}</h3><ul>{lis}</ul>"
            + _explanation_plot(ex)
        )
    return "<h2>Explanation</h2>" + "".join(blocks) if blocks else ""


def _explanation_plot(ex: JSONObject) -> str:
    """The candidate and every revert cell against the baseline (ratios with their
    intervals), round by round: what each revert brought back, at a glance."""
    rows = [_ratio_row(f"{ex.get('cell')} (the candidate)", ex.get("gap"))]
    for i, effects in enumerate(_fmt.items(ex.get("rounds")), 1):
        found = effects.get("effects") if isinstance(effects, dict) else None
        for effect in _fmt.items(found):
            if isinstance(effect, dict):
                keys = ", ".join(
                    str(g.get("key"))
                    for g in _fmt.items(effect.get("group"))
                    if isinstance(g, dict)
                )
                rows.append(_ratio_row(f"round {i}: without {keys}", effect.get("vs_baseline")))
    shown = [r for r in rows if r is not None]
    if not shown:
        return ""
    unit = f"ratio to {ex.get('baseline')}"
    title = "the candidate and its reverts against the baseline"
    return _svg.interval_plot(shown, reference=1.0, unit=unit, title=title)


def _ratio_row(label: str, comparison: JSONValue) -> _svg.IntervalRow | None:
    ratio = comparison.get("ratio") if isinstance(comparison, dict) else None
    if not isinstance(comparison, dict) or not isinstance(ratio, int | float):
        return None
    verdict = comparison.get("verdict")
    tone = next((t for v, t in TONE.items() if v.value == verdict), "open")
    low, high = comparison.get("ci_low"), comparison.get("ci_high")
    return _svg.IntervalRow(
        label=label,
        points=(),
        center=float(ratio),
        low=float(low) if isinstance(low, int | float) else None,
        high=float(high) if isinstance(high, int | float) else None,
        tone=tone,
    )
