from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackmatrix import _atomic
from stackmatrix.errors import ResultsError
from stackmatrix.findings import Finding, Severity, worst
from stackmatrix.results import PhaseResult, RunDir, Status


def test_phase_result_round_trip(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    finding = Finding(code="SM-X", severity=Severity.WARN, message="m", cell="a", subject="s")
    result = PhaseResult(
        phase="build",
        cell="a",
        status=Status.OK,
        inputs_hash="h",
        findings=[finding],
        data={"k": [1]},
        finished="t",
    )
    path = run.cell("a").write(result)
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 1 and raw["findings"][0]["severity"] == "warn"
    back = run.cell("a").read("build")
    assert back is not None and back.findings == [finding] and back.complete
    assert run.cell_ids() == ["a"]


def test_failed_and_interrupted_results_are_not_reused() -> None:
    for status in (Status.FAILED, Status.INTERRUPTED):
        assert not PhaseResult(
            phase="b", cell="a", status=status, inputs_hash="", finished="t"
        ).complete
    assert not PhaseResult(phase="b", cell="a", status=Status.OK, inputs_hash="").complete


def test_unknown_schema_version_is_refused(tmp_path: Path) -> None:
    cell = RunDir(tmp_path).cell("a")
    _atomic.write_json(cell.result_path("build"), {"schema_version": 99, "phase": "build"})
    with pytest.raises(ResultsError, match="schema_version 99"):
        cell.read("build")
    cell.result_path("check").write_text("{not json")
    with pytest.raises(ResultsError, match="cannot read"):
        cell.read("check")


def test_missing_run_json_is_explained(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="not a stackmatrix results directory"):
        RunDir(tmp_path).read_run()


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    _atomic.write_json(target, {"a": 1})
    _atomic.write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_worst_severity() -> None:
    f = [
        Finding(code="A", severity=Severity.INFO, message=""),
        Finding(code="B", severity=Severity.WARN, message=""),
    ]
    assert worst(f) is Severity.WARN and worst([]) is None


def test_an_unreadable_phase_result_names_its_file(tmp_path: Path) -> None:
    # a bench.json of another schema version, met on resume
    cell = RunDir(tmp_path).cell("a")
    path = cell.result_path("bench")
    _atomic.write_json(path, {"schema_version": 2, "phase": "bench"})
    with pytest.raises(ResultsError, match=f"^{path}: phase result has schema_version 2"):
        cell.read("bench")
    _atomic.write_json(path, {"schema_version": 1, "cell": "a", "status": "ok"})
    with pytest.raises(ResultsError, match=f"^{path}: phase result has no 'phase'"):
        cell.read("bench")
