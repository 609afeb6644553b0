"""Load points given by a request rate: on the frontier they are ordered by rate (a load
without one, sent as fast as its concurrency allows, after them), labelled with their
rate, and where rates and concurrencies mix so that the order is no order of load, the
report says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.unit.report._slo_results import launches, write_cell, write_run

from stackmatrix.bench._cell import _summarize
from stackmatrix.records import BenchData
from stackmatrix.report import render_html, render_md
from stackmatrix.report.frontier import CellFrontier
from stackmatrix.report.load import load_run
from stackmatrix.report.matrix import MatrixReport
from stackmatrix.report.model import build_model
from stackmatrix.spec_model import Bench, LoadPoint, Workload

SLO = {"ttft_p99_ms": 100.0, "tpot_p99_ms": 10.0}
# written r4 first: the spec's order is not the rates'
RATE_POINTS = "".join(
    f'\n[[bench.points]]\nname = "{name}"\nrequest_rate = {rate}\nnum_prompts = 16\n'
    for name, rate in (("r4", 4), ("r1", 1), ("r2", 2.0))
)
SAME_CONCURRENCY = {"r1": 4, "r2": 4, "r4": 4}  # the headline's, as the bench records it


def _by_rate(tmp_path: Path) -> MatrixReport:
    """The headline at concurrency 4, unpaced, and three paced points at its concurrency;
    neither cell meets the SLO unpaced, the baseline a meets it up to 4/s, b up to 2/s."""
    run = write_run(tmp_path / "run", ["a", "b"], slo=SLO, concurrency=4, spec_tail=RATE_POINTS)
    ok, late = [50.0] * 16, [200.0] * 16
    base = {"headline": [10.0] * 6 + [200.0] * 2, "r1": ok, "r2": ok, "r4": ok}
    cand = {**base, "r4": late}
    write_cell(run, "a", launches(3, throughput=100.0, ttfts=base), concurrency=SAME_CONCURRENCY)
    write_cell(
        run, "b", launches(3, throughput=100.0, ttfts=cand), first=1, concurrency=SAME_CONCURRENCY
    )
    return build_model(load_run(run))


def _frontier(report: MatrixReport, cell: str) -> CellFrontier:
    f = report.cell(cell).frontier
    assert f is not None
    return f


def test_paced_loads_are_ordered_by_rate_the_unpaced_headline_after_them(
    tmp_path: Path,
) -> None:
    report = _by_rate(tmp_path)
    order = [(ld.name, ld.request_rate, ld.max_concurrency) for ld in report.loads]
    assert order == [("r1", 1.0, 4), ("r2", 2.0, 4), ("r4", 4.0, 4), ("headline", None, 4)]
    a, b = _frontier(report, "a"), _frontier(report, "b")
    # by concurrency alone all four tied, and r2 (the spec's last) was "the largest" of both
    assert a.largest is not None and a.largest.name == "r4"
    assert b.largest is not None and b.largest.name == "r2" and b.versus == "lower"
    assert b.sentence.endswith(
        "it meets the SLO in every launch up to r2 (rate 2/s, concurrency 4), the baseline a "
        "in every launch up to r4 (rate 4/s, concurrency 4); its goodput at the headline load is "
        "equivalent (+0.0% [+0.0%, +0.0%])."
    )


def test_a_load_s_rate_is_in_its_labels_and_in_matrix_json(tmp_path: Path) -> None:
    report = _by_rate(tmp_path)
    md = render_md.render(report)
    assert "| b | r1 (rate 1/s, c=4) |" in md and "| b | headline (c=4) |" in md
    assert "mix request rates" not in md  # one concurrency: the rates order the loads
    html = render_html.render(report)
    assert "r2 (rate 2/s, c=4)" in html
    data: Any = report.to_dict()
    frontier = next(c for c in data["cells"] if c["id"] == "a")["frontier"]
    assert [(p["load"], p["request_rate"]) for p in frontier] == [
        ("r1", 1.0),
        ("r2", 2.0),
        ("r4", 4.0),
        ("headline", None),
    ]


def test_rates_and_concurrencies_mixed_are_ordered_by_rule_and_said_so(tmp_path: Path) -> None:
    """An unpaced headline at concurrency 1, an unpaced c4, and r8: 8/s at concurrency 16."""
    tail = (
        'request_rate = inf\n\n[[bench.points]]\nname = "c4"\nmax_concurrency = 4\n'
        '\n[[bench.points]]\nname = "r8"\nrequest_rate = 8\nmax_concurrency = 16\n'
    )
    run = write_run(tmp_path / "run", ["a"], slo=SLO, spec_tail=tail)
    ttfts = {"headline": [10.0] * 8, "c4": [50.0] * 16, "r8": [50.0] * 16}
    write_cell(run, "a", launches(2, throughput=100.0, ttfts=ttfts), concurrency={"r8": 16})
    report = build_model(load_run(run))
    assert [ld.name for ld in report.loads] == ["r8", "headline", "c4"]
    note = (
        "These loads mix request rates and concurrencies: r8 (rate 8/s, concurrency 16) "
        "comes before the headline load (concurrency 1) by its rate, though either may "
        "offer the server more load; the largest load within the SLO is the last one met "
        "in this order."
    )
    assert note in render_md.render(report)
    assert note in render_html.render(report)


def test_bench_json_records_each_point_s_rate_and_the_frontier_reads_it(tmp_path: Path) -> None:
    """bench.json says at what rate each point was sent (absent: unpaced), so a results
    directory whose spec.toml is gone or unreadable still orders and labels its loads."""
    bench = Bench(
        points=(
            LoadPoint(name="r3", workload=Workload(request_rate=3.0, max_concurrency=4)),
            LoadPoint(name="c4", workload=Workload(max_concurrency=4)),
        )
    )
    points = _summarize(BenchData(), [], bench).points or {}
    assert points["r3"].request_rate == 3.0 and points["c4"].request_rate is None
    assert "request_rate" not in points["c4"].to_dict()  # unpaced: left out, as null fields are
    assert points["r3"].to_dict()["request_rate"] == 3.0

    run = write_run(tmp_path / "run", ["a"], slo=SLO, concurrency=4)
    (run / "spec.toml").write_text("not toml [")  # the spec's rates cannot be read
    ttfts = {"headline": [10.0] * 8, "r3": [50.0] * 16}
    write_cell(run, "a", launches(2, throughput=100.0, ttfts=ttfts), concurrency={"r3": 4})
    path = run / "cells/a/bench.json"
    doc = json.loads(path.read_text())
    doc["data"]["points"]["r3"]["request_rate"] = 3.0
    path.write_text(json.dumps(doc))
    loads = {ld.name: ld for ld in build_model(load_run(run)).loads}
    assert loads["r3"].request_rate == 3.0 and loads["r3"].label() == "r3 (rate 3/s, concurrency 4)"
