"""Where a cell's server keeps its JIT caches: warm from one launch of the
cell to the next, and apart from other cells where sharing would cost.

FlashInfer compiles kernels at first use into one cache per user (~/.cache/flashinfer,
under $FLASHINFER_WORKSPACE_BASE when set), and its build files name the sources and
include directories by their absolute paths in the installed package. Two venvs that
alternate on one machine rewrite each other's build files, and each start recompiles
what the other one compiled: in the H200 explain round, where two flashinfer venvs
alternated, every SGLang start took 110-120 s longer than a warm start of one venv
(reports/examples/h200-sglang-explain-warm/README.md). So a venv's server keeps
FlashInfer's cache in the venv's own directory (`venv_env`), and torch.compile's
(Inductor's, which is /tmp/torchinductor_<user> otherwise: outside anything of ours, and
shared by whoever runs there) beside it. Triton's cache is keyed by content and stays
shared.

A docker cell's server runs in a new `--rm` container at every launch, so what it
compiled would be gone at the next launch and a warm-up launch would warm nothing of
the container's (the H200's cold first launches were 30-66% slower). Each image gets a
docker volume of its own, labelled as ours, mounted at `TARGET` in its server
containers, with the caches' variables pointing there (`cache_volume`, `volume_env`);
inside one image the paths are the same at every launch. Only for an image that runs
as root: a new volume is owned by root, and another user could not write in it (such
an image keeps its caches in the container, as before, and the log says so). The
volumes stay after the run, like the work dir's environments: `docker volume ls
--filter label=stackmatrix.jit` lists them, `docker volume rm` removes one.

A variable the cell's env sets (or, for a venv, the environment stackmatrix runs in)
is left as chosen.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping

from stackmatrix import _proc
from stackmatrix.builder import _docker_cli
from stackmatrix.builder.base import Environment

log = logging.getLogger(__name__)

FLASHINFER = "FLASHINFER_WORKSPACE_BASE"
TRITON = "TRITON_CACHE_DIR"
INDUCTOR = "TORCHINDUCTOR_CACHE_DIR"
VENV_DIR = "jit-cache"  # in the venv's directory
TARGET = "/var/cache/stackmatrix-jit"  # the volume, in a container
LABEL = "stackmatrix.jit"
_ROOT_USERS = ("", "root", "0")


def _unset(defaults: Mapping[str, str], *chosen: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in defaults.items() if not any(k in c for c in chosen)}


def venv_env(env: Environment) -> dict[str, str]:
    """A venv server's FlashInfer and Inductor caches, in the venv's own directory."""
    if env.prefix is None:
        return {}
    mine = env.prefix / VENV_DIR
    return _unset(
        {FLASHINFER: str(mine), INDUCTOR: str(mine / "torchinductor")}, env.env, os.environ
    )


def volume_env(cell_env: Mapping[str, str]) -> dict[str, str]:
    """A docker server's caches, in its image's volume (mounted at `TARGET`)."""
    return _unset(
        {FLASHINFER: TARGET, TRITON: f"{TARGET}/triton", INDUCTOR: f"{TARGET}/torchinductor"},
        cell_env,
    )


def volume_name(image: str) -> str:
    return "stackmatrix-jit-" + hashlib.sha256(image.encode("utf-8")).hexdigest()[:12]


def cache_volume(image: str) -> str | None:
    """The volume that keeps `image`'s JIT caches (created when missing), or None when
    the image does not run as root or docker cannot tell."""
    docker = _docker_cli.docker_executable()
    if docker is None:
        return None
    res = _proc.run(
        [docker, "image", "inspect", "--format", "{{.Config.User}}", image], timeout=60.0
    )
    if not res.ok:
        log.warning("could not read the user of image %s; its JIT caches are not kept", image)
        return None
    user = res.output.strip().split(":", 1)[0]
    if user not in _ROOT_USERS:
        log.info("image %s runs as %r: its JIT caches stay in each container", image, user)
        return None
    name = volume_name(image)
    made = _proc.run(
        [docker, "volume", "create", "--label", f"{LABEL}={image}", name], timeout=60.0
    )
    if not made.ok:
        log.warning("could not create volume %s: %s; JIT caches not kept", name, made.tail(2))
        return None
    return name
