"""A server's start-up (from its start to ready) per launch, and a cell whose servers
take much longer to be ready than the baseline's."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.synthetic import story_cells, write_run

from stackmatrix.report.build import build_report
from stackmatrix.report.load import load_run
from stackmatrix.report.model import build_model


def _with_ready(run: Path, ready: dict[str, list[float]]) -> None:
    for cid, values in ready.items():
        path = run / "cells" / cid / "bench.json"
        doc = json.loads(path.read_text())
        for launch, value in zip(doc["data"]["launches"], values, strict=False):
            launch["ready_s"] = value
        path.write_text(json.dumps(doc))


def _run(tmp_path: Path, ready: dict[str, list[float]]) -> Path:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    _with_ready(run, ready)
    return run


def test_a_slow_start_against_the_baseline_is_a_note(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        {"cu128": [84.0, 86.5, 85.0, 90.0, 85.5], "cu130": [171.0, 175.0, 169.5, 180.0, 172.0]},
    )
    model = build_model(load_run(run))
    notes = [n for n in model.notes if "to be ready" in n]
    assert notes == [
        "cu130: its servers took 172 s to be ready (median of 5 launches; 170 s at the "
        "fastest) against 86 s (84 s) for the baseline cu128: a start-up cost (JIT compiles, "
        "CUDA graph captures, loading) that every new replica pays"
    ]
    row = model.cell("cu130").launches[0]
    assert row.ready_s == 171.0 and row.to_dict()["ready_s"] == 171.0


def test_start_up_within_one_and_a_half_times_the_baseline_is_not_a_note(tmp_path: Path) -> None:
    # 1.4x, and 2x but only 6 s more: neither is worth a note
    run = _run(tmp_path, {"cu128": [6.0] * 5, "cu130": [12.0] * 5})
    assert not [n for n in build_model(load_run(run)).notes if "to be ready" in n]
    run = _run(tmp_path / "b", {"cu128": [85.0] * 5, "cu130": [119.0] * 5})
    assert not [n for n in build_model(load_run(run)).notes if "to be ready" in n]


def test_cold_starts_that_fell_to_one_cell_are_not_a_note(tmp_path: Path) -> None:
    # an A/A pair of triton cells on an H200 (reports/examples/h200-sglang-aa): the run
    # moved to a second host after two cycles, and the first start on each host was cold
    # (flashinfer's JIT on the first, caches on the second); by chance two of the three
    # cold starts were the second cell's, so its median is 1.6x the baseline's and 21 s
    # more, while its fastest start is the baseline's
    ready = {"cu128": [134.2, 51.6, 36.5, 34.0, 34.5], "cu130": [68.1, 58.1, 77.1, 33.5, 33.5]}
    run = _run(tmp_path, ready)
    assert not [n for n in build_model(load_run(run)).notes if "to be ready" in n]
    # the same cell slower at its fastest too is a note
    ready["cu130"] = [v + 40 for v in ready["cu130"]]
    run = _run(tmp_path / "b", ready)
    assert [n for n in build_model(load_run(run)).notes if "to be ready" in n]


def test_the_launch_tables_show_start_up_only_where_it_was_measured(tmp_path: Path) -> None:
    run = _run(tmp_path, {"cu130": [171.0, 175.0, 169.5, 180.0, 172.0]})
    build_report(run)
    md = (run / "matrix.md").read_text()
    assert "| launch | status | ready | median | rounds | note |" in md
    assert "| L0 | ok | 171 s |" in md  # the synthetic launches count from 0
    assert "| launch | status | median | rounds | note |" in md  # cells without it
    html = (run / "matrix.html").read_text()
    assert "<th>ready</th>" in html and '<td class="num">171 s</td>' in html
    assert "ready_s" not in json.dumps(json.loads((run / "matrix.json").read_text())["cells"][0])
