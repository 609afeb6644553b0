"""TTFT/ITL/TPOT percentiles with their sample counts, per load, in matrix.json, md
and html; a p99.9 of fewer than 1000 samples per round is labelled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.synthetic import story_cells, write_run

from stackmatrix.bench import metrics
from stackmatrix.bench.client import RequestRecord
from stackmatrix.report import render_html, render_md
from stackmatrix.report.load import load_run
from stackmatrix.report.model import build_model

LEVELS = {"median": 10.0, "p90": 20.0, "p99": 30.0, "p999": 40.0}


def test_a_round_has_p999_and_sample_counts() -> None:
    recs = [
        RequestRecord(index=i, ttft_s=i / 1000, e2e_s=3.0, output_tokens=3, itl_s=[0.001, 0.002])
        for i in range(1, 2001)
    ]
    m = metrics.round_metrics(recs, 10.0)
    assert (m["ttft_samples"], m["itl_samples"], m["tpot_samples"]) == (2000, 4000, 2000)
    assert m["ttft_p999_ms"] == metrics.percentile([float(i) for i in range(1, 2001)], 99.9)
    p999, p99, p90 = m["ttft_p999_ms"], m["ttft_p99_ms"], m["ttft_p90_ms"]
    assert p999 is not None and p99 is not None and p90 is not None
    assert p999 > p99 > p90
    assert metrics.round_metrics([], 1.0)["ttft_samples"] == 0


def _run(tmp_path: Path, samples: dict[str, int], point: bool = False) -> Path:
    """The story's results with latency figures in every round of every cell (scaled
    per cell), and a load point `c8` with the same rounds where `point`."""
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    for scale, path in enumerate(sorted(run.glob("cells/*/bench.json")), 1):
        doc = json.loads(path.read_text())
        for launch in doc["data"].get("launches", []):
            for rnd in launch["rounds"]:
                for kind, n in samples.items():
                    for stat, v in LEVELS.items():
                        rnd["metrics"][f"{kind}_{stat}_ms"] = v * scale
                    rnd["metrics"][f"{kind}_samples"] = n
            if point:
                launch["points"] = {"c8": {"rounds": launch["rounds"]}}
        if point and doc["data"].get("launches"):
            doc["data"]["points"] = {"c8": {"metric": "output_throughput", "max_concurrency": 8}}
        path.write_text(json.dumps(doc))
    return run


def test_percentiles_per_cell_with_counts_and_the_few_samples_label(tmp_path: Path) -> None:
    run = _run(tmp_path, {"ttft": 64, "itl": 4032, "tpot": 64})
    report = build_model(load_run(run))
    data: Any = report.to_dict()
    rows = {r["cell"]: r for r in data["latency"]}
    assert set(rows) == {c.id for c in story_cells() if c.build_status.value == "ok"}
    first = rows[sorted(rows)[0]]
    assert first["ttft"] == {
        "p50_ms": 10.0,
        "p90_ms": 20.0,
        "p99_ms": 30.0,
        "p99.9_ms": 40.0,
        "samples_per_round": 64,
        "p99.9_few_samples": True,
    }
    assert first["itl"]["samples_per_round"] == 4032 and not first["itl"]["p99.9_few_samples"]
    md = render_md.render(report)
    assert "#### Latency percentiles (ms): p50 / p90 / p99 / p99.9, samples per round" in md
    assert "| 10.0 / 20.0 / 30.0 / 40.0† | 64 | 10.0 / 20.0 / 30.0 / 40.0 | 4,032 |" in md
    assert "† a p99.9 of fewer than 1,000 samples per round" in md
    html = render_html.render(report)
    assert "Latency percentiles (ms)" in html and "40.0†" in html


def test_many_samples_have_no_label(tmp_path: Path) -> None:
    report = build_model(load_run(_run(tmp_path, {"ttft": 2000, "itl": 9000, "tpot": 2000})))
    md = render_md.render(report)
    assert "Latency percentiles" in md and "†" not in md


def test_a_load_point_has_its_own_table(tmp_path: Path) -> None:
    report = build_model(load_run(_run(tmp_path, {"ttft": 64, "itl": 64, "tpot": 64}, True)))
    data: Any = report.to_dict()
    [point] = data["points"]
    assert point["latency"] and point["latency"][0]["tpot"]["p99.9_ms"] == 40.0
    md = render_md.render(report)
    assert "##### Latency percentiles (ms)" in md


def test_results_without_p999_have_no_table(tmp_path: Path) -> None:
    report = build_model(load_run(_run(tmp_path, {})))
    assert "latency" not in report.to_dict()
    assert "Latency percentiles" not in render_md.render(report)
