"""The bench phase against a REAL `transformers serve` on CPU, through the same code
path as sglang: launch in the cell's environment, readiness, effective config,
streamed /v1/completions with usage, teardown, interleaved launches."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from stackmatrix.bench import metrics, workload
from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.built_environment import Environment
from stackmatrix.results import PhaseResult, RunDir, Status
from stackmatrix.spec_model import Bench, Cell, Spec, Workload

pytestmark = pytest.mark.integration

WORKLOAD = Workload(input_len=32, output_len=16, num_prompts=4, max_concurrency=2, warmup=1)


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory, cpu_python: Path, tiny_model: Path
) -> tuple[Path, dict[str, PhaseResult]]:
    tmp = tmp_path_factory.mktemp("tf")
    spec = Spec(
        name="cpu",
        path=str(tmp / "spec.toml"),
        baseline="sdpa",
        cells=(
            Cell(id="sdpa"),
            Cell(id="eager", server_args=("--attn-implementation", "eager")),
        ),
        bench=Bench(
            engine="transformers",
            model=str(tiny_model),
            server_args=("--device", "cpu"),
            launches=2,
            rounds=1,
            ready_timeout_s=180.0,
            workload=WORKLOAD,
        ),
    )
    env = Environment(backend="venv", python=(str(cpu_python),), env={"HF_HUB_OFFLINE": "1"})
    rd = RunDir(tmp / "run")
    results = run_bench_phase(
        spec,
        rd,
        ["sdpa", "eager"],
        environments={"sdpa": env, "eager": env},
        order="interleaved",
    )
    return rd.path, results


def test_cells_measured_interleaved(run):
    path, results = run
    for cid in ("sdpa", "eager"):
        assert results[cid].status is Status.OK, results[cid].message
        assert [ln["index"] for ln in results[cid].data["launches"]] == [1, 2]
        for ln in results[cid].data["launches"]:
            # the steady warm-up ran (a tiny CPU model may or may not settle in 8 batches)
            steady = ln["steady"]
            assert isinstance(steady["steady"], bool) and 1 <= len(steady["batches"]) <= 8
            assert all(b["requests"] == WORKLOAD.warmup for b in steady["batches"])
    slots = json.loads((path / "bench-schedule.json").read_text())["slots"]
    assert [(s["cell"], s["launch"]) for s in slots] == [
        ("sdpa", 1),
        ("eager", 1),
        ("sdpa", 2),
        ("eager", 2),
    ]
    seqs = [ln["sequence"] for c in ("sdpa", "eager") for ln in results[c].data["launches"]]
    assert sorted(seqs) == [1, 2, 3, 4]


def test_same_bytes_for_every_cell(run):
    path, results = run
    digest = hashlib.sha256((path / "workload.jsonl").read_bytes()).hexdigest()
    assert results["sdpa"].data["workload_hash"] == digest
    assert results["eager"].data["workload_hash"] == digest
    assert len(workload.read(path).measured) == WORKLOAD.num_prompts


def test_requests_counted_from_usage(run):
    path, results = run
    reqs = workload.read(path).measured
    for cid in ("sdpa", "eager"):
        for ln in results[cid].data["launches"]:
            rnd = ln["rounds"][0]
            lines = (path / "cells" / cid / rnd["requests_file"]).read_text().splitlines()
            records = [json.loads(x) for x in lines]
            assert len(records) == WORKLOAD.num_prompts
            for rec in records:
                assert rec["ok"], rec["error"]
                assert rec["output_tokens_source"] == "usage"
                assert 1 <= rec["output_tokens"] <= reqs[rec["index"]].max_tokens
                # one word of the list is one token of the tiny model's tokenizer
                assert rec["prompt_tokens"] == reqs[rec["index"]].input_len
                assert 0 < rec["ttft_s"] <= rec["e2e_s"]
            m = rnd["metrics"]
            assert m["total_output_tokens"] == sum(r["output_tokens"] for r in records)
            assert m["output_throughput"] == pytest.approx(
                m["total_output_tokens"] / m["duration_s"]
            )


def test_effective_config_and_version(run):
    _, results = run
    sdpa, eager = results["sdpa"].data, results["eager"].data
    assert sdpa["engine"] == "transformers"
    assert sdpa["engine_version"] == "5.17.0"
    assert eager["effective_config"]["attn_implementation"] == "eager"
    assert sdpa["effective_config"]["attn_implementation"] is None
    assert sdpa["effective_config"]["device"] == "cpu"
    assert "transformers.cli.transformers" in sdpa["launch_argv"]
    assert sdpa["server_info"]["launch_args"] == ["--device", "cpu"]


def test_teardown_and_facts(run):
    path, results = run
    for cid in ("sdpa", "eager"):
        for ln in results[cid].data["launches"]:
            td = ln["teardown"]
            assert td["port_free"] is True and td["pids"]
            for pid in td["pids"]:
                assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
            assert ln["env_facts"]["before"]["loadavg"] is not None
            assert ln["env_facts"]["after"]["time"] >= ln["env_facts"]["before"]["time"]
            log = (path / "cells" / cid / f"server-L{ln['index']}.log").read_text()
            assert "Uvicorn running" in log


def test_summary_is_median_of_launch_medians(run):
    _, results = run
    data = results["sdpa"].data
    per_launch = [ln["summary"]["output_throughput"] for ln in data["launches"]]
    assert data["summary"]["output_throughput"] == pytest.approx(
        metrics.cell_summary([{"x": v} for v in per_launch])["x"]
    )
    assert data["summary"]["output_throughput"] > 0


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_tiny_model_is_tiny_and_local(tiny_model: Path) -> None:
    config = json.loads((tiny_model / "config.json").read_text())
    assert config["hidden_size"] == 64 and config["num_hidden_layers"] == 2
    assert (tiny_model / "tokenizer.json").is_file()
    assert (tiny_model / "model.safetensors").stat().st_size < 5_000_000
