"""Credentials in a pin URL reach uv inside a real docker build, and neither the image,
its history, the build context we keep nor the build log. The
index is local and answers only with the right basic-auth header (--network=host)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.auth_index import PASSWORD, USER, WHEEL, auth_index, files_holding

from stackmatrix.builder import _docker_cli, docker
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell

pytestmark = [pytest.mark.integration, pytest.mark.docker]


@pytest.fixture
def index() -> Iterator[str]:
    with auth_index() as where:
        yield where


def _cell(base_image: str, index: str, mode: str) -> Cell:
    return Cell(
        id=f"cred-{mode}",
        backend="docker",
        base_image=base_image,
        python="3.11",
        pins=(f"credpkg @ http://{USER}:{PASSWORD}@{index}/files/{WHEEL}",),
    )


def test_buildkit_build_keeps_no_credentials(
    engine: _docker_cli.ContainerEngine, base_image: str, index: str, tmp_path: Path
) -> None:
    if not engine.buildkit:
        pytest.fail("the suite's engine fixture prefers BuildKit; it is not available")
    cell = _cell(base_image, index, "buildkit")
    content_hash = uuid.uuid4().hex
    log = tmp_path / "build.log"
    out = docker.build(
        cell, spec_dir=tmp_path, work_dir=tmp_path / "work", log_path=log, content_hash=content_hash
    )
    tag = docker.image_tag(cell, content_hash)
    try:
        assert out.status is Status.OK, (out.message, log.read_text()[-3000:])
        assert "credpkg" in {e.name for e in out.lock}
        assert out.environment is not None and out.environment.root is not None
        secret = PASSWORD.encode()
        assert files_holding(out.environment.root, secret) == []  # every file of the image
        assert files_holding(tmp_path / "work" / "docker", secret) == []  # context, rootfs
        assert PASSWORD not in log.read_text()
        history = subprocess.run(
            [engine.docker, "history", "--no-trunc", tag],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert PASSWORD not in history
        # the lock in the image still says where credpkg came from
        locks = list((out.environment.root / "opt/stackmatrix/venv").glob("*.txt"))
        assert any(f"{USER}:" not in p.read_text() and "credpkg" in p.read_text() for p in locks)
    finally:
        subprocess.run([engine.docker, "rmi", "-f", tag], capture_output=True, check=False)


def test_legacy_builder_refuses_credentials(
    engine: _docker_cli.ContainerEngine,
    base_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STACKMATRIX_DOCKER_BUILDKIT", "0")
    cell = _cell(base_image, "127.0.0.1:9", "legacy")  # refused before anything is fetched
    log = tmp_path / "build.log"
    out = docker.build(
        cell,
        spec_dir=tmp_path,
        work_dir=tmp_path / "work",
        log_path=log,
        content_hash=uuid.uuid4().hex,
    )
    assert out.status is Status.FAILED
    assert "BuildKit" in out.message and "credentials" in out.message
    assert PASSWORD not in out.message + log.read_text()
