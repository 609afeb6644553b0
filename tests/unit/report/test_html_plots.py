"""The plots of matrix.html: launches in time order, axes that say where they start,
load points and the TPOT distribution."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from tests.support.synthetic import story_cells, write_run

from stackmatrix.report import _svg, render_html
from stackmatrix.report._svg import AXIS_NOTE, BoxRow, IntervalRow, TimePoint, TimeSeries
from stackmatrix.report.load import load_run
from stackmatrix.report.matrix import LoadPointReport, MatrixReport, PointRow
from stackmatrix.report.model import build_model
from stackmatrix.stats.verdict import Interval

_CIRCLE = re.compile(
    r'<circle cx="([\d.]+)" [^>]*stroke="(#[0-9a-f]{6})"[^>]*data-cell="([^"]+)">'
    r"<title>([^<]*)</title>"
)
_SWATCH = re.compile(r'<circle [^>]*fill="(#[0-9a-f]{6})"/><text [^>]*class="legend">([^<]*)<')


def _run(tmp_path: Path) -> Path:
    return write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )


def _set(run: Path, cell: str, key: str, values: list[Any]) -> None:
    path = run / "cells" / cell / "bench.json"
    doc = json.loads(path.read_text())
    for launch, value in zip(doc["data"]["launches"], values, strict=True):
        launch[key] = value
    path.write_text(json.dumps(doc))


def _model(run: Path) -> MatrixReport:
    return build_model(load_run(run))


def _time_plot(html: str) -> str:
    start = html.index("<h3>Launches in time order</h3>")
    return html[start : html.index("</svg>", start)]


def _measured(report: MatrixReport) -> dict[str, int]:
    return {c.id: n for c in report.cells if (n := sum(ln.value is not None for ln in c.launches))}


def test_one_point_per_measured_launch_in_its_cells_colour(tmp_path: Path) -> None:
    report = _model(_run(tmp_path))
    plot = _time_plot(render_html.render(report))
    points = _CIRCLE.findall(plot)
    legend = {label: fill for fill, label in _SWATCH.findall(plot)}
    counts = _measured(report)
    assert len(counts) >= 2 and len(points) == sum(counts.values())
    assert {cell: sum(p[2] == cell for p in points) for cell in counts} == counts
    assert all(stroke == legend[cell] for _, stroke, cell, _ in points)
    assert len({legend[cell] for cell in counts}) == len(counts)  # a colour each


def test_warm_ups_are_not_drawn_and_outliers_are_rings(tmp_path: Path) -> None:
    report = _model(_run(tmp_path))
    cell = report.cells[0]
    odd = dataclasses.replace(cell.launches[0], outlier=True)
    warm = dataclasses.replace(cell.launches[1], warmup=True, index=1)
    cells = (
        dataclasses.replace(cell, launches=(odd, *cell.launches[1:]), warmup_launches=(warm,)),
        *report.cells[1:],
    )
    plot = _time_plot(render_html.render(dataclasses.replace(report, cells=cells)))
    assert len(_CIRCLE.findall(plot)) == sum(_measured(report).values())
    assert plot.count('class="launch outlier"') == 1 and "W1" not in plot


def _x_order(html: str) -> list[str]:
    points = sorted(_CIRCLE.findall(_time_plot(html)), key=lambda p: float(p[0]))
    return [title.split(":")[0].rsplit(" at ", 1)[0] for *_, title in points]


def test_x_follows_the_schedule_slot(tmp_path: Path) -> None:
    run = _run(tmp_path)
    counts = _measured(_model(run))
    # slots given backwards: the last cell's last launch ran first
    slot, placed = sum(counts.values()), []
    for cell, n in counts.items():
        for i in range(n):
            placed.append((slot, f"{cell} L{i}"))
            slot -= 1
        _set(run, cell, "sequence", [s for s, _ in placed[-n:]])
    html = render_html.render(_model(run))
    assert _x_order(html) == [name for _, name in sorted(placed)]
    assert "slot in the run" in _time_plot(html)


def test_without_slots_x_follows_start_times(tmp_path: Path) -> None:
    run = _run(tmp_path)
    counts = _measured(_model(run))
    cells = list(counts)
    # slot 0 means "not recorded": the start times decide, here the second cell first
    for k, cell in enumerate(cells):
        hour = 1 if k == 1 else 2 + k
        _set(run, cell, "sequence", [0] * counts[cell])
        _set(
            run,
            cell,
            "started",
            [f"2026-01-01T{hour:02d}:{m:02d}:00+00:00" for m in range(counts[cell])],
        )
    order = _x_order(render_html.render(_model(run)))
    assert order[: counts[cells[1]]] == [f"{cells[1]} L{i}" for i in range(counts[cells[1]])]
    assert order[counts[cells[1]]] == f"{cells[0]} L0"


def test_the_launch_rows_carry_slot_and_start(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _set(run, "cu128", "sequence", [4, 1, 7, 10, 13])
    row = _model(run).cell("cu128").launches[2]
    assert row.sequence == 7 and row.to_dict()["sequence"] == 7
    assert row.started is not None and row.to_dict()["started"] == row.started


def _series(values: list[float]) -> list[TimeSeries]:
    points = [
        TimePoint(position=i, value=v, outlier=False, label=f"L{i}")
        for i, v in enumerate(values, 1)
    ]
    return [TimeSeries(label="a", points=points)]


def test_a_value_axis_away_from_zero_says_so() -> None:
    def time(values: list[float]) -> str:
        return _svg.time_plot(_series(values), x_label="slot", unit="tok/s", title="t")

    def interval(values: list[float]) -> str:
        row = IntervalRow(
            label="a", points=values, center=values[0], low=None, high=None, tone="base"
        )
        return _svg.interval_plot([row], reference=None, unit="tok/s", title="t")

    def box(values: list[float]) -> str:
        q = dict(zip(("p5", "p25", "p50", "p75", "p95"), sorted(values), strict=True))
        return _svg.box_plot([BoxRow(label="a", quantiles=q)], unit="ms", title="t")

    for plot in (time, interval, box):
        assert AXIS_NOTE in plot([100.0, 101.0, 104.0, 107.0, 110.0]), plot
        assert AXIS_NOTE not in plot([0.0, 1.0, 4.0, 7.0, 10.0]), plot
        # padding alone never takes an axis of positive values below zero
        assert AXIS_NOTE not in plot([0.2, 1.0, 4.0, 7.0, 10.0]), plot
    assert ">-" not in interval([0.2, 1.0, 4.0, 7.0, 10.0])


def test_the_note_shows_in_the_report(tmp_path: Path) -> None:
    html = render_html.render(_model(_run(tmp_path)))
    assert AXIS_NOTE in _time_plot(html)  # story throughputs sit far from zero


def test_each_load_point_gets_an_interval_plot(tmp_path: Path) -> None:
    report = _model(_run(tmp_path))

    def row(cell: str, center: float) -> PointRow:
        value = Interval(
            center=center, median=center, low=center * 0.97, high=center * 1.03, n=5, unit="launch"
        )
        return PointRow(cell=cell, value=value, launches=5, comparison=None)

    point = LoadPointReport(
        name="c64 <x>",
        metric="output_throughput",
        max_concurrency=64,
        num_prompts=128,
        rows=(row("cu128", 900.0), row("cu130", 850.0)),
    )
    html = render_html.render(dataclasses.replace(report, points=(point,)))
    section = html[html.index("<h2>Load points</h2>") :]
    assert section.index("<svg") < section.index("<h2>", 5)
    assert "c64 &lt;x&gt;" in section and "c64 <x>" not in section
    assert 'class="ci base"' in section and 'class="ci open"' in section


def test_tpot_is_a_box_plot(tmp_path: Path) -> None:
    report = _model(_run(tmp_path))
    tpot = report.cell("cu128").distributions["tpot_ms"]
    assert 0 < tpot["p5"] <= tpot["p50"] <= tpot["p95"]
    html = render_html.render(report)
    section = html[html.index("<h3>Time per output token</h3>") :]
    assert section.index('class="box"') < section.index("</svg>")


def test_the_page_fetches_nothing(tmp_path: Path) -> None:
    html = render_html.render(_model(_run(tmp_path)))
    assert "<script" not in html and "src=" not in html and "href=" not in html
    assert "<link" not in html and "url(" not in html
    # the only address in an attribute is the SVG namespace, which names, not fetches
    assert set(re.findall(r'="(https?:[^"]*)"', html)) == {"http://www.w3.org/2000/svg"}


def test_an_explanation_gets_a_plot_of_the_candidate_and_its_reverts(tmp_path: Path) -> None:
    import shutil

    from stackmatrix.report import build_report

    example = Path(__file__).resolve().parents[3] / "reports/examples/h200-sglang-explain-decided"
    run = tmp_path / "run"
    shutil.copytree(example, run)
    html = build_report(run, history_db=None).html.read_text()
    plot = html.split("the candidate and its reverts against the baseline", 1)[1].split("</svg>")[0]
    assert "triton-capped (the candidate)" in plot
    assert "round 1: without arg:max-running-requests" in plot
    assert "round 1: without arg:attention-backend" in plot
