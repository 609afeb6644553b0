"""The docker backend's containers for the bench phase: the engine's `docker run`, the
image's python for a job that writes on the host, and their removal.

Every container started here carries our owner label (`OWNER_LABEL`), and only a
container carrying it is ever removed (`remove_container`, `removing`: on every exit
path, Ctrl-C too). Secrets reach a container by name only (`--env NAME`,
`PASS_ENV`), the docker client passing on the value from this process's environment.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from stackmatrix import _proc
from stackmatrix.builder import _docker_cli, jitcache
from stackmatrix.builder._docker_context import IMAGE_PYTHON
from stackmatrix.builder.base import Environment

log = logging.getLogger(__name__)

REMOVE_WAIT_S = 120.0  # an auto-removal in progress, on slow (vfs) storage
OWNER_LABEL = "stackmatrix.owner"
# secrets forwarded by name into containers when set here (values never in argv)
PASS_ENV: tuple[str, ...] = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def default_owner() -> str:
    """The owner label value of the containers this process starts."""
    return f"stackmatrix-{os.getpid()}"


def container_command(
    environment: Environment,
    inner_argv: Sequence[str],
    *,
    name: str,
    port: int,
    mounts: Sequence[tuple[str, str]],
    gpus: bool,
    network: str = "host",
    shm_size: str = "16g",
    owner: str | None = None,
    pass_env: Sequence[str] = PASS_ENV,
    cache_volume: str | None = None,
) -> list[str]:
    """The `docker run` argv that runs `inner_argv` in the environment's image.

    `network="host"` (the default) shares the host's network: the server's `port` is
    reachable on the host as is, and it is the mode that works on engines started
    with `--bridge=none` (CI here). Any other network publishes `port` on the host's
    127.0.0.1. `mounts` are (host path, container path) pairs, mounted read-only (the
    model directory). `cache_volume` (`jitcache.cache_volume`) keeps the JIT caches
    between launches. Inside, `python` is the cell's venv interpreter (it is first on
    PATH; `IMAGE_PYTHON` is its full path). Run it, then `remove_container(name)` on
    every exit path (see `removing`).
    """
    if environment.image is None:
        raise ValueError(f"environment of backend {environment.backend!r} has no image")
    docker = _docker_cli.docker_executable() or "docker"
    argv = [
        docker,
        "run",
        "--rm",
        "--init",
        "--name",
        name,
        "--label",
        f"{OWNER_LABEL}={owner or default_owner()}",
    ]
    argv += _network_args(network, port)
    if gpus:
        argv += ["--gpus", "all", "--ipc=host", "--shm-size", shm_size]
    for host, target in mounts:
        argv += [
            "--mount",
            _csv_field("type=bind", f"source={host}", f"target={target}", "readonly"),
        ]
    env = dict(environment.env)
    if cache_volume is not None:
        target = jitcache.TARGET
        argv += ["--mount", _csv_field("type=volume", f"source={cache_volume}", f"target={target}")]
        env = {**jitcache.volume_env(environment.env), **env}
    for key, value in sorted(env.items()):
        argv += ["--env", f"{key}={value}"]
    # by name only: the docker client copies the value from its own environment
    argv += [
        x for n in pass_env if n in os.environ and n not in environment.env for x in ("--env", n)
    ]
    return [*argv, environment.image, *inner_argv]


def python_command(
    environment: Environment, *, writable: Sequence[Path], owner: str | None = None
) -> list[str]:
    """`docker run --rm -i` of the image's venv python, without network, for a job
    that writes files on the host (the generated tiny model): each `writable`
    directory is bind-mounted read-write at the same path, and the process runs as
    this process's uid:gid so that what it writes belongs to the user who ran us."""
    if environment.image is None:
        raise ValueError(f"environment of backend {environment.backend!r} has no image")
    docker = _docker_cli.docker_executable() or "docker"
    argv = [
        docker,
        "run",
        "--rm",
        "-i",
        "--init",
        "--network=none",
        "--label",
        f"{OWNER_LABEL}={owner or default_owner()}",
        "--user",
        f"{os.getuid()}:{os.getgid()}",
        # a uid the image may not know has no home; libraries that cache there get /tmp
        "--env",
        "HOME=/tmp",
    ]
    for path in writable:
        argv += ["--mount", _csv_field("type=bind", f"source={path}", f"target={path}")]
    for key, value in sorted(environment.env.items()):
        argv += ["--env", f"{key}={value}"]
    return [*argv, environment.image, IMAGE_PYTHON]


def _network_args(network: str, port: int) -> list[str]:
    if network == "host":
        return ["--network=host"]
    return ["--network", network, "--publish", f"127.0.0.1:{port}:{port}"]


def _csv_field(*parts: str) -> str:
    """One `--mount` value; CSV quoting keeps a comma in a path from splitting it."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(parts)
    return buf.getvalue()


def remove_container(name: str, *, owner: str | None = None) -> None:
    """`docker rm -f` of the container called exactly `name`, only when it carries our
    owner label (any stackmatrix owner, or exactly `owner` when given); never raises."""
    docker = _docker_cli.docker_executable()
    if docker is None:
        return
    res = _proc.run([docker, "container", "inspect", name], timeout=60.0)
    if not res.ok:
        return  # already gone (--rm) or never started
    try:
        info = json.loads(res.output)[0]
    except (ValueError, IndexError, KeyError, TypeError):
        log.warning("could not read `docker container inspect %s`; not removing it", name)
        return
    labels = (info.get("Config") or {}).get("Labels") or {}
    if info.get("Name") != f"/{name}" or OWNER_LABEL not in labels:
        log.warning("container %r was not started by stackmatrix; leaving it alone", name)
        return
    if owner is not None and labels[OWNER_LABEL] != owner:
        log.warning(
            "container %r belongs to %s, not %s; leaving it", name, labels[OWNER_LABEL], owner
        )
        return
    rm = _proc.run([docker, "rm", "-f", str(info["Id"])], timeout=120.0)
    if rm.ok or _gone_after_autoremove(docker, str(info["Id"]), rm.output):
        return
    log.warning("could not remove container %r: %s", name, rm.tail(3))


def _gone_after_autoremove(docker: str, container_id: str, rm_output: str) -> bool:
    """`--rm` may be removing the container already (on vfs storage, deleting its copy
    of the image takes seconds): wait until the engine has finished, so that a caller
    can rely on the container being gone once we return."""
    if "already in progress" not in rm_output and "No such container" not in rm_output:
        return False
    deadline = time.monotonic() + REMOVE_WAIT_S
    while time.monotonic() < deadline:
        if not _proc.run([docker, "container", "inspect", container_id], timeout=60.0).ok:
            return True
        time.sleep(0.5)
    return False


@contextmanager
def removing(name: str, *, owner: str | None = None) -> Iterator[str]:
    """Removes our container `name` when the block exits, however it exits (Ctrl-C too)."""
    try:
        yield name
    finally:
        remove_container(name, owner=owner)
