"""A bench redone after the spec changed runs what the spec says now and keeps nothing
of the configuration it replaced: the spec's env reaches the server even where the
build (whose content hash env is not part of) is reused, and the launch logs and
request records of the earlier configuration are gone before the new launches write."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.builder.phase import environments
from stackmatrix.built_environment import Environment
from stackmatrix.results import PhaseResult, RunDir, Status, now_iso
from stackmatrix.spec_model import Bench, Cell, Spec, Workload

pytestmark = pytest.mark.integration

FAKE = Path(__file__).with_name("fake_engine.py")


def _spec(tmp_path: Path, *, note: str, launches: int, args: tuple[str, ...] = ()) -> Spec:
    cell = Cell(id="a", env=(("FAKE_MODE", "ok"), ("FAKE_NOTE", note)), server_args=args)
    return Spec(
        name="redone",
        path=str(tmp_path / "spec.toml"),
        baseline="a",
        cells=(cell,),
        bench=Bench(
            engine="transformers",
            model="fake-model",
            launches=launches,
            rounds=1,
            ready_timeout_s=10.0,
            steady_warmup=False,
            host_warmup=False,
            workload=Workload(input_len=8, output_len=8, num_prompts=2, warmup=0),
        ),
    )


def _built(run: RunDir, env: dict[str, str]) -> None:
    """build.json as a build with this env left it (the venv is this interpreter)."""
    environment = Environment(backend="venv", python=(sys.executable, str(FAKE)), env=env)
    run.cell("a").write(
        PhaseResult(
            phase="build",
            cell="a",
            status=Status.OK,
            inputs_hash="built",
            started=now_iso(),
            finished=now_iso(),
            data={"environment": environment.to_dict()},
        )
    )


def _bench(spec: Spec, run: RunDir) -> PhaseResult:
    [result] = run_bench_phase(
        spec, run, ["a"], environments=environments(run, ["a"], spec), order="sequential"
    ).values()
    return result


def test_a_changed_env_value_reaches_the_redone_bench_s_server(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    _built(run, {"FAKE_MODE": "ok", "FAKE_NOTE": "old-value"})  # built before the change
    result = _bench(_spec(tmp_path, note="new-value", launches=1), run)
    assert result.status is Status.OK, result.message
    log = (run.path / "cells" / "a" / "server-L1.log").read_text()
    assert "fake engine note=new-value" in log
    assert "old-value" not in log


def test_a_bench_redone_with_other_server_args_keeps_no_log_of_the_old_ones(
    tmp_path: Path,
) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    _built(run, {"FAKE_MODE": "ok", "FAKE_NOTE": "n"})
    cell = run.path / "cells" / "a"
    first = _bench(_spec(tmp_path, note="n", launches=3, args=("--old-config",)), run)
    assert first.status is Status.OK, first.message
    assert (cell / "server-L3.log").exists() and (cell / "requests-L3-R1.jsonl").exists()
    outside = tmp_path / "outside.log"
    outside.write_text("not ours\n")
    (cell / "server-L4.log").symlink_to(outside)  # removed as a link, never followed
    again = _bench(_spec(tmp_path, note="n", launches=1, args=("--new-config",)), run)
    assert again.status is Status.OK, again.message
    logs = sorted(p.name for p in cell.glob("server-L*.log"))
    records = sorted(p.name for p in cell.glob("requests-L*"))
    assert logs == ["server-L1.log"] and records == ["requests-L1-R1.jsonl"]
    text = (cell / "server-L1.log").read_text()
    assert "--new-config" in text and "--old-config" not in text
    assert outside.read_text() == "not ours\n"
