"""The per-cell phase runner and run.json, fast and without a build."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from stackmatrix import _proc
from stackmatrix.findings import Finding, Severity
from stackmatrix.outcome import Fail, Outcome, Skip, apply, write
from stackmatrix.pipeline import RunOptions, select_cells, write_run_files
from stackmatrix.pipeline.rundir import mark_finished
from stackmatrix.pipeline.runner import reusable, run_phase
from stackmatrix.records import RunRecord
from stackmatrix.results import INTERNAL_ERROR, CellDir, PhaseResult, PhaseRun, RunDir, Status
from stackmatrix.specfile import load_spec

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


def _raising(said: BaseException) -> Callable[[], PhaseResult]:
    def body() -> PhaseResult:
        raise said

    return body


def test_a_body_that_raises_skip_is_skipped_with_its_code_and_message(tmp_path: Path) -> None:
    cell = _cell(tmp_path)
    result = run_phase(cell, "check", "h1", _raising(Skip("not_built", "nothing to check")))
    assert (result.status, result.code) == (Status.SKIPPED, "not_built")
    assert result.message == "nothing to check" and result.inputs_hash == "h1"
    assert result.started and result.finished and not result.findings and not result.data
    assert cell.read("check") == _rounded(result)
    assert reusable(cell, "check", "h1") is not None  # a skip stands on resume
    assert not cell.log_path("check").exists()  # not a crash: no traceback


def test_a_body_that_raises_fail_is_failed_with_its_findings_and_data(tmp_path: Path) -> None:
    cell = _cell(tmp_path)
    finding = Finding(
        code="SM-RESOLVE-FAILED",
        severity=Severity.FAIL,
        cell="a",
        subject="torch==9",
        message="no such version",
    )
    said = Fail(
        "resolution_failed", "uv said no", findings=(finding,), data={"timings": {"compile": 1.5}}
    )
    result = run_phase(cell, "build", "h1", _raising(said))
    assert (result.status, result.code) == (Status.FAILED, "resolution_failed")
    assert result.message == "uv said no" and result.findings == [finding]
    assert result.data == {"timings": {"compile": 1.5}} and result.finished
    assert cell.read("build") == _rounded(result)
    assert reusable(cell, "build", "h1") is None  # a failure is redone on resume
    assert not cell.log_path("build").exists()


def test_after_ctrl_c_a_skip_or_a_fail_is_interrupted_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_proc, "interrupted", lambda: True)
    for said in (Skip("no_gpu", "none here"), Fail("build_failed", "killed")):
        result = run_phase(_cell(tmp_path), "build", "h1", _raising(said))
        assert (result.status, result.code) == (Status.INTERRUPTED, "interrupted")
        assert "--resume" in result.message


def test_ctrl_c_in_the_body_is_recorded_interrupted_and_stops_the_run(tmp_path: Path) -> None:
    cell = _cell(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_phase(cell, "check", "h1", _raising(KeyboardInterrupt()))
    read = cell.read("check")
    assert read is not None and (read.status, read.code) == (Status.INTERRUPTED, "interrupted")
    assert read.inputs_hash == "h1" and "--resume" in read.message


def test_an_outcome_keeps_what_the_result_has_unless_it_says_otherwise() -> None:
    """The bench applies a failed launch to a result that holds its measured launches."""
    kept = Finding(code="SM-A", severity=Severity.WARN, message="kept")
    added = Finding(code="SM-B", severity=Severity.FAIL, message="added")
    result = _result(Status.INTERRUPTED)
    result.findings, result.data = [kept], {"launches": [1]}
    apply(result, Fail("server_failed", "launch 2: died", findings=(added,)))
    assert (result.status, result.code, result.message) == (
        Status.FAILED,
        "server_failed",
        "launch 2: died",
    )
    assert result.findings == [kept, added] and result.data == {"launches": [1]}
    assert isinstance(Skip("a", "b"), Outcome) and Skip("a", "b").status is Status.SKIPPED


def test_a_phase_that_did_not_run_here_is_written_at_once(tmp_path: Path) -> None:
    """merge's missing artifacts, the Slurm job that never built, a bench without [bench]."""
    cell = _cell(tmp_path)
    asked = "2020-01-02T03:04:05+00:00"
    said = Fail("slurm_job_failed", "Slurm job 7 FAILED")
    result = write(cell, "build", said, inputs_hash="h1", started=asked)
    read = cell.read("build")
    assert read is not None and read == _rounded(result)
    assert (read.status, read.code, read.message) == (
        Status.FAILED,
        "slurm_job_failed",
        "Slurm job 7 FAILED",
    )
    assert (read.inputs_hash, read.started) == ("h1", asked) and read.finished > asked
    skipped = write(cell, "bench", Skip("no_bench", "the spec has no [bench] section"))
    assert skipped.inputs_hash == "" and skipped.started and skipped.complete


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
