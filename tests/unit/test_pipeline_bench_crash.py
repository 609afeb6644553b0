"""A crash of the bench phase's own set-up (not of one cell's launch) becomes every
unfinished cell's status, as build's and check's do."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from stackmatrix.bench import phase as bench_phase_mod
from stackmatrix.bench import workload
from stackmatrix.errors import StackmatrixError
from stackmatrix.pipeline import RunOptions, bench_phase, select_cells
from stackmatrix.results import INTERNAL_ERROR, PhaseResult, RunDir, Status, now_iso
from stackmatrix.specfile import load_spec

SPEC = """
name = "bench-crash"
baseline = "a"

[[cell]]
id = "a"
backend = "current"

[[cell]]
id = "b"
backend = "current"

[bench]
engine = "transformers"
model = "m"
launches = 1
"""


def _run(tmp_path: Path) -> tuple[RunDir, RunOptions]:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    opts = RunOptions(spec=load_spec(spec), output=tmp_path / "run", reports_dir=tmp_path)
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    return run, opts


def _said() -> tuple[list[str], object]:
    lines: list[str] = []
    return lines, lambda phase, cell, msg: lines.append(f"{phase} {cell} {msg}")


def test_a_full_disk_writing_the_workload_is_each_cell_s_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, opts = _run(tmp_path)
    # b finished in an earlier run of these results: its result stands
    done = PhaseResult(
        phase="bench",
        cell="b",
        status=Status.OK,
        inputs_hash="x",
        started=now_iso(),
        finished=now_iso(),
    )
    run.cell("b").write(done)

    def full(*args: object, **kw: object) -> str:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bench_phase_mod, "_write_workload", full)
    lines, say = _said()
    results = bench_phase(run, opts, select_cells(opts.spec, []), say)  # type: ignore[arg-type]
    a = results["a"]
    assert a.status is Status.FAILED and a.code == INTERNAL_ERROR
    assert a.message.startswith("OSError: [Errno 28] No space left on device")
    assert "traceback in bench.log" in a.message
    assert "Traceback" in (run.path / "cells" / "a" / "bench.log").read_text()
    assert json.loads((run.path / "cells" / "a" / "bench.json").read_text())["status"] == "failed"
    assert results["b"].status is Status.OK  # finished work is kept
    assert any(line.startswith("bench a bench failed: OSError") for line in lines)


def test_bad_input_in_the_set_up_is_said_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, opts = _run(tmp_path)

    def missing(*args: object, **kw: object) -> object:
        raise StackmatrixError("workload dataset prompts.jsonl: no such file")

    monkeypatch.setattr(workload, "generate", missing)
    _, say = _said()
    results = bench_phase(run, opts, select_cells(opts.spec, []), say)  # type: ignore[arg-type]
    for cid in ("a", "b"):
        assert results[cid].status is Status.FAILED and results[cid].code == "bench_failed"
        assert results[cid].message == "workload dataset prompts.jsonl: no such file"
        assert not (run.path / "cells" / cid / "bench.log").exists()  # no traceback to see
