"""Real Docker engine, real PyPI through --network=host: cell images built, locked,
reused, failures recorded as statuses, secrets kept out of images and logs."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackmatrix.builder import _docker_cli, docker
from stackmatrix.builder.base import BuildOutcome
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell

pytestmark = [pytest.mark.integration, pytest.mark.docker]

# unique per session so that the first build really builds
SESSION = uuid.uuid4().hex
TOKEN = f"hf_stackmatrix_test_{uuid.uuid4().hex}"


@dataclasses.dataclass
class Built:
    cell: Cell
    outcome: BuildOutcome
    log: Path
    work_dir: Path
    content_hash: str


def _build(
    cell: Cell, tmp: Path, content_hash: str, name: str = "build"
) -> tuple[BuildOutcome, Path]:
    log = tmp / f"{name}.log"
    out = docker.build(
        cell, spec_dir=tmp, work_dir=tmp / "work", log_path=log, content_hash=content_hash
    )
    return out, log


def _rmi(engine: _docker_cli.ContainerEngine, *refs: str) -> None:
    for ref in refs:
        subprocess.run([engine.docker, "rmi", "-f", ref], capture_output=True, check=False)


@pytest.fixture(scope="module")
def built(
    engine: _docker_cli.ContainerEngine,
    base_image: str,
    host_ca: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Built]:
    tmp = tmp_path_factory.mktemp("docker-cell")
    cell = Cell(
        id="Smoke_Cell",
        backend="docker",
        base_image=base_image,
        python="3.11",
        pins=("packaging==24.1", "six==1.16.0", "pyparsing>=3.1,<3.2"),
        ca_certs=(host_ca,),
        env=(("HF_TOKEN", TOKEN), ("STACKMATRIX_TEST_SETTING", "on")),
    )
    content_hash = f"{SESSION}{'0' * 12}"
    saved = os.environ.get("HF_TOKEN")
    os.environ["HF_TOKEN"] = TOKEN  # a host secret too: it must not reach the build
    try:
        outcome, log = _build(cell, tmp, content_hash)
    finally:
        if saved is None:
            os.environ.pop("HF_TOKEN", None)
        else:
            os.environ["HF_TOKEN"] = saved
    yield Built(
        cell=cell, outcome=outcome, log=log, work_dir=tmp / "work", content_hash=content_hash
    )
    _rmi(engine, docker.image_tag(cell, content_hash))


def test_build_records_image_lock_and_drift(
    built: Built, engine: _docker_cli.ContainerEngine
) -> None:
    out = built.outcome
    assert out.status is Status.OK, (out.code, out.message, built.log.read_text()[-3000:])
    assert not out.reused
    tag = docker.image_tag(built.cell, built.content_hash)
    assert tag == f"stackmatrix/smoke_cell:{built.content_hash[:12]}"
    versions = {e.name: e.version for e in out.lock}
    assert versions["packaging"] == "24.1" and versions["six"] == "1.16.0"
    assert versions["pyparsing"].startswith("3.1.")
    assert all(e.requested for e in out.lock if e.name in versions)
    assert {e.source for e in out.lock} == {"registry:https://pypi.org/simple"}
    drift = [f for f in out.findings if f.code == "SM-DRIFT-RANGE"]
    assert [f.subject for f in drift] == ["pyparsing"]
    inspected = _docker_cli.inspect_image(engine.docker, tag)
    assert inspected is not None
    assert out.data["image_id"] == inspected["Id"]
    assert out.data["size_bytes"] == inspected["Size"] > 0
    base = _docker_cli.inspect_image(engine.docker, built.cell.base_image or "")
    assert base is not None and out.data["base_image"]["id"] == base["Id"]
    assert "docker build" in built.log.read_text()


def test_environment_points_into_the_image(built: Built) -> None:
    env = built.outcome.environment
    assert env is not None and env.backend == "docker" and env.prefix is None
    assert env.image == docker.image_tag(built.cell, built.content_hash)
    # the exported root is the image's (Debian 12), with the venv's site-packages
    assert (env.root / "etc/debian_version").read_text().startswith("12.")
    assert [p.name for p in env.site_packages] == ["site-packages"]
    assert (env.site_packages[0] / "packaging" / "__init__.py").is_file()
    assert env.env == {"STACKMATRIX_TEST_SETTING": "on"}
    res = subprocess.run(
        [*env.python, "-c", "import packaging, six, sys; print(packaging.__version__, sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert res.stdout.split() == ["24.1", docker.VENV_PATH]


def test_second_build_reuses_the_image(built: Built, tmp_path: Path) -> None:
    again, log = _build(built.cell, tmp_path, built.content_hash)
    assert again.status is Status.OK, again.message
    assert again.reused and again.message.startswith("reused existing image")
    assert again.data["image_id"] == built.outcome.data["image_id"]
    assert again.lock == built.outcome.lock
    assert "reused image" in log.read_text() and "docker build" not in log.read_text()


def test_secrets_never_reach_image_build_or_reports(
    built: Built, engine: _docker_cli.ContainerEngine
) -> None:
    tag = docker.image_tag(built.cell, built.content_hash)
    history = subprocess.run(
        [engine.docker, "history", "--no-trunc", tag], capture_output=True, text=True, check=True
    ).stdout
    config = subprocess.run(
        [engine.docker, "image", "inspect", tag], capture_output=True, text=True, check=True
    ).stdout
    assert "stackmatrix.content_hash" in config  # the inspection did see the config
    report = json.dumps(
        {
            "environment": built.outcome.environment.to_dict()
            if built.outcome.environment
            else None,
            "data": built.outcome.data,
            "message": built.outcome.message,
            "findings": [f.to_dict() for f in built.outcome.findings],
        }
    )
    context = "".join(
        p.read_text(errors="replace")
        for p in (built.work_dir / "docker").rglob("*")
        if p.is_file() and p.name != "uv" and "rootfs-" not in str(p)
    )
    for where, text in [
        ("history", history),
        ("image config", config),
        ("build log", built.log.read_text()),
        ("report", report),
        ("build context", context),
    ]:
        assert TOKEN not in text, f"the secret leaked into the {where}"
    # nor into the image's files (the rootfs export has every file of the image)
    assert built.outcome.environment is not None
    grep = subprocess.run(
        ["grep", "-rl", TOKEN, str(built.outcome.environment.root)],
        capture_output=True,
        check=False,
    )
    assert grep.returncode == 1, grep.stdout
    secret = [f for f in built.outcome.findings if f.code == "SM-DOCKER-SECRET-IN-SPEC"]
    assert [f.subject for f in secret] == ["HF_TOKEN"]


def _install_containers(engine: _docker_cli.ContainerEngine) -> set[str]:
    """Containers left by a build step of ours (the legacy builder keeps failed ones)."""
    out = subprocess.run(
        [engine.docker, "ps", "-a", "--no-trunc", "--format", "{{.ID}} {{.Command}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {line.split()[0] for line in out.splitlines() if "stackmatrix/build/install.py" in line}


@pytest.mark.parametrize("mode", ["buildkit", "legacy"])
def test_failed_build_is_a_status(
    mode: str,
    engine: _docker_cli.ContainerEngine,
    base_image: str,
    host_ca: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STACKMATRIX_DOCKER", _client_for(mode, engine))
    monkeypatch.setenv("STACKMATRIX_DOCKER_BUILDKIT", "1" if mode == "buildkit" else "0")
    before = _install_containers(engine)
    cell = Cell(
        id="nosuch",
        backend="docker",
        base_image=base_image,
        pins=("packaging==0.0.1",),
        ca_certs=(host_ca,),
    )
    out, log = _build(cell, tmp_path, f"{SESSION}1{mode}")
    assert out.status is Status.FAILED and out.code == "build_failed"
    assert out.environment is None
    assert "packaging" in out.message and "packaging==0.0.1" in log.read_text()
    tag = docker.image_tag(cell, f"{SESSION}1{mode}")
    assert _docker_cli.inspect_image(engine.docker, tag) is None
    assert _install_containers(engine) <= before


def test_base_without_python_is_no_python(no_python_image: str, tmp_path: Path) -> None:
    cell = Cell(id="nopy", backend="docker", base_image=no_python_image, pins=("six==1.16.0",))
    out, _ = _build(cell, tmp_path, f"{SESSION}2")
    assert out.status is Status.FAILED and out.code == "no_python", out.message
    assert no_python_image in out.message


def test_image_without_the_venv_is_no_python(
    engine: _docker_cli.ContainerEngine, base_image: str, tmp_path: Path
) -> None:
    # an image already carrying the tag, but not built by us: python3 yes, venv no
    cell = Cell(id="foreign", backend="docker", base_image=base_image)
    tag = docker.image_tag(cell, f"{SESSION}3")
    subprocess.run([engine.docker, "tag", base_image, tag], check=True)
    try:
        out, _ = _build(cell, tmp_path, f"{SESSION}3")
    finally:
        _rmi(engine, tag)
    assert out.status is Status.FAILED and out.code == "no_python", out.message
    assert f"docker rmi {tag}" in out.message


def test_stopped_engine_is_docker_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    cell = Cell(id="any", backend="docker", base_image="debian:bookworm")
    out, log = _build(cell, tmp_path, "f" * 64)
    assert out.status is Status.FAILED and out.code == "docker_unavailable"
    assert "start dockerd" in out.message and "start dockerd" in log.read_text()


def _client_for(mode: str, engine: _docker_cli.ContainerEngine) -> str:
    if mode == "legacy" or engine.buildkit:
        return engine.docker
    # Debian's docker.io client (20.10) runs BuildKit builds without the buildx plugin
    old = shutil.which("docker", path="/usr/bin")
    if old is None:
        pytest.fail("no BuildKit-capable docker client (install docker.io or buildx)")
    return old


@pytest.mark.parametrize("mode", ["buildkit", "legacy"])
def test_both_builders_make_the_same_venv(
    mode: str,
    engine: _docker_cli.ContainerEngine,
    base_image: str,
    host_ca: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STACKMATRIX_DOCKER", _client_for(mode, engine))
    monkeypatch.setenv("STACKMATRIX_DOCKER_BUILDKIT", "1" if mode == "buildkit" else "0")
    cell = Cell(
        id=f"mode-{mode}",
        backend="docker",
        base_image=base_image,
        pins=("six==1.16.0",),
        ca_certs=(host_ca,),
    )
    content_hash = f"{SESSION}4{mode}"
    out, log = _build(cell, tmp_path, content_hash)
    try:
        assert out.status is Status.OK, (out.message, log.read_text()[-3000:])
        assert out.data["docker"]["buildkit"] is (mode == "buildkit")
        assert [(e.name, e.version) for e in out.lock] == [("six", "1.16.0")]
        history = subprocess.run(
            [engine.docker, "history", "--no-trunc", docker.image_tag(cell, content_hash)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        # the build files (uv, plan, CA bundle) never land in a layer of the final image
        assert "COPY stackmatrix" not in history
        assert out.environment is not None
        # (BuildKit leaves the bind mount's empty mount point behind)
        build_dir = out.environment.root / "opt/stackmatrix/build"
        assert not build_dir.exists() or not any(build_dir.iterdir())
        assert (out.environment.root / "opt/stackmatrix/venv/bin/python").exists()
    finally:
        _rmi(engine, docker.image_tag(cell, content_hash))
