"""The docker CLI as the backend uses it: which client, whether the engine answers,
whether builds can use BuildKit, image inspection, and a build that streams its log."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix import _proc
from stackmatrix.jsontypes import JSONObject
from stackmatrix.records.decode import obj

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


@dataclass(frozen=True, kw_only=True)
class ImageInfo:
    """What the backend reads of `docker image inspect`."""

    id: str
    size: int = 0  # bytes, of every layer
    created: str = ""
    labels: dict[str, str] = field(default_factory=dict)  # Config.Labels
    layers: tuple[str, ...] = ()  # RootFS.Layers, the base's first
    repo_digests: tuple[str, ...] = ()  # none for an image that was built or imported here

    @classmethod
    def of(cls, raw: Mapping[str, object]) -> ImageInfo:
        config, rootfs, size = obj(raw.get("Config")), obj(raw.get("RootFS")), raw.get("Size")
        labels = obj(config.get("Labels"))
        return cls(
            id=str(raw.get("Id")),
            size=int(size) if isinstance(size, int | float | str) and size else 0,
            created=str(raw.get("Created", "")),
            labels={k: v for k, v in labels.items() if isinstance(v, str)},
            layers=tuple(str(x) for x in _items(rootfs.get("Layers"))),
            repo_digests=tuple(str(x) for x in _items(raw.get("RepoDigests"))),
        )


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
    client = str(obj(info.get("Client")).get("Version", "?"))
    server = str(obj(info["Server"]).get("Version", "?"))
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


def _json_or_none(text: str) -> JSONObject | None:
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


def image_info(docker: str, ref: str) -> ImageInfo | None:
    """The image's fields the backend reads, or None when it doesn't exist locally."""
    image = inspect_image(docker, ref)
    return ImageInfo.of(image) if image is not None else None


def inspect_image(docker: str, ref: str) -> dict[str, Any] | None:
    """`docker image inspect` of one image as docker wrote it (the integration tests read
    its fields), or None when it doesn't exist locally. The backend reads `image_info`."""
    res = _proc.run([docker, "image", "inspect", ref], timeout=QUERY_TIMEOUT_S)
    if not res.ok:
        return None
    try:
        data = json.loads(res.output)
    except ValueError:
        return None
    return data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else None


def base_changed(docker: str, image: ImageInfo) -> str | None:
    """Why `image`, one of ours, is no longer built on its base (the image named by its
    `stackmatrix.base_image` label was rebuilt since), or None. The content hash names
    the base, not its id: here the base's layers must still be the first layers of the
    image, so a base rebuilt with other files rebuilds the cell, and one rebuilt with
    the same files (a new id, the same layers) does not. A base not on this machine
    (not pulled yet) can't be compared: None."""
    ref = image.labels.get(BASE_LABEL) or ""
    base = image_info(docker, ref) if ref else None
    if base is None or on_base(image, base):
        return None
    return f"its base image {ref!r} was rebuilt since (now {base.id[:19]})"


def on_base(image: ImageInfo, base: ImageInfo) -> bool:
    """The image's layers start with all of the base's."""
    return image.layers[: len(base.layers)] == base.layers


def _items(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


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
