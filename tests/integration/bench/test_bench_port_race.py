"""A server whose port is taken between our check and its own bind exits before it is
ready; the launch starts it again on another port instead of failing the cell (an
SGLang server on the H200 found its port in use 47 s after we found it free)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.bench.server import BIND_ATTEMPTS
from stackmatrix.built_environment import Environment
from stackmatrix.results import RunDir, Status
from stackmatrix.spec_model import Bench, Cell, Spec, Workload

pytestmark = pytest.mark.integration

FAKE = Path(__file__).with_name("fake_engine.py")


def _run(tmp_path: Path, taken: int) -> tuple[Status, str, str]:
    """The cell's status and message, and its server log, after `taken` starts that
    found their port taken."""
    counter = tmp_path / f"taken-{taken}"
    counter.write_text(str(taken))
    spec = Spec(
        name="race",
        path=str(tmp_path / "spec.toml"),
        baseline="a",
        cells=(Cell(id="a"),),
        bench=Bench(
            engine="transformers",
            model="fake-model",
            launches=1,
            rounds=1,
            ready_timeout_s=10.0,
            steady_warmup=False,
            host_warmup=False,
            workload=Workload(input_len=8, output_len=8, num_prompts=2, warmup=0),
        ),
    )
    env = {
        "FAKE_MODE": "port_taken",
        "FAKE_TAKEN_FILE": str(counter),
        "FAKE_REJECT_IGNORE_EOS": "1",
    }
    environment = Environment(backend="venv", python=(sys.executable, str(FAKE)), env=env)
    run = RunDir(tmp_path / f"run-{taken}")
    [result] = run_bench_phase(
        spec, run, ["a"], environments={"a": environment}, order="sequential"
    ).values()
    log = (run.path / "cells" / "a" / "server-L1.log").read_text()
    return result.status, result.message, log


def test_a_port_taken_before_the_bind_starts_the_server_again(tmp_path: Path) -> None:
    status, _, log = _run(tmp_path, taken=2)
    assert status is Status.OK
    starts = [line for line in log.splitlines() if line.startswith("$ ")]
    assert len(starts) == 3  # two taken ports, then the one that served
    ports = {line.split("--port ", 1)[1].split()[0] for line in starts}
    assert len(ports) == 3, "each start has a port of its own"
    assert log.count("address already in use") == 2


def test_a_port_taken_at_every_start_fails_the_cell_and_says_why(tmp_path: Path) -> None:
    status, message, log = _run(tmp_path, taken=BIND_ATTEMPTS)
    assert status is Status.FAILED
    assert "exited with code 1 before it was ready" in message
    assert "address already in use" in message
    assert sum(line.startswith("$ ") for line in log.splitlines()) == BIND_ATTEMPTS
