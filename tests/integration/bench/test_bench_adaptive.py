"""Adaptive launches through the real launch path (a local streaming server per launch):
a cell whose decode is twice as slow is decided after the first `min` cycles and the
run stops there, in a balanced order whose seed is recorded."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.built_environment import Environment
from stackmatrix.results import RunDir, Status
from stackmatrix.spec_model import Bench, Cell, ReportPolicy, Spec, Workload

pytestmark = pytest.mark.integration

FAKE = Path(__file__).with_name("fake_engine.py")


def _env(gap_s: float) -> Environment:
    env = {
        "FAKE_MODE": "ok",
        "FAKE_REJECT_IGNORE_EOS": "1",
        "FAKE_GAP_S": str(gap_s),
        "FAKE_TOKENS": "12",
    }
    return Environment(backend="venv", python=(sys.executable, str(FAKE)), env=env)


def test_a_decided_cell_stops_the_run_at_min_launches(tmp_path: Path) -> None:
    spec = Spec(
        name="adaptive",
        path=str(tmp_path / "spec.toml"),
        baseline="base",
        cells=(Cell(id="base"), Cell(id="slow")),
        bench=Bench(
            engine="transformers",
            model="fake-model",
            launches=6,
            min_launches=3,
            rounds=1,
            ready_timeout_s=10.0,
            workload=Workload(input_len=8, output_len=12, num_prompts=4, warmup=1),
        ),
        report=ReportPolicy(headline="decode_tok_s", min_effect=0.05),
        order="balanced",
    )
    run = RunDir(tmp_path / "run")
    envs = {"base": _env(0.01), "slow": _env(0.03)}  # 3x the time per token
    results = run_bench_phase(spec, run, ["base", "slow"], environments=envs, order="balanced")
    assert {r.status for r in results.values()} == {Status.OK}
    plans = {cid: r.data["launch_plan"] for cid, r in results.items()}
    assert plans["slow"]["verdict"] == "slower" and plans["slow"]["stopped"] == "decided"
    assert plans["base"] == {**plans["base"], "min": 3, "max": 6, "looks": 4, "launches": 3}
    assert [len(r.data["launches"]) for r in results.values()] == [3, 3]
    schedule = json.loads((run.path / "bench-schedule.json").read_text())
    assert schedule["order"] == "balanced" and isinstance(schedule["order_seed"], int)
    cycles = [[s["cell"] for s in schedule["slots"] if s["launch"] == k] for k in (1, 2, 3)]
    assert all(sorted(c) == ["base", "slow"] for c in cycles)
    # what the live server mapped, read from its process group's memory maps
    mapped = results["base"].data["launches"][0]["mapped"]
    assert mapped["processes"] >= 1 and not mapped["truncated"]
    assert any("-packages/aiohttp/" in p and ".so" in p for p in mapped["libraries"])
    # a resume with nothing undecided adds no launch
    again = run_bench_phase(spec, run, ["base", "slow"], environments=envs, order="balanced")
    assert [len(r.data["launches"]) for r in again.values()] == [3, 3]


def _cut_off_in_cycle_four(
    tmp_path: Path, *, killed: bool
) -> tuple[Spec, RunDir, dict[str, Environment]]:
    """Results whose added cycle 4 was cut off after the candidate's launch: the baseline
    has 3 launches, the candidate 4 (its record as a killed run leaves it, or complete);
    and the adaptive spec (3 to 4 launches) that resumes them."""
    work = Workload(input_len=8, output_len=12, num_prompts=4, warmup=1)
    fixed = Bench(
        engine="transformers",
        model="fake-model",
        launches=3,
        rounds=1,
        ready_timeout_s=10.0,
        workload=work,
    )
    cells = (Cell(id="base"), Cell(id="same"))
    spec = Spec(
        name="adaptive",
        path=str(tmp_path / "spec.toml"),
        baseline="base",
        cells=cells,
        bench=fixed,
        report=ReportPolicy(headline="decode_tok_s", min_effect=0.05),
        order="balanced",
    )
    run = RunDir(tmp_path / "run")
    envs = {"base": _env(0.01), "same": _env(0.01)}
    run_bench_phase(spec, run, ["base", "same"], environments=envs, order="balanced")
    four = dataclasses.replace(spec, bench=dataclasses.replace(fixed, launches=4))
    run_bench_phase(four, run, ["same"], environments=envs, order="balanced")
    if killed:  # what a run killed during its launch leaves: not finished
        path = run.path / "cells" / "same" / "bench.json"
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "status": "interrupted", "message": "not finished"}))
    adaptive = dataclasses.replace(fixed, launches=4, min_launches=3)
    return dataclasses.replace(spec, bench=adaptive), run, envs


@pytest.mark.parametrize("killed", [True, False])
def test_a_resumed_run_first_runs_the_baselines_launch_that_was_cut_off(
    tmp_path: Path, killed: bool
) -> None:
    """An H200 run (reports/examples/h200-sglang-cache) lost its host in the added cycle
    4 after the candidate's launch and before the baseline's; the resume found the
    candidate at `max` and stopped, leaving its launch 4 unpaired. The baseline's launch
    of that cycle runs first now, and a stop with no verdict looked at is not "decided"
    (the report said "(decided)" of an inconclusive pair)."""
    spec, run, envs = _cut_off_in_cycle_four(tmp_path, killed=killed)
    results = run_bench_phase(spec, run, ["base", "same"], environments=envs, order="balanced")
    assert [len(r.data["launches"]) for r in results.values()] == [4, 4]
    schedule = json.loads((run.path / "bench-schedule.json").read_text())
    last = schedule["sessions"][-1]["slots"]
    assert [(s["cell"], s["launch"]) for s in last] == [("base", 4)]
    plan = results["base"].data["launch_plan"]
    assert plan["launches"] == 4
    if killed:  # the candidate was looked at: its verdict says why the run stopped
        verdict = results["same"].data["launch_plan"]["verdict"]
        decided = verdict in ("faster", "slower", "equivalent")
        assert plan["stopped"] == ("decided" if decided else "max reached")
    else:  # complete before this run: nothing was looked at
        assert plan["stopped"] == "max reached"


def test_a_run_cut_off_before_its_first_look_is_reported_as_adaptive(tmp_path: Path) -> None:
    """The plan is in bench.json before the first launch: a run interrupted in its second
    cycle (no look yet) is reported "not finished" at the design's own levels, not as a
    fixed plan at the full error rate."""
    from stackmatrix.report.load import load_run
    from stackmatrix.report.model import build_model

    spec = Spec(
        name="adaptive",
        path=str(tmp_path / "spec.toml"),
        baseline="base",
        cells=(Cell(id="base"), Cell(id="same")),
        bench=Bench(
            engine="transformers",
            model="fake-model",
            launches=5,
            min_launches=3,
            rounds=1,
            ready_timeout_s=10.0,
            workload=Workload(input_len=8, output_len=12, num_prompts=4, warmup=1),
        ),
        report=ReportPolicy(headline="decode_tok_s", min_effect=0.05),
        order="balanced",
    )
    run = RunDir(tmp_path / "run")
    envs = {"base": _env(0.01), "same": _env(0.01)}

    def cut_off(cell: str, message: str) -> None:
        if message.startswith("launch 2/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_bench_phase(
            spec, run, ["base", "same"], environments=envs, order="balanced", progress=cut_off
        )
    for cid in ("base", "same"):
        doc = json.loads((run.path / "cells" / cid / "bench.json").read_text())
        plan = doc["data"]["launch_plan"]
        assert {k: plan[k] for k in ("min", "max", "looks")} == {"min": 3, "max": 5, "looks": 3}
        assert "verdict" not in plan and "stopped" not in plan
    run.write_json(
        "run.json",
        {
            "spec_name": "adaptive",
            "baseline": "base",
            "cells": ["base", "same"],
            "order": "balanced",
            "report": {"headline": "decode_tok_s", "min_effect": 0.05},
        },
    )
    run.write_json("plan.json", {"cells": [{"id": c, "definition": {}} for c in ("base", "same")]})
    model = build_model(load_run(run.path))
    assert model.protocol is not None and model.protocol.stopped == "not finished"
    said = " ".join(model.protocol.sentences())
    assert "of 3 to 5 (not finished)" in said and "error-spending" in said
