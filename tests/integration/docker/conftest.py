"""A real Docker engine and a locally made base image (no registry is reachable here).

The base is Debian bookworm minbase with python3, made by debootstrap and
`docker import`ed; it is reused while the engine has it, and its root filesystem
tarball is cached under ~/.cache so a fresh engine gets it back in seconds.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackmatrix.builder import _docker_cli

BASE_IMAGE = "stackmatrix-test/bookworm-python:1"
NO_PYTHON_IMAGE = "stackmatrix-test/no-python:1"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stackmatrix-test"
DEBIAN_MIRROR = "http://deb.debian.org/debian"


@pytest.fixture(scope="session")
def engine() -> Iterator[_docker_cli.ContainerEngine]:
    found = _docker_cli.probe_engine()
    if isinstance(found, _docker_cli.EngineProblem):
        message = f"no Docker engine: {found.message}"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI must run these: call .ci/start-dockerd.sh first)")
        pytest.skip(message)
    with pytest.MonkeyPatch.context() as mp:
        yield _prefer_buildkit(found, mp)


def _prefer_buildkit(
    found: _docker_cli.ContainerEngine, mp: pytest.MonkeyPatch
) -> _docker_cli.ContainerEngine:
    """On the vfs storage driver a legacy build copies the whole image per step (about
    100 s against 15 s with BuildKit); Debian's docker.io client does BuildKit without
    the buildx plugin that newer clients need, so use it when the default can't."""
    debian_client = Path("/usr/bin/docker")
    if found.buildkit or not debian_client.is_file() or found.docker == str(debian_client):
        return found
    mp.setenv(_docker_cli.DOCKER_ENV, str(debian_client))
    other = _docker_cli.probe_engine()
    if isinstance(other, _docker_cli.ContainerEngine) and other.buildkit:
        return other
    mp.delenv(_docker_cli.DOCKER_ENV)
    return found


def _docker(engine: _docker_cli.ContainerEngine, *args: str, stdin: bytes | None = None) -> str:
    res = subprocess.run(
        [engine.docker, *args], input=stdin, capture_output=True, check=False, timeout=900
    )
    if res.returncode != 0:
        raise AssertionError(f"docker {args[0]} failed: {res.stderr.decode()[-2000:]}")
    return res.stdout.decode()


def _image_exists(engine: _docker_cli.ContainerEngine, ref: str) -> bool:
    return _docker_cli.inspect_image(engine.docker, ref) is not None


def _debootstrap_tarball() -> Path:
    tarball = CACHE / "bookworm-python.tar"
    if tarball.is_file():
        return tarball
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        pytest.fail("debootstrap is missing; .ci/start-dockerd.sh installs it (apt-get)")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        root = Path(tmp) / "root"
        made = subprocess.run(
            [
                debootstrap,
                "--variant=minbase",
                "--include=python3,ca-certificates",
                "bookworm",
                str(root),
                DEBIAN_MIRROR,
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        if made.returncode != 0:
            pytest.fail(
                f"debootstrap of Debian bookworm from {DEBIAN_MIRROR} failed (exit "
                f"{made.returncode}); the docker tests build their base image from it, so "
                f"that mirror must be reachable:\n{(made.stdout + made.stderr)[-3000:]}"
            )
        partial = tarball.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(root), "-cf", str(partial), "."], check=True)
        partial.rename(tarball)
    return tarball


@pytest.fixture(scope="session")
def base_image(engine: _docker_cli.ContainerEngine) -> str:
    if not _image_exists(engine, BASE_IMAGE):
        tarball = _debootstrap_tarball()
        _docker(engine, "import", str(tarball), BASE_IMAGE)
    return BASE_IMAGE


@pytest.fixture(scope="session")
def no_python_image(engine: _docker_cli.ContainerEngine) -> str:
    """An image with one file in it: no shell, no python."""
    if not _image_exists(engine, NO_PYTHON_IMAGE):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            data = b"stackmatrix test image without python\n"
            info = tarfile.TarInfo("etc/motd")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        _docker(engine, "import", "-", NO_PYTHON_IMAGE, stdin=buf.getvalue())
    return NO_PYTHON_IMAGE


@pytest.fixture(scope="session")
def host_ca() -> str:
    """TLS is intercepted on these machines: builds need the host's CA bundle."""
    for candidate in (os.environ.get("SSL_CERT_FILE"), "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.fail("no host CA bundle found (install ca-certificates)")
