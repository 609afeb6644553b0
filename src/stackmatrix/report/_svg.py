"""Inline SVG plots for matrix.html (no scripts, no network, no plotting library)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import TypeGuard

from stackmatrix.report._fmt import number

_ROW = 34
_LEFT = 150
_RIGHT = 30
_TOP = 24
_BOTTOM = 36
WIDTH = 980


@dataclass(frozen=True, kw_only=True)
class IntervalRow:
    label: str
    points: Sequence[float]  # one per launch (or round)
    center: float | None
    low: float | None
    high: float | None
    tone: str  # css class: base, slower, faster, same, open


@dataclass(frozen=True, kw_only=True)
class BoxRow:
    label: str
    quantiles: dict[str, float]  # p5 p25 p50 p75 p95


MAX_TICKS = 50
# a range narrower than this, relative to its values, is one value (a single launch's
# geometric mean and median differ by a rounding step: issue 16, defect 1)
_SAME = 1e-9


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]: at most MAX_TICKS, none for a bad range."""
    if not (_finite(low) and _finite(high)):
        return []
    low, high = _widened(min(low, high), max(low, high))
    raw = (high - low) / max(count, 1)
    if not (_finite(raw) and raw > 0):
        return []
    step = 10.0 ** math.floor(math.log10(raw))
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * step:
            step *= mult
            break
    first, last = math.ceil(low / step), math.floor(high / step + 1e-9)
    if not 0 <= last - first < MAX_TICKS:
        return []
    digits = max(0, 2 - math.floor(math.log10(step)))
    # each tick from its index: `value += step` never advances when step is below
    # value's rounding step
    return [round(i * step, digits) for i in range(first, last + 1)]


def _widened(low: float, high: float) -> tuple[float, float]:
    """A range of one value (or of values equal up to rounding) made 10% wide around it."""
    magnitude = max(abs(low), abs(high))
    if high - low > magnitude * _SAME:
        return low, high
    mid = (low + high) / 2
    half = abs(mid) * 0.05 or 1.0
    return mid - half, mid + half


class _Scale:
    def __init__(self, low: float, high: float) -> None:
        low, high = _widened(low, high)
        pad = (high - low) * 0.08
        self.low, self.high = low - pad, high + pad

    def x(self, value: float) -> float:
        return _LEFT + (value - self.low) / (self.high - self.low) * (WIDTH - _LEFT - _RIGHT)


def _frame(height: int, scale: _Scale, unit: str, title: str) -> list[str]:
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}" class="plot">',
        f"<title>{escape(title)}</title>",
    ]
    axis_y = height - _BOTTOM + 6
    for tick in nice_ticks(scale.low, scale.high):
        x = scale.x(tick)
        out.append(f'<line x1="{x:.1f}" y1="{_TOP - 8}" x2="{x:.1f}" y2="{axis_y}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{axis_y + 14}" class="tick">{tick:g}</text>')
    out.append(
        f'<text x="{WIDTH - _RIGHT}" y="{height - 2}" class="unit" text-anchor="end">'
        f"{escape(unit)}</text>"
    )
    return out


def interval_plot(
    rows: Sequence[IntervalRow], *, reference: float | None, unit: str, title: str
) -> str:
    values = [v for r in rows for v in (*r.points, r.low, r.high, r.center) if _finite(v)]
    if not values:
        return ""
    scale = _Scale(min(values), max(values))
    height = _TOP + _ROW * len(rows) + _BOTTOM
    out = _frame(height, scale, unit, title)
    if reference is not None:
        x = scale.x(reference)
        out.append(
            f'<line x1="{x:.1f}" y1="{_TOP - 8}" x2="{x:.1f}" y2="{height - _BOTTOM + 6}" '
            'class="ref"/>'
        )
    for i, row in enumerate(rows):
        y = _TOP + _ROW * i + _ROW / 2
        out.append(
            f'<text x="{_LEFT - 10}" y="{y + 4:.1f}" class="label">{escape(row.label)}</text>'
        )
        if row.points or row.center is not None:
            out += _interval_marks(row, scale, y)
        else:
            out.append(f'<text x="{_LEFT + 6}" y="{y + 4:.1f}" class="unit">not measured</text>')
    out.append("</svg>")
    return "\n".join(out)


def _finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def _interval_marks(row: IntervalRow, scale: _Scale, y: float) -> list[str]:
    out = []
    if _finite(row.low) and _finite(row.high):
        x1, x2 = scale.x(row.low), scale.x(row.high)
        out.append(
            f'<rect x="{x1:.1f}" y="{y - 7:.1f}" width="{max(x2 - x1, 1.5):.1f}" height="14" '
            f'rx="3" class="ci {row.tone}"><title>{number(row.low)} to {number(row.high)}'
            "</title></rect>"
        )
    for value in filter(_finite, row.points):
        out.append(f'<circle cx="{scale.x(value):.1f}" cy="{y:.1f}" r="3.2" class="pt"/>')
    if _finite(row.center):
        x = scale.x(row.center)
        out.append(
            f'<line x1="{x:.1f}" y1="{y - 10:.1f}" x2="{x:.1f}" y2="{y + 10:.1f}" '
            f'class="median {row.tone}"><title>median {number(row.center)}</title></line>'
        )
    return out


def box_plot(rows: Sequence[BoxRow], *, unit: str, title: str) -> str:
    keys = ("p5", "p25", "p50", "p75", "p95")
    rows = [r for r in rows if all(_finite(r.quantiles.get(k)) for k in keys)]
    if not rows:
        return ""
    values = [r.quantiles[k] for r in rows for k in ("p5", "p95")]
    scale = _Scale(min(values), max(values))
    height = _TOP + _ROW * len(rows) + _BOTTOM
    out = _frame(height, scale, unit, title)
    for i, row in enumerate(rows):
        y = _TOP + _ROW * i + _ROW / 2
        q = {k: scale.x(v) for k, v in row.quantiles.items() if k.startswith("p")}
        tip = ", ".join(f"{k} {number(v)}" for k, v in row.quantiles.items() if k.startswith("p"))
        out += [
            f'<text x="{_LEFT - 10}" y="{y + 4:.1f}" class="label">{escape(row.label)}</text>',
            f"<g><title>{escape(tip)}</title>",
            f'<line x1="{q["p5"]:.1f}" y1="{y:.1f}" x2="{q["p95"]:.1f}" y2="{y:.1f}" '
            'class="whisker"/>',
            f'<rect x="{q["p25"]:.1f}" y="{y - 8:.1f}" width="{max(q["p75"] - q["p25"], 1.5):.1f}" '
            'height="16" class="box"/>',
            f'<line x1="{q["p50"]:.1f}" y1="{y - 8:.1f}" x2="{q["p50"]:.1f}" y2="{y + 8:.1f}" '
            'class="median"/>',
            "</g>",
        ]
    out.append("</svg>")
    return "\n".join(out)


def sparkline(values: Sequence[float], *, width: int = 80, height: int = 18) -> str:
    if len(values) < 2:
        return ""
    low, high = min(values), max(values)
    span = high - low or 1.0
    step = width / (len(values) - 1)
    pts = " ".join(
        f"{i * step:.1f},{height - 2 - (v - low) / span * (height - 4):.1f}"
        for i, v in enumerate(values)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="spark">'
        f'<polyline points="{pts}" fill="none" stroke="currentColor" stroke-width="1.5"/></svg>'
    )
