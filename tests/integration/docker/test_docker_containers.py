"""Containers for the bench phase: a real server in the cell's image, reached from the
host, removed on every exit path, and only the containers stackmatrix started."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackmatrix.builder import _docker_cli, docker
from stackmatrix.built_environment import Environment
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell

pytestmark = [pytest.mark.integration, pytest.mark.docker]


@pytest.fixture(scope="module")
def environment(
    engine: _docker_cli.ContainerEngine,
    base_image: str,
    host_ca: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Environment]:
    tmp = tmp_path_factory.mktemp("docker-serve")
    cell = Cell(
        id="serve",
        backend="docker",
        base_image=base_image,
        pins=("six==1.16.0",),
        ca_certs=(host_ca,),
        env=(("STACKMATRIX_TEST_SETTING", "42"),),
    )
    content_hash = uuid.uuid4().hex
    out = docker.build(
        cell,
        spec_dir=tmp,
        work_dir=tmp / "work",
        log_path=tmp / "build.log",
        content_hash=content_hash,
    )
    assert out.status is Status.OK and out.environment is not None, out.message
    yield out.environment
    subprocess.run(
        [engine.docker, "rmi", "-f", docker.image_tag(cell, content_hash)],
        capture_output=True,
        check=False,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _exists(engine: _docker_cli.ContainerEngine, name: str) -> bool:
    res = subprocess.run(
        [engine.docker, "container", "inspect", name], capture_output=True, check=False
    )
    return res.returncode == 0


def _fetch(url: str, timeout_s: float = 60.0) -> bytes:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - http://127.0.0.1
                return bytes(resp.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_server_in_container_is_reached_from_host_and_removed(
    environment: Environment,
    engine: _docker_cli.ContainerEngine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama"}')
    port = _free_port()
    name = f"stackmatrix-test-{uuid.uuid4().hex[:8]}"
    token = f"hf_{uuid.uuid4().hex}"
    monkeypatch.setenv("HF_TOKEN", token)
    argv = docker.container_command(
        environment,
        [
            "python",
            "-m",
            "http.server",
            str(port),
            "--bind",
            "127.0.0.1",
            "--directory",
            "/models/m",
        ],
        name=name,
        port=port,
        mounts=[(str(model), "/models/m")],
        gpus=False,
    )
    assert token not in " ".join(argv) and argv[argv.index("HF_TOKEN") - 1 :][:2] == [
        "--env",
        "HF_TOKEN",
    ]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        with docker.removing(name):
            body = _fetch(f"http://127.0.0.1:{port}/config.json")
            assert body == b'{"model_type": "llama"}'
            assert _exists(engine, name)
    finally:
        _stop(proc)
    assert not _exists(engine, name)


def test_container_sees_env_and_secret_by_name_and_a_read_only_mount(
    environment: Environment,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = f"hf_{uuid.uuid4().hex}"
    monkeypatch.setenv("HF_TOKEN", token)
    script = (
        "import hashlib, os, sys\n"
        "print(hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest())\n"
        "print(os.environ['STACKMATRIX_TEST_SETTING'], sys.prefix)\n"
        "try:\n    open('/models/m/new', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
    )
    name = f"stackmatrix-test-{uuid.uuid4().hex[:8]}"
    argv = docker.container_command(
        environment,
        ["python", "-c", script],
        name=name,
        port=_free_port(),
        mounts=[(str(tmp_path), "/models/m")],
        gpus=False,
    )
    with docker.removing(name):
        out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    lines = out.stdout.split("\n")
    assert lines[0] == hashlib.sha256(token.encode()).hexdigest()
    assert lines[1] == f"42 {docker.VENV_PATH}"
    assert lines[2] == "ro 30"  # EROFS
    assert not list(tmp_path.iterdir())


def test_ctrl_c_removes_the_container(
    environment: Environment, engine: _docker_cli.ContainerEngine
) -> None:
    name = f"stackmatrix-test-{uuid.uuid4().hex[:8]}"
    argv = docker.container_command(
        environment,
        ["python", "-c", "import time; time.sleep(600)"],
        name=name,
        port=_free_port(),
        mounts=[],
        gpus=False,
    )
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        with pytest.raises(KeyboardInterrupt), docker.removing(name):
            deadline = time.monotonic() + 60
            while not _exists(engine, name):
                assert time.monotonic() < deadline, "the container never started"
                time.sleep(0.2)
            raise KeyboardInterrupt
        assert not _exists(engine, name)
    finally:
        _stop(proc)


def test_containers_of_others_are_left_alone(
    engine: _docker_cli.ContainerEngine, base_image: str
) -> None:
    name = f"not-ours-{uuid.uuid4().hex[:8]}"
    cid = subprocess.run(
        [engine.docker, "create", "--name", name, base_image, "/bin/true"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    try:
        docker.remove_container(name)
        assert _exists(engine, name)
        ours = f"stackmatrix-test-{uuid.uuid4().hex[:8]}"
        other_owner = subprocess.run(
            [
                engine.docker,
                "create",
                "--name",
                ours,
                "--label",
                f"{docker.OWNER_LABEL}=someone",
                base_image,
                "/bin/true",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        docker.remove_container(ours, owner=docker.default_owner())
        assert _exists(engine, ours)  # another run's container
        docker.remove_container(ours)
        assert not _exists(engine, ours)
        del other_owner
    finally:
        subprocess.run([engine.docker, "rm", "-f", cid], capture_output=True, check=False)


_SEEN = (
    "import os, pathlib\n"
    "base = pathlib.Path(os.environ['FLASHINFER_WORKSPACE_BASE'])\n"
    "mark = base / 'compiled.so'\n"
    "print('kept' if mark.exists() else 'cold', os.environ['TRITON_CACHE_DIR'])\n"
    "mark.write_text('kernel')\n"
)


def test_jit_caches_outlive_each_launchs_container(
    environment: Environment, engine: _docker_cli.ContainerEngine
) -> None:
    # each launch is a new --rm container: without the volume the second would be cold
    from stackmatrix.builder import jitcache

    assert environment.image is not None
    volume = jitcache.cache_volume(environment.image)
    assert volume == jitcache.volume_name(environment.image)
    try:
        seen = []
        for _ in range(2):
            name = f"stackmatrix-test-{uuid.uuid4().hex[:8]}"
            argv = docker.container_command(
                environment,
                ["python", "-c", _SEEN],
                name=name,
                port=_free_port(),
                mounts=[],
                gpus=False,
                cache_volume=volume,
            )
            res = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
            assert res.returncode == 0, res.stderr
            seen.append(res.stdout.strip())
        assert seen == [
            "cold /var/cache/stackmatrix-jit/triton",
            "kept /var/cache/stackmatrix-jit/triton",
        ]
        labels = subprocess.run(
            [engine.docker, "volume", "inspect", "--format", "{{json .Labels}}", volume],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert environment.image in labels  # ours, and whose
    finally:
        subprocess.run(
            [engine.docker, "volume", "rm", "-f", str(volume)], capture_output=True, check=False
        )


def test_an_image_that_is_not_root_keeps_its_caches_in_the_container(
    base_image: str, engine: _docker_cli.ContainerEngine
) -> None:
    from stackmatrix.builder import jitcache

    tag = f"stackmatrix-test/nonroot:{uuid.uuid4().hex[:8]}"
    cid = subprocess.run(
        [engine.docker, "create", base_image, "true"], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        subprocess.run(
            [engine.docker, "commit", "--change", "USER 1000", cid, tag],
            capture_output=True,
            check=True,
        )
        assert jitcache.cache_volume(tag) is None  # a root-owned volume it cannot write
        listed = subprocess.run(
            [engine.docker, "volume", "ls", "-q"], capture_output=True, text=True, check=True
        ).stdout
        assert jitcache.volume_name(tag) not in listed
    finally:
        subprocess.run([engine.docker, "rm", "-f", cid], capture_output=True, check=False)
        subprocess.run([engine.docker, "rmi", "-f", tag], capture_output=True, check=False)
