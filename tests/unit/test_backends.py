"""The backend interface and its registry: every backend a spec may
name is registered, host backends run things as they are, and no module outside
src/stackmatrix/builder/ decides by a backend's name."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from stackmatrix.builder.backends import DockerBackend, get_backend
from stackmatrix.built_environment import Environment
from stackmatrix.spec_model import BACKENDS

SRC = Path(__file__).resolve().parents[2] / "src" / "stackmatrix"


def test_every_backend_of_the_spec_is_registered() -> None:
    assert [get_backend(name).name for name in BACKENDS] == list(BACKENDS)
    with pytest.raises(ValueError, match="no backend 'podman'; the backends are venv"):
        get_backend("podman")


def _launch(python: Sequence[str]) -> list[str]:
    return [*python, "-m", "engine", "--port", "1234"]


def test_host_backends_run_the_environments_interpreter_as_is() -> None:
    env = Environment(backend="venv", python=("/envs/a/bin/python",))
    for name in ("venv", "current"):
        backend = get_backend(name)
        assert backend.on_host
        assert backend.python_command(env, writable=[Path("/models")]) == ["/envs/a/bin/python"]
        command = backend.server_command(env, _launch, port=1234, model="/m", gpus=False)
        assert command.argv == ["/envs/a/bin/python", "-m", "engine", "--port", "1234"]
        assert command.handle is None
        backend.cleanup("anything")  # nothing to remove, never raises


def test_docker_runs_the_server_in_a_named_container_of_the_image() -> None:
    env = Environment(backend="docker", python=("docker", "run", "img", "python"), image="img")
    command = DockerBackend().server_command(env, _launch, port=1234, model="/m", gpus=False)
    assert command.handle is not None and re.fullmatch(r"stackmatrix-[0-9a-f]{12}", command.handle)
    argv = command.argv
    assert argv[argv.index("--name") + 1] == command.handle
    assert "img" in argv and argv[-5:] == ["python", "-m", "engine", "--port", "1234"]
    assert not get_backend("docker").on_host


def test_no_module_outside_the_backends_decides_by_a_backends_name() -> None:
    asks = re.compile(r"""backend\s*(==|!=|in)\s*[("']""")
    offenders = [
        f"{path.relative_to(SRC)}:{n}"
        for path in SRC.rglob("*.py")
        if "envs" not in path.relative_to(SRC).parts[:1]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if asks.search(line)
    ]
    assert offenders == [], offenders
