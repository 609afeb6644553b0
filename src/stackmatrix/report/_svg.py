"""Inline SVG plots for matrix.html (no scripts, no network, no plotting library)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import TypeGuard

from stackmatrix.report.fmt import number

_ROW = 34
_LEFT = 150
RIGHT = 30
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
# geometric mean and median differ by a rounding step)
_SAME = 1e-9


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high]: at most MAX_TICKS, none for a bad range."""
    if not (finite(low) and finite(high)):
        return []
    low, high = _widened(min(low, high), max(low, high))
    raw = (high - low) / max(count, 1)
    if not (finite(raw) and raw > 0):
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


AXIS_NOTE = "axis does not start at 0"


class Scale:
    def __init__(self, low: float, high: float) -> None:
        low, high = _widened(low, high)
        pad = (high - low) * 0.08
        self.low, self.high = low - pad, high + pad
        if low >= 0 > self.low:
            # the padding alone would put negative values on an axis of positive ones
            self.low = 0.0

    @property
    def from_zero(self) -> bool:
        """Whether 0 is on the axis: when not, a distance along it is no ratio of values,
        and the plot has to say so."""
        return self.low <= 0 <= self.high

    def fraction(self, value: float) -> float:
        return (value - self.low) / (self.high - self.low)

    def x(self, value: float) -> float:
        return _LEFT + self.fraction(value) * (WIDTH - _LEFT - RIGHT)


def _frame(height: int, scale: Scale, unit: str, title: str) -> list[str]:
    out = svg_open(height, title)
    axis_y = height - _BOTTOM + 6
    for tick in nice_ticks(scale.low, scale.high):
        x = scale.x(tick)
        out.append(f'<line x1="{x:.1f}" y1="{_TOP - 8}" x2="{x:.1f}" y2="{axis_y}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{axis_y + 14}" class="tick">{tick:g}</text>')
    out.append(
        f'<text x="{WIDTH - RIGHT}" y="{height - 2}" class="unit" text-anchor="end">'
        f"{escape(unit)}</text>"
    )
    if not scale.from_zero:
        out.append(f'<text x="{_LEFT}" y="{height - 2}" class="axis-note">{AXIS_NOTE}</text>')
    return out


def svg_open(height: int, title: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}" class="plot">',
        f"<title>{escape(title)}</title>",
    ]


def interval_plot(
    rows: Sequence[IntervalRow], *, reference: float | None, unit: str, title: str
) -> str:
    values = [v for r in rows for v in (*r.points, r.low, r.high, r.center) if finite(v)]
    if not values:
        return ""
    scale = Scale(min(values), max(values))
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


def finite(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value)


def _interval_marks(row: IntervalRow, scale: Scale, y: float) -> list[str]:
    out = []
    if finite(row.low) and finite(row.high):
        x1, x2 = scale.x(row.low), scale.x(row.high)
        out.append(
            f'<rect x="{x1:.1f}" y="{y - 7:.1f}" width="{max(x2 - x1, 1.5):.1f}" height="14" '
            f'rx="3" class="ci {row.tone}"><title>{number(row.low)} to {number(row.high)}'
            "</title></rect>"
        )
    for value in filter(finite, row.points):
        out.append(f'<circle cx="{scale.x(value):.1f}" cy="{y:.1f}" r="3.2" class="pt"/>')
    if finite(row.center):
        x = scale.x(row.center)
        out.append(
            f'<line x1="{x:.1f}" y1="{y - 10:.1f}" x2="{x:.1f}" y2="{y + 10:.1f}" '
            f'class="median {row.tone}"><title>median {number(row.center)}</title></line>'
        )
    return out


def box_plot(rows: Sequence[BoxRow], *, unit: str, title: str) -> str:
    keys = ("p5", "p25", "p50", "p75", "p95")
    rows = [r for r in rows if all(finite(r.quantiles.get(k)) for k in keys)]
    if not rows:
        return ""
    values = [r.quantiles[k] for r in rows for k in ("p5", "p95")]
    scale = Scale(min(values), max(values))
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


@dataclass(frozen=True, kw_only=True)
class TimePoint:
    position: float  # where the launch ran in the whole run
    value: float
    outlier: bool
    label: str  # which launch, for its tooltip


@dataclass(frozen=True, kw_only=True)
class TimeSeries:
    label: str  # the cell
    points: Sequence[TimePoint]


# distinguishable on white and for the common colour-vision deficiencies (Okabe-Ito,
# then darker tones); cells past the last share colours, their tooltips still tell them apart
PALETTE = (
    "#0072b2",
    "#d55e00",
    "#009e73",
    "#cc79a7",
    "#e69f00",
    "#56b4e9",
    "#000000",
    "#8250df",
    "#9a6700",
    "#57606a",
)
T_LEFT = 70
T_TOP = 34  # room above the value axis for its unit and its note
T_PLOT = 220
LEGEND_ROW = 18


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def time_plot(series: Sequence[TimeSeries], *, x_label: str, unit: str, title: str) -> str:
    """Each launch's value against its place in the run, one colour per series."""
    points = [p for s in series for p in s.points if finite(p.value) and finite(p.position)]
    if not points:
        return ""
    xs = Scale(min(p.position for p in points), max(p.position for p in points))
    ys = Scale(min(p.value for p in points), max(p.value for p in points))
    entries = legend([s.label for s in series])
    # the legend's first row sits below the x axis's ticks and its label
    legend_top = T_TOP + T_PLOT + 54
    height = legend_top + LEGEND_ROW * max(row for _, row, _ in entries) + 8
    out = [*svg_open(height, title), *xy_axes(xs, ys, x_label=x_label, unit=unit)]
    for i, s in enumerate(series):
        out += _time_marks(s, color(i), xs, ys)
    out += legend_marks(entries, top=legend_top)
    out.append("</svg>")
    return "\n".join(out)


def tx(xs: Scale, position: float) -> float:
    return T_LEFT + xs.fraction(position) * (WIDTH - T_LEFT - RIGHT)


def ty(ys: Scale, value: float) -> float:
    return T_TOP + (1 - ys.fraction(value)) * T_PLOT


def xy_axes(xs: Scale, ys: Scale, *, x_label: str, unit: str, whole_x: bool = True) -> list[str]:
    """A value axis (`unit` above it) against an x axis (`x_label` below it); `whole_x`:
    ticks at whole numbers only (slots of a run)."""
    bottom, right = T_TOP + T_PLOT, WIDTH - RIGHT
    out = [f'<text x="{T_LEFT}" y="12" class="unit">{escape(unit)}</text>']
    if not ys.from_zero:
        out.append(f'<text x="{T_LEFT}" y="26" class="axis-note">{AXIS_NOTE}</text>')
    for tick in nice_ticks(ys.low, ys.high):
        y = ty(ys, tick)
        out.append(f'<line x1="{T_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{T_LEFT - 6}" y="{y + 4:.1f}" class="ytick">{tick:g}</text>')
    # positions are whole slots: a tick between two of them names no launch
    for tick in (t for t in nice_ticks(xs.low, xs.high) if t == int(t) or not whole_x):
        x = tx(xs, tick)
        out.append(f'<text x="{x:.1f}" y="{bottom + 16}" class="tick">{tick:g}</text>')
    out.append(
        f'<text x="{right}" y="{bottom + 32}" class="unit" text-anchor="end">'
        f"{escape(x_label)}</text>"
    )
    return out


def _time_marks(s: TimeSeries, fill: str, xs: Scale, ys: Scale) -> list[str]:
    marks = sorted(
        (p for p in s.points if finite(p.value) and finite(p.position)),
        key=lambda p: p.position,
    )
    at = [(tx(xs, p.position), ty(ys, p.value)) for p in marks]
    out = []
    if len(at) > 1:
        trail = " ".join(f"{x:.1f},{y:.1f}" for x, y in at)
        out.append(f'<polyline points="{trail}" class="trail" stroke="{fill}"/>')
    for p, (x, y) in zip(marks, at, strict=True):
        out.append(_launch_mark(s.label, p, fill, x, y))
    return out


def _launch_mark(cell: str, p: TimePoint, fill: str, x: float, y: float) -> str:
    # an outlier is a ring, so it stands out without hiding which cell it belongs to
    look = (
        f'r="5" fill="#ffffff" stroke="{fill}" stroke-width="2" class="launch outlier"'
        if p.outlier
        else f'r="3.5" fill="{fill}" stroke="{fill}" class="launch"'
    )
    tip = f"{p.label}: {number(p.value)}" + (" (outlier)" if p.outlier else "")
    return (
        f'<circle cx="{x:.1f}" cy="{y:.1f}" {look} data-cell="{escape(cell)}">'
        f"<title>{escape(tip)}</title></circle>"
    )


def legend(
    labels: Sequence[str], ring: str | None = "outlier launch (ring)"
) -> list[tuple[float, int, str]]:
    """(x, row, label) of each entry, wrapped to the plot's width; then the key of a
    ring (what a hollow mark means), where rings mean something."""
    out: list[tuple[float, int, str]] = []
    x, row = float(T_LEFT), 0
    for label in (*labels, *([ring] if ring else [])):
        width = 26 + 7 * len(label)  # a swatch and a rough text width at 12px
        if x + width > WIDTH - RIGHT and x > T_LEFT:
            x, row = float(T_LEFT), row + 1
        out.append((x, row, label))
        x += width + 12
    return out


def legend_marks(
    legend: Sequence[tuple[float, int, str]], *, top: int, ring: bool = True
) -> list[str]:
    """The legend's swatches and labels; `ring`: the last entry is the ring's key."""
    out = []
    for i, (x, row, label) in enumerate(legend):
        y = top + row * LEGEND_ROW
        last = ring and i == len(legend) - 1
        swatch = (
            f'<circle cx="{x + 6:.1f}" cy="{y - 4}" r="5" fill="#ffffff" stroke="#57606a" '
            'stroke-width="2"/>'
            if last
            else f'<circle cx="{x + 6:.1f}" cy="{y - 4}" r="5" fill="{color(i)}"/>'
        )
        out.append(swatch + f'<text x="{x + 16:.1f}" y="{y}" class="legend">{escape(label)}</text>')
    return out
