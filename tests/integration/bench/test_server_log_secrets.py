"""A server that prints its arguments back (sglang logs its whole ServerArgs, api_key
included) leaves no secret in the log we keep: the suite's fake
engine prints its argv, through the real launch path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackmatrix._secrets import REDACTED
from stackmatrix.bench import server
from stackmatrix.bench.engines import get_engine
from stackmatrix.built_environment import Environment

pytestmark = pytest.mark.integration
FAKE = Path(__file__).with_name("fake_engine.py")
API_KEY = "plain-looking-key-7781"  # no credential shape: only its flag says it is secret


def test_secrets_handed_to_the_server_are_hidden_in_its_log(tmp_path: Path) -> None:
    env = Environment(backend="venv", python=(sys.executable, str(FAKE)), env={"FAKE_MODE": "ok"})
    log = tmp_path / "server.log"
    with server.launch(
        engine=get_engine("transformers"),
        environment=env,
        model="fake-model",
        args=["--api-key", API_KEY, "--note=visible-value"],
        log_path=log,
        ready_timeout_s=30.0,
    ) as running:
        assert running.proc is not None
        assert API_KEY in log.read_text()  # while it runs, the engine printed it
    text = log.read_text()
    assert "fake engine mode=ok" in text and "visible-value" in text
    assert API_KEY not in text and f"'{REDACTED}'" in text
