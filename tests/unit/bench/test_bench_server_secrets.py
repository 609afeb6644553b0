"""A server that dies before it is ready is quoted in the failure message (the end of
its log), which reaches the console, bench.json and every report: what its command line
and environment handed it as secrets is hidden there, as in the log once it stops
(sglang prints its whole ServerArgs, api_key included)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackmatrix._secrets import REDACTED
from stackmatrix.bench import server
from stackmatrix.bench.engines import get_engine
from stackmatrix.built_environment import Environment

API_KEY = "plain-looking-key-7781"  # no credential shape: only its flag says it is secret
ENV_SECRET = "env-handed-secret-3314"  # noqa: S105 (a test value, handed to the child)
# prints its argv and one variable back as sglang prints ServerArgs, then dies
DYING = (
    'import os, sys; print(f"ServerArgs(api_key={sys.argv[-1]!r}, '
    "token={os.environ['MY_SERVICE_TOKEN']!r})\", flush=True); sys.exit(3)"
)


def _launch(tmp_path: Path) -> str:
    env = Environment(
        backend="venv",
        python=(sys.executable, "-c", DYING),
        env={"MY_SERVICE_TOKEN": ENV_SECRET},
    )
    log = tmp_path / "server-L1.log"
    starting = server.launch(
        engine=get_engine("transformers"),
        environment=env,
        model="m",
        args=["--api-key", API_KEY],
        log_path=log,
        ready_timeout_s=30.0,
    )
    with pytest.raises(server.ServerFailed) as caught, starting:
        pytest.fail("the server cannot be ready: it exited")
    return caught.value.message


def test_a_server_dying_before_ready_is_quoted_without_its_secrets(tmp_path: Path) -> None:
    message = _launch(tmp_path)
    assert "exited with code 3 before it was ready" in message
    assert API_KEY not in message and ENV_SECRET not in message
    assert f"api_key='{REDACTED}'" in message and f"token='{REDACTED}'" in message
    log = (tmp_path / "server-L1.log").read_text()
    assert API_KEY not in log and ENV_SECRET not in log


def test_log_tail_reads_only_the_end_of_a_runaway_log(tmp_path: Path) -> None:
    log = tmp_path / "server-L1.log"
    with log.open("wb") as fh:
        fh.truncate(8 << 30)  # sparse: 8 GiB that a whole read would hold in memory
        fh.seek(0, 2)
        fh.write(b"\nlast words hf_" + b"x" * 24 + b"\n")
    tail = server.log_tail(log, lines=1)
    assert tail == f"last words {REDACTED}"
