"""SLO, goodput and the frontier on hand-built results directories: goodput counting,
attainment, the frontier's order and band, the largest load that meets the SLO, the
paired goodput verdict, and the one sentence that says a cell is faster at the
headline and slower at the SLO."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from tests.unit.report._slo_results import Round, launches, write_cell, write_run

from stackmatrix.cli import main
from stackmatrix.report import render_html, render_md
from stackmatrix.report.frontier import CellFrontier
from stackmatrix.report.load import load_run
from stackmatrix.report.matrix import MatrixReport
from stackmatrix.report.model import build_model
from stackmatrix.report.slo import request_meets, round_slo
from stackmatrix.spec_model import SloBound
from stackmatrix.stats.verdict import Verdict

SLO = {"ttft_p99_ms": 100.0, "tpot_p99_ms": 10.0}
BOUNDS = (
    SloBound(kind="ttft", percentile=99, ms=100.0),
    SloBound(kind="tpot", percentile=99, ms=10.0),
)
T_975_2 = 4.302652729749464  # t quantile 0.975 with 2 degrees of freedom


def _story(tmp_path: Path, *, slo: dict[str, float] | None = SLO) -> Path:
    """a (the baseline) meets the SLO up to c4; b is 10% faster at the headline but misses
    the TTFT bound at c4 (two of 16 requests take 150 ms). Points written c4 first."""
    run = write_run(tmp_path / "run", ["a", "b"], slo=slo)
    base = {"headline": [10.0] * 8, "c4": [80.0] * 16, "c2": [50.0] * 16}
    cand = {"headline": [10.0] * 8, "c4": [90.0] * 14 + [150.0] * 2, "c2": [60.0] * 16}
    write_cell(run, "a", launches(3, throughput=100.0, ttfts=base, step=0.05), first=0)
    write_cell(run, "b", launches(3, throughput=110.0, ttfts=cand, step=0.05), first=1)
    return run


def _report(run: Path) -> MatrixReport:
    return build_model(load_run(run))


def _frontier(report: MatrixReport, cell: str) -> CellFrontier:
    f = report.cell(cell).frontier
    assert f is not None
    return f


def test_a_request_meets_the_slo_when_each_of_its_own_latencies_is_within_its_bound() -> None:
    ok = {
        "ok": True,
        "error": None,
        "ttft_s": 0.05,
        "e2e_s": 0.05 + 15 * 0.002,
        "output_tokens": 16,
        "itl_s": [0.002] * 15,
    }
    assert request_meets(ok, BOUNDS)
    assert not request_meets({**ok, "ttft_s": 0.101, "e2e_s": 0.131}, BOUNDS)  # TTFT over
    assert not request_meets({**ok, "e2e_s": 0.05 + 15 * 0.011}, BOUNDS)  # TPOT 11 ms
    assert not request_meets({**ok, "ok": False, "error": "HTTP 500"}, BOUNDS)
    assert not request_meets({**ok, "ttft_s": None}, BOUNDS)  # nothing to show it met
    assert not request_meets({**ok, "ttft_s": math.nan}, BOUNDS)
    # one token: no TPOT to exceed
    assert request_meets({**ok, "output_tokens": 1, "e2e_s": 9.0, "itl_s": []}, BOUNDS[1:])
    # an ITL bound holds the request's own gaps to it at the bound's percentile
    itl = (SloBound(kind="itl", percentile=50, ms=5.0),)
    assert request_meets({**ok, "itl_s": [0.001] * 10 + [0.5] * 5}, itl)
    assert not request_meets({**ok, "itl_s": [0.001] * 5 + [0.5] * 10}, itl)


def test_goodput_counts_the_requests_within_every_bound_per_second_of_the_round(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path / "run", ["a"], slo=SLO)
    rnd = Round(throughput=50.0, ttfts_ms=[10.0] * 6 + [200.0] * 3, errors=1, duration_s=2.0)
    write_cell(run, "a", [{"headline": [rnd]}])
    cell = load_run(run).cells[0]
    judged = round_slo(cell, cell.bench.launches[0].rounds[0], BOUNDS)
    assert judged is not None
    assert (judged.sent, judged.good, judged.goodput) == (10, 6, 3.0)
    point = _frontier(_report(run), "a").points[0]
    assert point.attainment == pytest.approx(0.6)
    assert point.goodput is not None and point.goodput.median == pytest.approx(3.0)


def test_attainment_and_whether_each_load_meets_the_slo(tmp_path: Path) -> None:
    report = _report(_story(tmp_path))
    b = {p.load.name: p for p in _frontier(report, "b").points}
    assert b["c4"].attainment == pytest.approx(14 / 16)
    assert b["c4"].slo_met is False and b["c4"].met_launches == 0 and not b["c4"].holds
    assert b["c4"].figures["ttft_p99_ms"] == pytest.approx(150.0)
    assert b["c2"].slo_met is True and b["c2"].met_launches == 3 and b["c2"].holds
    assert b["headline"].attainment == 1.0
    # goodput at c4: the 14 requests within the bounds, per 2 s
    assert b["c4"].goodput is not None and b["c4"].goodput.median == pytest.approx(7.0)


def test_the_frontier_is_ordered_by_concurrency_with_the_headline_s_t_interval(
    tmp_path: Path,
) -> None:
    report = _report(_story(tmp_path))
    a = _frontier(report, "a")
    assert [(p.load.name, p.load.max_concurrency) for p in a.points] == [
        ("headline", 1),
        ("c2", 2),
        ("c4", 4),
    ]
    # each launch is the median of its rounds (100 and 101 times 1, 1.05, 1.10)
    values = [100.5 * (1 + 0.05 * k) for k in range(3)]
    logs = [math.log(v) for v in values]
    half = T_975_2 * statistics.stdev(logs) / math.sqrt(3)
    band = a.points[0].throughput
    assert band is not None and band.low is not None and band.high is not None
    assert band.median == pytest.approx(values[1])
    assert band.low == pytest.approx(math.exp(statistics.fmean(logs) - half))
    assert band.high == pytest.approx(math.exp(statistics.fmean(logs) + half))
    assert a.points[0].per_user is not None and a.points[0].per_user.median == pytest.approx(500.0)


def test_the_largest_load_that_meets_the_slo_in_every_launch_against_the_baseline_s(
    tmp_path: Path,
) -> None:
    report = _report(_story(tmp_path))
    a, b = _frontier(report, "a"), _frontier(report, "b")
    assert a.largest is not None and a.largest.name == "c4"
    assert b.largest is not None and b.largest.name == "c2"
    assert b.versus == "lower" and a.versus is None


def test_one_launch_that_misses_the_slo_lowers_the_largest_load(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", ["a", "b"], slo=SLO)
    good = {"headline": [10.0] * 8, "c2": [50.0] * 16, "c4": [80.0] * 16}
    base = launches(3, throughput=100.0, ttfts=good)
    base[2] = {**base[2], "c4": [Round(throughput=100.0, ttfts_ms=[200.0] * 16)] * 2}
    write_cell(run, "a", base)
    write_cell(run, "b", launches(3, throughput=100.0, ttfts=good), first=1)
    report = _report(run)
    a, b = _frontier(report, "a"), _frontier(report, "b")
    assert {p.load.name: p.met_launches for p in a.points}["c4"] == 2
    assert a.largest is not None and a.largest.name == "c2"
    assert b.largest is not None and b.largest.name == "c4" and b.versus == "higher"


def test_faster_at_the_headline_and_slower_at_the_slo_in_one_sentence(tmp_path: Path) -> None:
    run = _story(tmp_path)
    report = _report(run)
    b = _frontier(report, "b")
    assert report.cell("b").verdict is Verdict.FASTER
    assert b.sentence == (
        "b is faster at the headline load (+10.0% [+10.0%, +10.0%] output tok/s) but slower "
        "at the SLO: it meets the SLO in every launch up to c2 (concurrency 2), the baseline a "
        "in every launch up to c4 (concurrency 4); its goodput at the headline load is equivalent "
        "(+0.0% [+0.0%, +0.0%])."
    )
    assert _frontier(report, "a").sentence == (
        "a (baseline) meets the SLO in every launch up to c4 (concurrency 4)."
    )
    md = render_md.render(report)
    assert f"- {b.sentence}" in md
    assert "| b | c4 (c=4) |" in md and "| 88% | 150.0 | 2.00 | no, 0/3 launches |" in md
    html = render_html.render(report)
    assert "<h2>SLO, goodput and the frontier</h2>" in html
    assert "misses the SLO (ring)" in html and 'class="load missed"' in html
    assert "TPOT p99 ≤ 10 ms: 100 tok/s per user at least" in html


def test_goodput_at_the_headline_is_judged_by_the_headline_s_paired_statistics(
    tmp_path: Path,
) -> None:
    """b serves the same requests in 1.6 s where a takes 2 s: 5 against 4 requests per
    second in every launch, paired by cycle."""
    run = write_run(tmp_path / "run", ["a", "b"], slo=SLO)
    ttfts = {"headline": [10.0] * 8}
    write_cell(run, "a", launches(3, throughput=100.0, ttfts=ttfts, step=0.05))
    quick = [
        {
            "headline": [
                Round(
                    throughput=100.0 * (1 + 0.05 * k),
                    ttfts_ms=[10.0] * 8,
                    duration_s=1.6 - 0.01 * k,
                )
            ]
            * 2
        }
        for k in range(3)
    ]
    write_cell(run, "b", quick, first=1)
    g = _frontier(_report(run), "b").goodput
    assert g is not None and g.verdict is Verdict.FASTER
    assert g.metric == "goodput" and g.design == "paired" and g.pairs == 3
    assert g.ratio is not None and 1.25 < g.ratio < 1.27


def test_no_request_within_the_slo_in_any_launch_is_slower_without_a_ratio(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path / "run", ["a", "b"], slo=SLO)
    write_cell(run, "a", launches(3, throughput=100.0, ttfts={"headline": [10.0] * 8}))
    write_cell(run, "b", launches(3, throughput=100.0, ttfts={"headline": [500.0] * 8}), first=1)
    report = _report(run)
    g = _frontier(report, "b").goodput
    assert g is not None and g.verdict is Verdict.SLOWER and g.ratio is None
    assert g.reason == (
        "no request met the SLO in any of 3 launches of this cell, and some did in every "
        "launch of the baseline 'a'"
    )
    b = _frontier(report, "b")
    assert b.largest is None and b.versus == "lower"
    assert "it misses the SLO at every load in at least one launch" in b.sentence
    assert b.points[0].goodput is not None and b.points[0].goodput.low is None


def test_matrix_json_carries_the_slo_the_frontier_and_goodput(tmp_path: Path) -> None:
    data: Any = _report(_story(tmp_path)).to_dict()
    assert data["slo"] == SLO
    cells = {c["id"]: c for c in data["cells"]}
    frontier = cells["b"]["frontier"]
    assert [p["load"] for p in frontier] == ["headline", "c2", "c4"]
    c4 = frontier[2]
    assert c4["max_concurrency"] == 4 and c4["slo_met"] is False and c4["slo_met_launches"] == 0
    assert c4["attainment"] == pytest.approx(0.875) and c4["throughput_per_gpu"] is None
    goodput = cells["b"]["goodput"]
    assert (
        goodput["largest_load"]["load"] == "c2" and goodput["largest_load_vs_baseline"] == "lower"
    )
    assert goodput["comparison"]["metric"] == "goodput"
    assert goodput["sentence"].startswith("b is faster at the headline load")
    assert cells["a"]["goodput"]["comparison"] is None
    json.dumps(data, allow_nan=False)


def test_without_an_slo_the_frontier_stays_and_goodput_is_not_judged(tmp_path: Path) -> None:
    report = _report(_story(tmp_path, slo=None))
    data: Any = report.to_dict()
    assert data["slo"] is None
    cell = next(c for c in data["cells"] if c["id"] == "b")
    assert [p["load"] for p in cell["frontier"]] == ["headline", "c2", "c4"]
    assert cell["goodput"] is None and cell["frontier"][0]["goodput"] is None
    md = render_md.render(report)
    assert "### SLO, goodput and the frontier" in md and "goodput req/s" not in md
    assert "SLO:" not in md


def test_without_load_points_or_an_slo_nothing_changes(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", ["a", "b"], slo=None)
    write_cell(run, "a", launches(3, throughput=100.0, ttfts={"headline": [10.0] * 8}))
    write_cell(run, "b", launches(3, throughput=100.0, ttfts={"headline": [10.0] * 8}), first=1)
    report = _report(run)
    data: Any = report.to_dict()
    assert "slo" not in data and all("frontier" not in c for c in data["cells"])
    assert "SLO, goodput" not in render_md.render(report)
    assert "SLO, goodput" not in render_html.render(report)


def test_report_slo_judges_results_whose_run_recorded_none(tmp_path: Path) -> None:
    run = _story(tmp_path, slo=None)
    out = tmp_path / "judged"
    assert (
        main(["report", str(run), "--slo", "ttft_p99_ms=100,tpot_p99_ms=10", "--output", str(out)])
        == 0
    )
    data = json.loads((out / "matrix.json").read_text())
    assert data["slo"] == SLO
    b = next(c for c in data["cells"] if c["id"] == "b")
    assert b["goodput"]["largest_load_vs_baseline"] == "lower"
    assert main(["report", str(run), "--slo", "ttft_p95_ms=100", "--output", str(out)]) == 2


@pytest.mark.parametrize("name", ["../../../outside.jsonl", "/OUTSIDE", "..", "sub/requests.jsonl"])
def test_a_requests_file_named_outside_the_cell_is_not_read(tmp_path: Path, name: str) -> None:
    """bench.json is input: a round's `requests_file` with a path in it would read a file
    outside the results (here one whose requests all meet the SLO)."""
    run = write_run(tmp_path / "run", ["a"], slo=SLO)
    write_cell(run, "a", launches(2, throughput=100.0, ttfts={"headline": [10.0] * 8}))
    outside = run.parent / "outside.jsonl"
    outside.write_text((run / "cells" / "a" / "requests-L1-R1.jsonl").read_text())
    (run / "cells" / "a" / "sub").mkdir()
    (run / "cells" / "a" / "sub" / "requests.jsonl").write_text(outside.read_text())
    bench = run / "cells" / "a" / "bench.json"
    doc = json.loads(bench.read_text())
    for launch in doc["data"]["launches"]:
        for rnd in launch["rounds"]:
            rnd["requests_file"] = name.replace("OUTSIDE", str(outside).lstrip("/"))
    bench.write_text(json.dumps(doc))
    point = _frontier(_report(run), "a").points[0]
    assert point.goodput is None and point.attainment is None
