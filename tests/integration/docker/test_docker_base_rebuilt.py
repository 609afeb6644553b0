"""A cell image is rebuilt when its base was rebuilt with other files, though the
content hash (which names the base, not its id) is the same."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from stackmatrix.builder import _docker_cli, docker
from stackmatrix.builder.base import BuildOutcome
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def _make_base(
    engine: _docker_cli.ContainerEngine, base_image: str, tag: str, tmp: Path, n: int
) -> None:
    context = tmp / f"base-{n}"
    context.mkdir()
    # the local CUDA bases are made the same way: a layer on the Debian base
    (context / "Dockerfile").write_text(
        f'FROM {base_image}\nRUN ["python3", "-c", "open(\'/etc/base-version\', \'w\')'
        f".write('{n}')\"]\n"
    )
    subprocess.run(
        [engine.docker, "build", "--network=host", "-t", tag, str(context)],
        env=_docker_cli.build_env(engine),
        capture_output=True,
        check=True,
        timeout=600,
    )


def _build(cell: Cell, tmp: Path, content_hash: str, n: int) -> tuple[BuildOutcome, str]:
    log = tmp / f"build-{n}.log"
    out = docker.build(
        cell, spec_dir=tmp, work_dir=tmp / "work", log_path=log, content_hash=content_hash
    )
    assert out.status is Status.OK, (out.message, log.read_text()[-3000:])
    return out, log.read_text()


def test_a_rebuilt_base_rebuilds_the_cell(
    engine: _docker_cli.ContainerEngine, base_image: str, host_ca: str, tmp_path: Path
) -> None:
    session = uuid.uuid4().hex
    base = f"stackmatrix-test/rebuilt-base:{session[:12]}"
    cell = Cell(
        id="on-rebuilt-base",
        backend="docker",
        base_image=base,
        python="3.11",
        pins=("six==1.16.0",),
        ca_certs=(host_ca,),
    )
    tag = docker.image_tag(cell, session)
    made: list[str] = [tag, base]  # and the two images the rebuilds leave untagged
    try:
        _make_base(engine, base_image, base, tmp_path, 1)
        first, _ = _build(cell, tmp_path, session, 1)
        assert not first.reused
        made += [str(first.data["image_id"]), str(first.data["base_image"]["id"])]
        again, _ = _build(cell, tmp_path, session, 2)
        assert again.reused  # the same base: reused as before
        _make_base(engine, base_image, base, tmp_path, 2)  # the same tag, other files
        rebuilt, log = _build(cell, tmp_path, session, 3)
        assert not rebuilt.reused and f"rebuilding {tag}: its base image {base!r}" in log
        assert rebuilt.data["image_id"] != first.data["image_id"]
        assert rebuilt.environment is not None and rebuilt.environment.root is not None
        assert (rebuilt.environment.root / "etc/base-version").read_text() == "2"
        assert _build(cell, tmp_path, session, 4)[0].reused
    finally:
        subprocess.run([engine.docker, "rmi", "-f", *made], capture_output=True, check=False)
