"""Plots of matrix.html beside the headline's: every launch in time order (a drift or
an effect of the position in a cycle shows at a glance), and the load points."""

from __future__ import annotations

from stackmatrix.report import _frontier_text, _svg, _timeline
from stackmatrix.report import fmt as _fmt
from stackmatrix.report._html import TONE, esc, html_table
from stackmatrix.report._svg_frontier import Curve, Line, Mark, frontier_plot
from stackmatrix.report.frontier import CellFrontier, FrontierPoint, per_gpu
from stackmatrix.report.latency import LatencyRow
from stackmatrix.report.matrix import MatrixReport, PointRow
from stackmatrix.spec_model import SloBound
from stackmatrix.stats.verdict import Interval, Verdict


def time_order(report: MatrixReport) -> str:
    """Every measured launch where it ran: shows a drift over the run, or an effect of
    the place in each cycle (the baseline always first), that the intervals hide."""
    placed, x_label = _timeline.placed_launches(report.cells)
    series = [
        _svg.TimeSeries(
            label=c.id,
            points=[
                _svg.TimePoint(
                    position=p.position,
                    value=p.launch.value,
                    outlier=p.launch.outlier,
                    label=f"{c.id} {p.launch.label} at {p.position}",
                )
                for p in placed
                if p.cell == c.id and p.launch.value is not None
            ],
        )
        for c in report.cells
    ]
    label = _fmt.metric_label(report.headline)
    plot = _svg.time_plot(
        [s for s in series if s.points],
        x_label=x_label,
        unit=f"{label} per launch (median of its rounds)",
        title=f"{label}, launches in time order",
    )
    return f"<h3>Launches in time order</h3>{plot}" if plot else ""


def points(report: MatrixReport) -> str:
    """`[[bench.points]]`: every cell at each further load, on the same servers."""
    if not report.points:
        return ""
    conf = f"{report.thresholds.confidence:.0%}"
    parts = ["<h2>Load points</h2>", f'<p class="muted">{esc(_fmt.POINTS_NOTE)}</p>']
    for pt in report.points:
        label = _fmt.metric_label(pt.metric)
        vs = f"vs {report.baseline} [{conf} CI]#"
        header = ["cell", f"{label} [{conf} CI]#", "launches#", vs, "verdict"]
        rows = [
            [
                esc(r.cell),
                esc(_fmt.interval_text(r.value)),
                esc(r.launches or "—"),
                "—" if r.cell == report.baseline else esc(_fmt.ratio_text(r.comparison)),
                esc(r.comparison.verdict.value if r.comparison else "—"),
            ]
            for r in pt.rows
        ]
        plot = _svg.interval_plot(
            [_point_row(r, report.baseline) for r in pt.rows],
            reference=next(
                (r.value.center for r in pt.rows if r.cell == report.baseline and r.value), None
            ),
            unit=f"{label}: bars the {conf} interval, dashed line the baseline",
            title=f"{label} at {_fmt.point_title(pt)}",
        )
        parts += [f"<h3>{esc(_fmt.point_title(pt))}</h3>", html_table(header, rows), plot]
        parts.append(latency(pt.latency, "h4"))
    return "".join(parts)


def _point_row(r: PointRow, baseline: str) -> _svg.IntervalRow:
    if r.cell == baseline:
        verdict = Verdict.BASELINE
    else:
        verdict = r.comparison.verdict if r.comparison else Verdict.NOT_MEASURED
    return _svg.IntervalRow(
        label=r.cell,
        points=(),
        center=r.value.center if r.value else None,
        low=r.value.low if r.value else None,
        high=r.value.high if r.value else None,
        tone=TONE[verdict],
    )


def latency(rows: tuple[LatencyRow, ...], tag: str) -> str:
    """A load's TTFT/ITL/TPOT percentiles with their sample counts ("" where none)."""
    if not rows:
        return ""
    header, body, note = _fmt.latency_table(rows)
    header = [h + "#" if h == "n" else h for h in header]
    table = html_table(header, [[esc(x) for x in r] for r in body])
    foot = f'<p class="muted">{esc(note)}</p>' if note else ""
    return f"<{tag}>{esc(_fmt.LATENCY_TITLE)}</{tag}>{table}{foot}"


def frontier(report: MatrixReport) -> str:
    """Every cell at every load: the table, the frontier plot, the SLO's sentences."""
    frontiers = [c.frontier for c in report.cells if c.frontier is not None]
    if not report.loads or not frontiers:
        return ""
    conf = f"{report.thresholds.confidence:.0%}"
    header = [
        h if h in ("cell", "load") else h + "#" for h in _frontier_text.header(report.slo, conf)
    ]
    table = html_table(
        header, [[esc(x) for x in r] for r in _frontier_text.rows(frontiers, report.slo)]
    )
    parts = [
        f"<h2>{esc(_frontier_text.TITLE)}</h2>",
        f'<p class="muted">{esc(_frontier_text.NOTE)}</p>',
        *[f"<p>{esc(order)}</p>" for order in [_frontier_text.order_note(report.loads)] if order],
    ]
    if report.slo:
        slo = f"SLO: {_frontier_text.slo_text(report.slo)}."
        parts.append(f'<p>{esc(slo)} <span class="muted">{esc(_frontier_text.SLO_NOTE)}</span></p>')
    parts += [table, _frontier_plot(report, frontiers, conf)]
    said = "".join(f"<li>{esc(f.sentence)}</li>" for f in frontiers if f.sentence)
    return "".join(parts) + (f"<ul>{said}</ul>" if said else "")


def _frontier_plot(report: MatrixReport, frontiers: list[CellFrontier], conf: str) -> str:
    shared = all(f.gpus > 0 for f in frontiers)
    curves = [
        Curve(
            label=f"{f.cell} (baseline)" if f.cell == report.baseline else f.cell,
            marks=[m for p in f.points if (m := _mark(p, f.gpus if shared else 0)) is not None],
            dashed=f.cell == report.baseline,
        )
        for f in frontiers
    ]
    y = "output tok/s per GPU" if shared else "output tok/s of the server"
    return frontier_plot(
        curves,
        x_label=f"per-user tok/s (median request's 1 / TPOT); bars and band the {conf} intervals",
        unit=f"{y}, median of launches",
        title="throughput against per-user speed, each load of every cell",
        line=_tpot_line(report.slo),
    )


def _mark(p: FrontierPoint, gpus: int) -> Mark | None:
    y = per_gpu(p.throughput, gpus) if gpus else p.throughput
    if y is None or p.per_user is None:
        return None
    return Mark(
        x=p.per_user.median,
        y=y.median,
        x_span=_span(p.per_user),
        y_span=_span(y),
        label=_frontier_text.load_text(p.load),
        missed=p.slo_met is False,
    )


def _span(value: Interval) -> tuple[float, float] | None:
    return None if value.low is None or value.high is None else (value.low, value.high)


def _tpot_line(bounds: tuple[SloBound, ...]) -> Line | None:
    """A TPOT bound of B ms is a per-user speed of 1000 / B tok/s: loads left of it decode
    slower than the SLO lets a request (the strictest bound where there are several)."""
    tpots = [b for b in bounds if b.kind == "tpot"]
    if not tpots:
        return None
    strictest = min(tpots, key=lambda b: b.ms)
    speed = 1000 / strictest.ms
    return Line(
        x=speed,
        label=f"{_frontier_text.bound_label(strictest)}: {speed:.3g} tok/s per user at least",
    )
