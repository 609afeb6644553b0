"""The protocol's fine print is true of the run it describes: minutes saved only where
the design chose to stop, GPU time only where a cell holds a GPU, the error spending as
the looks used it, and a cell's own drift named instead of said to be cancelled."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.support.synthetic import SyntheticCell, write_run

from stackmatrix.report.load import load_run
from stackmatrix.report.protocol import protocol
from stackmatrix.results import Status
from stackmatrix.stats.verdict import Thresholds

PLAN = {"min": 3, "max": 5, "looks": 3}


def _run(
    tmp_path: Path,
    *,
    stopped: str | None,
    gpus: int,
    bench_status: Status = Status.OK,
    drift: float = 0.0,
) -> Path:
    cells = (
        SyntheticCell(
            id="a",
            definition={"python": "3.12"},
            throughput=100.0,
            launches=3,
            rounds=2,
            launch_noise=0.001,
        ),
        SyntheticCell(
            id="b",
            definition={"python": "3.12"},
            throughput=100.0,
            launches=3,
            rounds=2,
            launch_noise=0.001,
            bench_status=bench_status,
        ),
    )
    run = write_run(tmp_path / "run", spec_name="p", baseline="a", cells=cells, seed=3)
    for cid in ("a", "b"):
        path = run / "cells" / cid / "bench.json"
        doc = json.loads(path.read_text())
        if not doc["data"]:
            continue  # a failed bench: no launches
        for k, launch in enumerate(doc["data"]["launches"]):
            launch["started"] = f"2026-01-01T00:{10 * k:02d}:00+00:00"
            launch["finished"] = f"2026-01-01T00:{10 * k + 2:02d}:00+00:00"  # 2 minutes
            launch["index"] = k + 1
            if cid == "b" and drift:
                for r in launch["rounds"]:
                    r["metrics"]["output_throughput"] *= (1 + drift) ** k
        doc["data"]["launch_plan"] = {**PLAN, "launches": 3} | (
            {"stopped": stopped} if stopped else {}
        )
        path.write_text(json.dumps(doc))
    plan = json.loads((run / "plan.json").read_text())
    for entry in plan["cells"]:
        entry["definition"]["gpus"] = gpus
    (run / "plan.json").write_text(json.dumps(plan))
    return run


def _sentences(run: Path) -> str:
    results = load_run(run)
    proto = protocol(results.cells, "a", "output_throughput", thresholds=Thresholds(plan=(3, 5)))
    assert proto is not None
    return " ".join(proto.sentences())


def test_minutes_are_saved_only_by_a_stop_the_design_chose(tmp_path: Path) -> None:
    said = _sentences(_run(tmp_path / "d", stopped="decided", gpus=1))
    # 2 cells x (5 - 3) launches not run x 2 minutes each
    assert "Launch time: 12.0 GPU-minutes, about 8.0 saved by the launches the design" in said
    interrupted = _sentences(_run(tmp_path / "i", stopped=None, gpus=1))
    assert "(not finished)" in interrupted and "saved" not in interrupted


def test_a_failed_bench_saves_nothing(tmp_path: Path) -> None:
    said = _sentences(_run(tmp_path, stopped="decided", gpus=1, bench_status=Status.FAILED))
    assert "about 4.0 saved" in said  # the baseline's two launches only


def test_no_gpu_minutes_on_a_run_without_a_gpu(tmp_path: Path) -> None:
    said = _sentences(_run(tmp_path, stopped="decided", gpus=0))
    assert "GPU" not in said.replace("GPU-minutes", "GPU")[: said.find("Launch time")]
    assert "Launch time: 12.0 minutes (no GPU)" in said and "GPU-minutes" not in said


def test_the_looks_are_described_by_their_spending(tmp_path: Path) -> None:
    said = _sentences(_run(tmp_path, stopped="decided", gpus=1))
    th = Thresholds(plan=(3, 5))
    assert "alpha /" not in said
    assert f"level of {th.level(3):.1%} at the first look, {th.level(5):.1%} at the last" in said


def test_a_cell_that_drifts_on_its_own_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path, stopped="decided", gpus=1, drift=-0.03)
    # four launches per cell: a cell's own slope needs four
    for cid in ("a", "b"):
        path = run / "cells" / cid / "bench.json"
        doc = json.loads(path.read_text())
        extra = json.loads(json.dumps(doc["data"]["launches"][-1]))
        extra["index"] = 4
        extra["started"], extra["finished"] = (
            "2026-01-01T00:30:00+00:00",
            "2026-01-01T00:32:00+00:00",
        )
        if cid == "b":
            for r in extra["rounds"]:
                r["metrics"]["output_throughput"] *= 0.97
        doc["data"]["launches"].append(extra)
        path.write_text(json.dumps(doc))
    said = _sentences(run)
    assert re.search(r"Cells that drifted on their own: `b` -[23]\.\d\d% per cycle \[-", said)
    assert "`a`" not in said
    assert "cancels only the drift the cells share" in said
    assert "keep it out of the verdicts" not in said


def test_settings_are_read_only_from_measured_launches_logs(tmp_path: Path) -> None:
    """An interrupted launch's few log lines (h200-verdicts' server-L6.log.gz) and a
    warm-up's describe no measurement: the facts compared between cells skip them."""
    run = _run(tmp_path, stopped="decided", gpus=1)
    cell = run / "cells" / "b"
    (cell / "server-L9.log").write_text("interrupted launch\n")
    (cell / "server-LW1.log").write_text("warm-up launch\n")
    [b] = [c for c in load_run(run).cells if c.id == "b"]
    names = [p.name for p in b.measured_server_logs()]
    # _run numbers the launches 1 to 3; the synthetic logs are L0 to L2
    assert names == ["server-L1.log", "server-L2.log"]
    assert "server-L9.log" in [p.name for p in b.server_logs()]


def test_the_rounds_column_gives_the_rounds_run() -> None:
    from types import SimpleNamespace

    from stackmatrix.report.fmt import shape_text

    def launch(n: int) -> SimpleNamespace:
        return SimpleNamespace(rounds=(1.0,) * n)

    assert shape_text([launch(2), launch(2)]) == "2 x 2"
    assert shape_text([launch(2), launch(7), launch(3)]) == "3 x 2-7"
    assert shape_text([launch(2), launch(7)], "x") == "2x2-7"
