"""A docker cell's JIT caches, kept between its launches (issue 13).

A server runs in a new `--rm` container at every launch, so what FlashInfer and Triton
compiled in one launch is gone in the next, and a warm-up launch warms nothing of the
container's: every measured launch would pay for compiling kernels, as the first,
cold, launches of the H200 explain round did (30-66% slower). Each image therefore
gets a docker volume of its own, labelled as ours, mounted at `TARGET` in its server
containers, with the caches' variables pointing there. One volume per image: inside an
image the paths that FlashInfer's build files name are the same at every launch, and
another image (another cell) never shares it.

Only for an image that runs as root: a new volume is owned by root, and another user
could not write in it (such an image keeps its caches in the container, as before, and
the log says so). The volumes stay after the run, like the work dir's environments:
`docker volume ls --filter label=stackmatrix.jit` lists them, `docker volume rm`
removes one.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping

from stackmatrix import _proc
from stackmatrix.envs import _docker_cli

log = logging.getLogger(__name__)

TARGET = "/var/cache/stackmatrix-jit"
LABEL = "stackmatrix.jit"
# each cache's variable -> its directory in the volume
CACHE_VARS: dict[str, str] = {
    "FLASHINFER_WORKSPACE_BASE": TARGET,
    "TRITON_CACHE_DIR": f"{TARGET}/triton",
}
_ROOT_USERS = ("", "root", "0")


def volume_name(image: str) -> str:
    return "stackmatrix-jit-" + hashlib.sha256(image.encode("utf-8")).hexdigest()[:12]


def cache_volume(image: str) -> str | None:
    """The volume that keeps `image`'s JIT caches (created when missing), or None when
    the image does not run as root or docker cannot tell."""
    docker = _docker_cli.docker_executable()
    if docker is None:
        return None
    res = _proc.run([docker, "image", "inspect", "--format", "{{.Config.User}}", image],
                    timeout=60.0)  # fmt: skip
    if not res.ok:
        log.warning("could not read the user of image %s; its JIT caches are not kept", image)
        return None
    user = res.output.strip().split(":", 1)[0]
    if user not in _ROOT_USERS:
        log.info("image %s runs as %r: its JIT caches stay in each container", image, user)
        return None
    name = volume_name(image)
    made = _proc.run([docker, "volume", "create", "--label", f"{LABEL}={image}", name],
                     timeout=60.0)  # fmt: skip
    if not made.ok:
        log.warning("could not create volume %s: %s; JIT caches not kept", name, made.tail(2))
        return None
    return name


def cache_env(cell_env: Mapping[str, str]) -> dict[str, str]:
    """The caches' variables, but for those the cell sets itself."""
    return {k: v for k, v in CACHE_VARS.items() if k not in cell_env}
