"""The per-cell phase runner and run.json, fast and without a build."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from stackmatrix import _proc
from stackmatrix.pipeline import RunOptions, select_cells, write_run_files
from stackmatrix.pipeline.rundir import mark_finished
from stackmatrix.pipeline.runner import reusable, run_phase
from stackmatrix.records import RunRecord
from stackmatrix.results import INTERNAL_ERROR, CellDir, PhaseResult, PhaseRun, RunDir, Status
from stackmatrix.spec import load_spec

SPEC = 'name = "s"\nbaseline = "a"\n\n[[cell]]\nid = "a"\nbackend = "current"\n'


def _cell(tmp_path: Path) -> CellDir:
    return RunDir(tmp_path).cell("a")


def _result(status: Status, inputs: str = "h1", finished: str = "t") -> PhaseResult:
    return PhaseResult(
        phase="build", cell="a", status=status, inputs_hash=inputs, finished=finished
    )


def _rounded(result: PhaseResult) -> PhaseResult:
    """As written: durations to the millisecond."""
    return dataclasses.replace(result, duration_s=round(result.duration_s, 3))


def test_a_result_is_reused_only_when_complete_and_of_the_same_inputs(tmp_path: Path) -> None:
    cell = _cell(tmp_path)
    assert reusable(cell, "build", "h1") is None  # nothing yet
    cell.write(_result(Status.OK))
    assert reusable(cell, "build", "h1") is not None
    assert reusable(cell, "build", "h2") is None  # the cell or its inputs changed
    for status in (Status.FAILED, Status.INTERRUPTED):
        cell.write(_result(status))
        assert reusable(cell, "build", "h1") is None  # redone on resume
    cell.write(_result(Status.OK, finished=""))
    assert reusable(cell, "build", "h1") is None  # never finished
    cell.result_path("build").write_text("{not json")
    assert reusable(cell, "build", "h1") is None  # corrupt: redone, not fatal


def test_a_phase_is_marked_interrupted_while_it_runs_and_then_recorded(tmp_path: Path) -> None:
    cell = _cell(tmp_path)
    seen: list[PhaseResult | None] = []

    def body() -> PhaseResult:
        seen.append(cell.read("build"))
        return _result(Status.OK, finished="")

    result = run_phase(cell, "build", "h1", body)
    (during,) = seen
    assert during is not None and during.status is Status.INTERRUPTED
    assert during.message == "in progress" and during.inputs_hash == "h1"
    assert result.status is Status.OK and result.started and result.finished
    assert cell.read("build") == _rounded(result)


def test_a_crash_becomes_a_failed_status_with_its_traceback_in_the_log(tmp_path: Path) -> None:
    cell = _cell(tmp_path)

    def body() -> PhaseResult:
        raise OSError(28, "No space left on device")

    result = run_phase(cell, "check", "h1", body)
    assert result.status is Status.FAILED and result.code == INTERNAL_ERROR
    assert result.message == (
        "OSError: [Errno 28] No space left on device (traceback in check.log)"
    )
    assert "Traceback" in cell.log_path("check").read_text()
    assert cell.read("check") == _rounded(result)


def test_after_ctrl_c_a_phase_is_interrupted_whatever_it_returned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_proc, "interrupted", lambda: True)
    result = run_phase(_cell(tmp_path), "build", "h1", lambda: _result(Status.FAILED))
    assert result.status is Status.INTERRUPTED and result.code == "interrupted"


def _opts(tmp_path: Path) -> RunOptions:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    return RunOptions(spec=load_spec(spec), output=tmp_path / "run", argv=("stackmatrix", "run"))


def test_run_json_keeps_created_run_id_and_cells_across_invocations(tmp_path: Path) -> None:
    opts = _opts(tmp_path)
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.write_json("run.json", {"created": "t0", "run_id": "ci:7", "cells": ["old"]})
    write_run_files(run, opts, select_cells(opts.spec, ()))
    record = RunRecord.read(run)
    assert (record.created, record.run_id, record.cells) == ("t0", "ci:7", ("a", "old"))
    assert record.spec_name == "s" and record.baseline == "a" and record.finished is None
    assert record.report.headline == "output_throughput" and record.argv == ("stackmatrix", "run")
    mark_finished(run)
    raw = json.loads(run.run_json.read_text())
    assert raw["schema_version"] == 1 and raw["finished"] and raw["created"] == "t0"
    assert list(raw)[:3] == ["schema_version", "spec_name", "spec_path"]


def test_one_phase_run_records_every_outcome(tmp_path: Path) -> None:
    """results.PhaseRun, which build, check (run_phase) and the bench (per cell) share:
    interrupted on disk from the start, a crash failed with its traceback in the
    phase's log, Ctrl-C interrupted with code and advice, an end stamped."""
    cell = _cell(tmp_path)
    run = PhaseRun.begin(cell, "bench", "h1")
    run.save()
    on_disk = cell.read("bench")
    assert on_disk is not None and on_disk.status is Status.INTERRUPTED and on_disk.started
    try:
        raise OSError(28, "No space left on device")
    except OSError as exc:
        crashed = run.crash(exc, "launch 2")
    assert (crashed.status, crashed.code) == (Status.FAILED, INTERNAL_ERROR)
    assert crashed.message.startswith("launch 2: OSError: [Errno 28] No space left on device")
    assert "Traceback" in cell.log_path("bench").read_text() and crashed.finished
    stopped = PhaseRun.begin(cell, "check", "h1").interrupt()
    assert (stopped.status, stopped.code) == (Status.INTERRUPTED, "interrupted")
    read = cell.read("check")
    assert read is not None and (read.status, read.code) == (stopped.status, stopped.code)
