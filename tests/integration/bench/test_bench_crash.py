"""A crash of stackmatrix's own code during one cell's launch (here a full disk while
writing its requests file) becomes that cell's recorded status, with the traceback in
its bench.log; the other cell is still measured, and the run goes on."""

from __future__ import annotations

import errno
import sys
from pathlib import Path
from typing import Any

import pytest

from stackmatrix.bench import workload
from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.built_environment import Environment
from stackmatrix.results import INTERNAL_ERROR, RunDir, Status
from stackmatrix.spec_model import Bench, Cell, Spec, Workload

pytestmark = pytest.mark.integration
FAKE = Path(__file__).with_name("fake_engine.py")


def test_a_crash_in_one_cells_launch_fails_that_cell_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = workload.write_requests

    def disk_full_for_b(path: Path, records: Any) -> None:
        if path.parent.name == "b":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, records)

    monkeypatch.setattr(workload, "write_requests", disk_full_for_b)
    spec = Spec(
        name="crash",
        path=str(tmp_path / "spec.toml"),
        baseline="a",
        cells=(Cell(id="a"), Cell(id="b")),
        bench=Bench(
            engine="transformers",
            model="fake-model",
            launches=2,
            rounds=1,
            ready_timeout_s=20.0,
            workload=Workload(
                input_len=8, output_len=8, num_prompts=3, warmup=0, request_timeout_s=20.0
            ),
        ),
    )
    env = Environment(backend="venv", python=(sys.executable, str(FAKE)), env={})
    run = RunDir(tmp_path / "run")
    results = run_bench_phase(
        spec, run, ["a", "b"], environments={"a": env, "b": env}, order="interleaved"
    )
    b = results["b"]
    assert (b.status, b.code) == (Status.FAILED, INTERNAL_ERROR)
    assert b.message.startswith("launch 1: OSError: [Errno 28] No space left on device")
    assert "traceback in bench.log" in b.message
    log = (run.path / "cells" / "b" / "bench.log").read_text()
    assert "Traceback" in log and "disk_full_for_b" in log
    recorded = run.cell("b").read("bench")
    assert recorded is not None and recorded.status is Status.FAILED  # recorded, not returned
    a = results["a"]
    assert a.status is Status.OK and len(a.data["launches"]) == 2
