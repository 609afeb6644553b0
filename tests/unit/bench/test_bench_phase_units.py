"""Decisions the bench phase makes before it launches anything."""

from __future__ import annotations

import dataclasses
from typing import Any

from stackmatrix.bench import envfacts, phase
from stackmatrix.bench.engines import get_engine
from stackmatrix.built_environment import Environment
from stackmatrix.findings import Finding, Severity
from stackmatrix.results import PhaseResult, RunDir, Status
from stackmatrix.spec_model import Bench, Cell, Spec

ENV = Environment(backend="venv", python=("/nowhere/python",))


def _spec(engine: Any = "transformers", **bench: Any) -> Spec:
    return Spec(
        name="s",
        path="",
        baseline="a",
        cells=(Cell(id="a"), Cell(id="b", gpus=1)),
        bench=Bench(engine=engine, model="m", **bench),
    )


def _check(
    run: RunDir, cid: str, *, verdict: str | None = None, findings: tuple[Finding, ...] = ()
) -> None:
    run.cell(cid).write(
        PhaseResult(
            phase="check",
            cell=cid,
            status=Status.OK,
            inputs_hash="x",
            data={"verdict": verdict} if verdict else {},
            findings=list(findings),
        )
    )


def _skip(
    spec: Spec, run: RunDir, cid: str, env: Environment | None = ENV, force: bool = False
) -> tuple[str, str] | None:
    assert spec.bench is not None
    engine = get_engine(spec.bench.engine)
    return phase._skip_reason(spec, spec.bench, engine, run.cell(cid), cid, env, force)


def _code(
    spec: Spec, run: RunDir, cid: str, env: Environment | None = ENV, force: bool = False
) -> str | None:
    reason = _skip(spec, run, cid, env, force)
    return reason[0] if reason else None


def test_incompatible_cells_are_skipped_unless_forced(tmp_path):
    run = RunDir(tmp_path)
    _check(run, "a", verdict="incompatible")
    assert _code(_spec(), run, "a") == "incompatible"
    assert _skip(_spec(), run, "a", force=True) is None
    _check(run, "a", verdict="compatible")
    assert _skip(_spec(), run, "a") is None
    fail = Finding(code="X", severity=Severity.FAIL, message="m")
    _check(run, "a", findings=(fail,))
    assert _code(_spec(), run, "a") == "incompatible"


def test_gpu_engines_without_gpu_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(envfacts, "gpu_count", lambda: 0)
    run = RunDir(tmp_path)
    reason = _skip(_spec("sglang"), run, "a")
    assert reason is not None
    code, message = reason
    assert code == "no_gpu" and "'sglang' needs a GPU" in message
    assert _skip(_spec(), run, "a") is None
    assert _code(_spec(), run, "b") == "no_gpu"  # the cell itself asks for a GPU
    monkeypatch.setattr(envfacts, "gpu_count", lambda: 8)
    assert _skip(_spec("sglang"), run, "a") is None


def test_missing_environment_and_external_url(tmp_path):
    run = RunDir(tmp_path)
    assert _code(_spec(), run, "a", env=None) == "not_built"
    assert _code(_spec("external"), run, "a", env=None) == "no_url"
    assert _skip(_spec("external", url="http://127.0.0.1:1"), run, "a", env=None) is None


def test_skipped_cells_are_written_and_nothing_launches(tmp_path, monkeypatch):
    monkeypatch.setattr(envfacts, "gpu_count", lambda: 0)
    run = RunDir(tmp_path / "run")
    results = phase.run_bench_phase(
        _spec("sglang"), run, ["a", "b"], environments={"a": ENV, "b": ENV}, order="interleaved"
    )
    assert {c: (r.status, r.code) for c, r in results.items()} == {
        "a": (Status.SKIPPED, "no_gpu"),
        "b": (Status.SKIPPED, "no_gpu"),
    }
    written = run.cell("a").read("bench")
    assert written is not None and written.status is Status.SKIPPED
    assert (run.path / "workload.jsonl").is_file()


def test_inputs_hash_ignores_launch_count_but_not_args():
    spec = _spec()
    assert spec.bench is not None
    h = phase.inputs_hash(spec, spec.bench, "a", ENV, "w")
    more = dataclasses.replace(spec.bench, launches=9)
    assert phase.inputs_hash(spec, more, "a", ENV, "w") == h
    other = dataclasses.replace(spec.bench, server_args=("--x",))
    assert phase.inputs_hash(spec, other, "a", ENV, "w") != h
    assert phase.inputs_hash(spec, spec.bench, "a", ENV, "w2") != h


def test_client_workers_change_the_inputs_hash_unless_one():
    """1, the in-process client, hashes as before the key existed (earlier results
    resume); any other count or "auto" is another instrument: measured again."""
    spec = _spec()
    assert spec.bench is not None and spec.bench.client_workers == 1
    h = phase.inputs_hash(spec, spec.bench, "a", ENV, "w")
    for workers in (2, "auto"):
        other = dataclasses.replace(spec.bench, client_workers=workers)
        assert phase.inputs_hash(spec, other, "a", ENV, "w") != h


def test_a_bench_json_it_cannot_read_is_kept_not_replaced(tmp_path, monkeypatch):
    monkeypatch.setattr(envfacts, "gpu_count", lambda: 0)  # every cell skipped: no launch
    run = RunDir(tmp_path / "run")
    cut, newer = run.cell("a").result_path("bench"), run.cell("b").result_path("bench")
    for path in (cut, newer):
        path.parent.mkdir(parents=True, exist_ok=True)
    cut.write_text('{"schema_version": 1, "phase": "bench", "data": {"launches": [')
    newer.write_text('{"schema_version": 99, "phase": "bench"}')
    before = {p: p.read_bytes() for p in (cut, newer)}
    results = phase.run_bench_phase(
        _spec("sglang"), run, ["a", "b"], environments={"a": ENV, "b": ENV}, order="interleaved"
    )
    assert {p: p.read_bytes() for p in (cut, newer)} == before
    assert {r.code for r in results.values()} == {"unreadable_record"}
    assert "Move it aside" in results["a"].message and str(cut) in results["a"].message
