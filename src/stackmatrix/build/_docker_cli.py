"""The docker CLI as the backend uses it: which client, whether the engine answers,
whether builds can use BuildKit, image inspection, and a build that streams its log."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackmatrix import _proc

log = logging.getLogger(__name__)

DOCKER_ENV = "STACKMATRIX_DOCKER"  # the docker client to use (default: `docker` on PATH)
BUILDKIT_ENV = "STACKMATRIX_DOCKER_BUILDKIT"  # "1", "0" or "auto" (default)
QUERY_TIMEOUT_S = 60.0
BASE_LABEL = "stackmatrix.base_image"  # set by every cell build: the base's reference


@dataclass(frozen=True, kw_only=True)
class ContainerEngine:
    """A docker client that reaches a running engine."""

    docker: str  # the client executable
    client_version: str
    server_version: str
    buildkit: bool  # `docker build` can use BuildKit (mounts, secrets)


@dataclass(frozen=True, kw_only=True)
class EngineProblem:
    message: str


def docker_executable() -> str | None:
    chosen = os.environ.get(DOCKER_ENV)
    if chosen:
        return chosen if Path(chosen).is_file() else shutil.which(chosen)
    return shutil.which("docker")


def probe_engine() -> ContainerEngine | EngineProblem:
    """Find the client and ask the engine for its version; never raises."""
    docker = docker_executable()
    if docker is None:
        return EngineProblem(
            message="the docker client was not found on PATH; install Docker (on Debian: "
            f"apt-get install docker.io) or set {DOCKER_ENV} to the client's path"
        )
    res = _proc.run([docker, "version", "--format", "{{json .}}"], timeout=QUERY_TIMEOUT_S)
    info = _json_or_none(res.output) if res.ok else None
    if info is None or not info.get("Server"):
        return EngineProblem(
            message=f"the Docker engine does not answer ({docker} version failed: "
            f"{_last_line(res.output)!r}); start dockerd (as root, CI runs "
            ".ci/start-dockerd.sh) or point DOCKER_HOST at a running engine"
        )
    client = str(info.get("Client", {}).get("Version", "?"))
    server = str(info["Server"].get("Version", "?"))
    return ContainerEngine(
        docker=docker,
        client_version=client,
        server_version=server,
        buildkit=_buildkit(docker, client),
    )


def _buildkit(docker: str, client_version: str) -> bool:
    choice = os.environ.get(BUILDKIT_ENV, "auto").strip().lower()
    if choice in ("0", "1"):
        return choice == "1"
    # Clients before 23.0 run BuildKit builds themselves (DOCKER_BUILDKIT=1); later
    # ones delegate to the buildx plugin and refuse BuildKit when it is missing.
    if _major(client_version) < 23:
        return True
    res = _proc.run([docker, "buildx", "version"], timeout=QUERY_TIMEOUT_S)
    return res.ok


def _major(version: str) -> int:
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


def _json_or_none(text: str) -> dict[str, Any] | None:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def inspect_image(docker: str, ref: str) -> dict[str, Any] | None:
    """`docker image inspect` of one image, or None when it doesn't exist locally."""
    res = _proc.run([docker, "image", "inspect", ref], timeout=QUERY_TIMEOUT_S)
    if not res.ok:
        return None
    try:
        data = json.loads(res.output)
    except ValueError:
        return None
    return data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else None


def base_changed(docker: str, image: Mapping[str, Any]) -> str | None:
    """Why `image`, one of ours, is no longer built on its base (the image named by its
    `stackmatrix.base_image` label was rebuilt since), or None. The content hash names
    the base, not its id: here the base's layers must still be the first layers of the
    image, so a base rebuilt with other files rebuilds the cell, and one rebuilt with
    the same files (a new id, the same layers) does not. A base not on this machine
    (not pulled yet) can't be compared: None."""
    labels = (image.get("Config") or {}).get("Labels") or {}
    ref = str(labels.get(BASE_LABEL) or "")
    base = inspect_image(docker, ref) if ref else None
    if base is None or on_base(image, base):
        return None
    return f"its base image {ref!r} was rebuilt since (now {str(base.get('Id'))[:19]})"


def on_base(image: Mapping[str, Any], base: Mapping[str, Any]) -> bool:
    """The image's layers start with all of the base's."""
    layers = _layers(base)
    return _layers(image)[: len(layers)] == layers


def _layers(image: Mapping[str, Any]) -> list[str]:
    return [str(x) for x in ((image.get("RootFS") or {}).get("Layers") or [])]


def build_env(engine: ContainerEngine) -> dict[str, str]:
    env = dict(os.environ)
    env["DOCKER_BUILDKIT"] = "1" if engine.buildkit else "0"
    # plain progress keeps the log readable (no terminal control sequences)
    env["BUILDKIT_PROGRESS"] = "plain"
    return env


def run_streaming(
    argv: Sequence[str],
    *,
    log_path: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> _proc.ProcResult:
    """A build whose log a person can follow with `tail -f` (`_proc.stream`: Ctrl-C
    stops it, its argv is logged redacted)."""
    return _proc.stream(argv, log_path=log_path, timeout=timeout, env=env)
