"""The frontier plot of matrix.html: each cell's throughput against its per-user speed
over its loads, with the band of its throughput interval, its per-user interval as
whiskers, a ring where a load misses the SLO, and where a bound limits the per-user
speed (TPOT), that speed as a line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from stackmatrix.report._svg import (
    AXIS_NOTE,
    LEGEND_ROW,
    T_LEFT,
    T_PLOT,
    T_TOP,
    Scale,
    color,
    finite,
    legend,
    legend_marks,
    svg_open,
    tx,
    ty,
    xy_axes,
)
from stackmatrix.report.fmt import number


@dataclass(frozen=True, kw_only=True)
class Mark:
    """One load of one cell: per-user speed (x) and throughput (y), each with its
    interval (None: the value alone)."""

    x: float
    y: float
    x_span: tuple[float, float] | None
    y_span: tuple[float, float] | None
    label: str  # the load, for its tooltip
    missed: bool  # the SLO is not met at this load


@dataclass(frozen=True, kw_only=True)
class Curve:
    label: str  # the cell
    marks: Sequence[Mark]  # in the loads' order (report/frontier.py order_key)
    dashed: bool = False  # the baseline's


@dataclass(frozen=True, kw_only=True)
class Line:
    """A per-user speed the SLO asks for at least (x), and what it says."""

    x: float
    label: str


def frontier_plot(
    curves: Sequence[Curve], *, x_label: str, unit: str, title: str, line: Line | None = None
) -> str:
    curves = [c for c in curves if any(finite(m.x) and finite(m.y) for m in c.marks)]
    if not curves:
        return ""
    xs, ys = _scales(curves, line)
    rings = any(m.missed for c in curves for m in c.marks)
    entries = legend([c.label for c in curves], ring="misses the SLO (ring)" if rings else None)
    legend_top = T_TOP + T_PLOT + 54
    height = legend_top + LEGEND_ROW * max(row for _, row, _ in entries) + 8
    out = [*svg_open(height, title), *xy_axes(xs, ys, x_label=x_label, unit=unit, whole_x=False)]
    if not xs.from_zero:
        out.append(
            f'<text x="{T_LEFT}" y="{T_TOP + T_PLOT + 32}" class="axis-note">x {AXIS_NOTE}</text>'
        )
    if line is not None:
        out += _line(line, xs)
    for i, curve in enumerate(curves):
        out += _curve(curve, color(i), xs, ys)
    out += legend_marks(entries, top=legend_top, ring=rings)
    out.append("</svg>")
    return "\n".join(out)


def _scales(curves: Sequence[Curve], line: Line | None) -> tuple[Scale, Scale]:
    xv = [v for c in curves for m in c.marks for v in (m.x, *(m.x_span or ())) if finite(v)]
    yv = [v for c in curves for m in c.marks for v in (m.y, *(m.y_span or ())) if finite(v)]
    if line is not None and finite(line.x):
        xv.append(line.x)
    return Scale(min(xv), max(xv)), Scale(min(yv), max(yv))


def _line(line: Line, xs: Scale) -> list[str]:
    x = tx(xs, line.x)
    return [
        f'<line x1="{x:.1f}" y1="{T_TOP}" x2="{x:.1f}" y2="{T_TOP + T_PLOT}" class="ref"/>',
        f'<text x="{x + 4:.1f}" y="{T_TOP + 12}" class="unit">{escape(line.label)}</text>',
    ]


def _curve(curve: Curve, fill: str, xs: Scale, ys: Scale) -> list[str]:
    marks = [m for m in curve.marks if finite(m.x) and finite(m.y)]
    out = []
    upper = [(tx(xs, m.x), ty(ys, (m.y_span or (m.y, m.y))[1])) for m in marks]
    lower = [(tx(xs, m.x), ty(ys, (m.y_span or (m.y, m.y))[0])) for m in marks]
    if len(marks) > 1:
        band = " ".join(f"{x:.1f},{y:.1f}" for x, y in [*upper, *reversed(lower)])
        out.append(f'<polygon points="{band}" fill="{fill}" fill-opacity="0.15" stroke="none"/>')
        trail = " ".join(f"{tx(xs, m.x):.1f},{ty(ys, m.y):.1f}" for m in marks)
        dash = ' stroke-dasharray="5 3"' if curve.dashed else ""
        out.append(f'<polyline points="{trail}" class="trail" stroke="{fill}"{dash}/>')
    for m in marks:
        out += _whiskers(m, fill, xs, ys)
        out.append(_mark(curve.label, m, fill, xs, ys))
    return out


def _whiskers(m: Mark, fill: str, xs: Scale, ys: Scale) -> list[str]:
    out = []
    y = ty(ys, m.y)
    if m.x_span is not None and all(finite(v) for v in m.x_span):
        x1, x2 = (tx(xs, v) for v in m.x_span)
        out.append(
            f'<line x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}" '
            f'stroke="{fill}" stroke-width="1"/>'
        )
    if m.y_span is not None and all(finite(v) for v in m.y_span):
        x = tx(xs, m.x)
        y1, y2 = (ty(ys, v) for v in m.y_span)
        out.append(
            f'<line x1="{x:.1f}" y1="{y1:.1f}" x2="{x:.1f}" y2="{y2:.1f}" '
            f'stroke="{fill}" stroke-width="1"/>'
        )
    return out


def _mark(cell: str, m: Mark, fill: str, xs: Scale, ys: Scale) -> str:
    look = (
        f'r="5" fill="#ffffff" stroke="{fill}" stroke-width="2" class="load missed"'
        if m.missed
        else f'r="4" fill="{fill}" stroke="{fill}" class="load"'
    )
    tip = f"{cell} {m.label}: {number(m.y)} at {number(m.x)} per user"
    tip += " (misses the SLO)" if m.missed else ""
    return (
        f'<circle cx="{tx(xs, m.x):.1f}" cy="{ty(ys, m.y):.1f}" {look} data-cell="{escape(cell)}">'
        f"<title>{escape(tip)}</title></circle>"
    )
