"""A venv's server keeps FlashInfer's JIT cache in its own directory: on the
H200, two flashinfer venvs alternating in one explain round recompiled each other's
kernels at every start (80-100 s more per start), because FlashInfer's build files name
the installed package's absolute paths. Checked on the real launch path: the started
process's own environment, read from /proc."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackmatrix.bench import server
from stackmatrix.bench.engines import get_engine
from stackmatrix.built_environment import Environment

pytestmark = pytest.mark.integration
FAKE = Path(__file__).with_name("fake_engine.py")
VAR = "FLASHINFER_WORKSPACE_BASE"


def _served_environ(tmp_path: Path, env: Environment) -> dict[str, str]:
    with server.launch(
        engine=get_engine("transformers"),
        environment=env,
        model="fake-model",
        args=[],
        log_path=tmp_path / "server.log",
        ready_timeout_s=30.0,
    ) as running:
        assert running.proc is not None
        raw = Path(f"/proc/{running.proc.pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(): v.decode() for k, v in pairs}


@pytest.mark.parametrize("backend", ["venv", "current"])
def test_only_a_venv_server_gets_a_jit_cache_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    prefix = tmp_path / "envs" / "cell-a"
    env = Environment(
        backend=backend, python=(sys.executable, str(FAKE)), prefix=prefix, env={"FAKE_MODE": "ok"}
    )
    seen = _served_environ(tmp_path, env)
    assert seen["FAKE_MODE"] == "ok"
    if backend == "venv":
        assert seen[VAR] == str(prefix / "jit-cache")
        # torch.compile's cache too, not /tmp/torchinductor_<user>, shared with anyone
        assert seen["TORCHINDUCTOR_CACHE_DIR"] == str(prefix / "jit-cache" / "torchinductor")
    else:  # one interpreter for every such cell: nothing to keep apart
        assert VAR not in seen and "TORCHINDUCTOR_CACHE_DIR" not in seen


def test_a_cache_the_cell_or_the_user_chose_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(VAR, raising=False)
    prefix = tmp_path / "envs" / "cell-a"
    chosen = Environment(
        backend="venv",
        python=(sys.executable, str(FAKE)),
        prefix=prefix,
        env={"FAKE_MODE": "ok", VAR: "/data/jit"},
    )
    assert _served_environ(tmp_path, chosen)[VAR] == "/data/jit"
    monkeypatch.setenv(VAR, "/scratch/jit")
    plain = Environment(
        backend="venv", python=(sys.executable, str(FAKE)), prefix=prefix, env={"FAKE_MODE": "ok"}
    )
    assert _served_environ(tmp_path, plain)[VAR] == "/scratch/jit"
