"""Ctrl-C during a real `docker build` stops it within seconds."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from tests.support.ctrl_c import INTERRUPTED_EXIT, ctrl_c_during_stream, pids_running

from stackmatrix.builder import _docker_cli

pytestmark = [pytest.mark.integration, pytest.mark.docker]

TOKEN = f"hf_{uuid.uuid4().hex}"  # the shape of a Hugging Face token


def test_ctrl_c_stops_a_docker_build_within_seconds(
    engine: _docker_cli.ContainerEngine, base_image: str, tmp_path: Path
) -> None:
    # a unique sleep, so that its process (the RUN step, a host process under the
    # engine) is this build's and no other's
    step = f"sleep {300 + uuid.uuid4().int % 1000}.{os.getpid()}"
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nRUN {step}\n")
    tag = f"stackmatrix-test/interrupt:{uuid.uuid4().hex[:12]}"
    argv = [
        engine.docker,
        "build",
        "--network=host",
        "--no-cache",
        "-t",
        tag,
        "--build-arg",
        f"STACKMATRIX_TEST_TOKEN={TOKEN}",
        str(tmp_path),
    ]
    log = tmp_path / "build.log"
    stopped = ctrl_c_during_stream(
        argv, log, started=lambda: bool(pids_running(step)), env=_docker_cli.build_env(engine)
    )
    assert stopped.returncode == INTERRUPTED_EXIT, stopped.output
    assert stopped.seconds < 15, f"stackmatrix took {stopped.seconds:.1f} s to stop"
    # the engine cancels a build whose client went away: the step does not run on
    deadline = time.monotonic() + 15
    while pids_running(step) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pids_running(step), "the build's RUN step still runs"
    text = log.read_text()
    assert TOKEN not in text and "<redacted>" in text.splitlines()[0]
