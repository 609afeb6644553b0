"""The CUDA template really builds: rendered for a CUDA 13 cell, built here on the
local Debian base instead of nvidia/cuda (which this machine can't pull). The template
installs the distribution's python3 with apt and the pins with uv, as on the real base."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from stackmatrix.builder import _docker_cli, _docker_context
from stackmatrix.spec_model import Cell

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def test_cuda_template_builds_on_an_apt_base(
    engine: _docker_cli.ContainerEngine, base_image: str, host_ca: str, tmp_path: Path
) -> None:
    cell = Cell(
        id="cu130-small",
        backend="docker",
        cuda="13.0",
        python="3.11",
        pins=("six==1.16.0",),
        ca_certs=(host_ca,),
    )
    ctx = _docker_context.render(
        cell, spec_dir=tmp_path, dest=tmp_path / "ctx", buildkit=engine.buildkit
    )
    assert ctx.family == "cuda" and ctx.base_image == "nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04"
    tag = f"stackmatrix-test/cuda-template:{uuid.uuid4().hex[:12]}"
    build = subprocess.run(
        [
            engine.docker,
            "build",
            "--network=host",
            "-t",
            tag,
            "--build-arg",
            f"BASE_IMAGE={base_image}",
            str(ctx.path),
        ],
        env=_docker_cli.build_env(engine),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    try:
        assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
        run = subprocess.run(
            [
                engine.docker,
                "run",
                "--rm",
                "--network=none",
                tag,
                "python",
                "-c",
                "import six, sys; print(six.__version__, sys.prefix)",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        assert run.stdout.split() == ["1.16.0", _docker_context.VENV_PATH]
    finally:
        subprocess.run([engine.docker, "rmi", "-f", tag], capture_output=True, check=False)
