"""A phase's per-cell entry says "not run" (Skip) or "ran and failed" (Fail), and the
result a run writes for it: the build's failure, the check of an unbuilt cell, the
bench of a spec without one or without its model. Fast: no build, no server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackmatrix.builder import phase as build_phase_mod
from stackmatrix.builder.base import BuildOutcome
from stackmatrix.findings import Finding, Severity
from stackmatrix.jsontypes import JSONObject
from stackmatrix.outcome import Fail
from stackmatrix.pipeline import RunOptions, bench_phase, build_phase, check_phase, select_cells
from stackmatrix.plan import PlannedCell
from stackmatrix.results import PhaseResult, RunDir
from stackmatrix.spec_model import Cell
from stackmatrix.specfile import load_spec

SPEC = 'name = "s"\nbaseline = "a"\n\n[[cell]]\nid = "a"\nbackend = "current"\n'
UNBUILT = "no environment to check: the build phase did not succeed"


def _run(tmp_path: Path, extra: str = "") -> tuple[RunDir, RunOptions, list[PlannedCell]]:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC + extra)
    opts = RunOptions(spec=load_spec(spec), output=tmp_path / "run", work_dir=tmp_path / "w")
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    return run, opts, select_cells(opts.spec, [])


class _Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, phase: str, cell: str, message: str) -> None:
        self.lines.append(f"{phase} {cell} {message}")


def _written(run: RunDir, phase: str, cell: str = "a") -> JSONObject:
    raw: JSONObject = json.loads(run.cell(cell).result_path(phase).read_text())
    return raw


class _Refusing:
    """A backend whose resolver refuses the cell's pins."""

    finding = Finding(
        code="SM-RESOLVE-FAILED",
        severity=Severity.FAIL,
        cell="a",
        subject="torch==9",
        message="uv said no",
    )

    def build(self, cell: Cell, **kw: object) -> BuildOutcome:
        return BuildOutcome.failed(
            "resolution_failed",
            "uv said no",
            findings=(self.finding,),
            data={"timings": {"compile": 1.5}},
        )


def test_a_failed_build_raises_fail_with_what_build_json_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, opts, planned = _run(tmp_path)
    monkeypatch.setattr(build_phase_mod, "get_backend", lambda name: _Refusing())
    (pc,) = planned
    with pytest.raises(Fail) as raised:
        build_phase_mod.build_cell(pc, tmp_path, tmp_path, tmp_path / "build.log")
    assert (raised.value.code, raised.value.findings) == ("resolution_failed", (_Refusing.finding,))
    said = _Said()
    result = build_phase(run, opts, planned, said)["a"]
    written = _written(run, "build")
    assert (written["status"], written["code"], written["message"]) == (
        "failed",
        "resolution_failed",
        "uv said no",
    )
    assert written["inputs_hash"] == pc.content_hash
    assert written["findings"] == [_Refusing.finding.to_dict()]
    assert written["data"] == {
        "lock": [],
        "reused": False,
        "content_hash": pc.content_hash,
        "timings": {"compile": 1.5},
    }
    assert result.finished and said.lines[-1].startswith("build a failed (resolution_failed)")


def test_checking_an_unbuilt_cell_is_skipped(tmp_path: Path) -> None:
    run, opts, planned = _run(tmp_path)
    said = _Said()
    result = check_phase(run, opts, planned, said)["a"]
    written = _written(run, "check")
    assert (written["status"], written["code"], written["message"]) == (
        "skipped",
        "not_built",
        UNBUILT,
    )
    assert written["findings"] == [] and written["data"] == {} and written["finished"]
    assert PhaseResult.from_dict(written).complete and result.complete
    assert said.lines[0] == "check a checking"
    assert said.lines[1].startswith(f"check a skipped (not_built): {UNBUILT} [")


def test_a_spec_without_a_bench_skips_every_cell_s_bench(tmp_path: Path) -> None:
    run, opts, planned = _run(tmp_path)
    results = bench_phase(run, opts, planned, _Said())
    written = _written(run, "bench")
    assert (written["status"], written["code"], written["message"]) == (
        "skipped",
        "no_bench",
        "the spec has no [bench] section",
    )
    assert written["inputs_hash"] == "" and written["started"] and written["finished"]
    assert results["a"].complete


def test_a_model_that_cannot_be_made_fails_every_cell_s_bench(tmp_path: Path) -> None:
    bench = '\n[bench]\nengine = "transformers"\nmodel = "stackmatrix:tiny-llama"\n'
    run, opts, planned = _run(tmp_path, bench)
    results = bench_phase(run, opts, planned, _Said())  # nothing built to make it with
    written = _written(run, "bench")
    assert (written["status"], written["code"]) == ("failed", "model_unavailable")
    assert "needs a built cell with torch and transformers" in str(written["message"])
    assert not results["a"].complete and not run.cell("a").log_path("bench").exists()
