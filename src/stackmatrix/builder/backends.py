"""The backend interface and its one registry.

A backend makes a cell's environment exist and says how to run things in it: `build`
(the environment, its lock, its findings), the command that runs the environment's
Python for a job on this host (`python_command`), the command that runs an engine's
server in it (`server_command`) and the cleanup that command needs (`cleanup`). The
pipeline, the bench and the leftover reaper ask `get_backend(name)`; none of them
branches on a backend's name. Each backend is its entry in backend_registry.py (its
name, the class that is it, the cell settings only it reads) and its class: the three
here, or one in a module of its own (`tests/unit/test_backend_recipe.py`).
"""

from __future__ import annotations

import dataclasses
import importlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol, cast

from stackmatrix import backend_registry
from stackmatrix.builder.base import BuildOutcome, Environment
from stackmatrix.spec_model import Cell

# the engine's argv for a given interpreter prefix (Engine.launch_argv, bound to the
# model, host, port and arguments)
LaunchArgv = Callable[[Sequence[str]], list[str]]


@dataclass(frozen=True, kw_only=True)
class ServerCommand:
    argv: list[str]
    # what `cleanup` removes once the server's process group is stopped (a container's
    # name), recorded in the launch's leftover record; None when there is nothing
    handle: str | None = None
    # environment variables the server needs besides the environment's own, which win
    env: dict[str, str] = field(default_factory=dict)


class Backend(Protocol):
    name: ClassVar[str]
    # its interpreter runs on this host (a job on host files needs no mounts)
    on_host: ClassVar[bool]

    def build(
        self, cell: Cell, *, spec_dir: Path, work_dir: Path, log_path: Path, content_hash: str
    ) -> BuildOutcome: ...

    def python_command(self, env: Environment, *, writable: Sequence[Path] = ()) -> list[str]:
        """Runs the environment's Python for a job that may write in `writable`."""
        ...

    def server_command(
        self, env: Environment, launch: LaunchArgv, *, port: int, model: str, gpus: bool
    ) -> ServerCommand: ...

    def cleanup(self, handle: str) -> None:
        """Whatever `server_command` left besides the process group; never raises."""
        ...

    def server_env(self, env: Environment) -> dict[str, str]:
        """Variables a host server of `env` gets besides the environment's own (its JIT
        caches); empty where the server does not run on this host's files."""
        ...


class _Backend:
    name: ClassVar[str]

    def build(
        self, cell: Cell, *, spec_dir: Path, work_dir: Path, log_path: Path, content_hash: str
    ) -> BuildOutcome:
        """The module stackmatrix.builder.<name>'s `build` (imported when a cell needs it)."""
        module = importlib.import_module(f"stackmatrix.builder.{self.name}")
        outcome: BuildOutcome = module.build(
            cell,
            spec_dir=spec_dir,
            work_dir=work_dir,
            log_path=log_path,
            content_hash=content_hash,
        )
        return outcome


class _HostBackend(_Backend):
    on_host: ClassVar[bool] = True

    def python_command(self, env: Environment, *, writable: Sequence[Path] = ()) -> list[str]:
        del writable  # a host interpreter writes where this process can
        return list(env.python)

    def server_command(
        self, env: Environment, launch: LaunchArgv, *, port: int, model: str, gpus: bool
    ) -> ServerCommand:
        del port, model, gpus  # the server runs on this host, as the user running us
        return ServerCommand(argv=launch(env.python))

    def cleanup(self, handle: str) -> None:
        del handle  # nothing outlives the process group

    def server_env(self, env: Environment) -> dict[str, str]:
        del env  # `current` runs as it is
        return {}


class VenvBackend(_HostBackend):
    name: ClassVar[str] = "venv"

    def server_command(
        self, env: Environment, launch: LaunchArgv, *, port: int, model: str, gpus: bool
    ) -> ServerCommand:
        command = super().server_command(env, launch, port=port, model=model, gpus=gpus)
        return dataclasses.replace(command, env=self.server_env(env))

    def server_env(self, env: Environment) -> dict[str, str]:
        from stackmatrix.builder import jitcache

        return jitcache.venv_env(env)  # its own FlashInfer cache


class CurrentBackend(_HostBackend):
    name: ClassVar[str] = "current"


class DockerBackend(_Backend):
    """Cells as images; every command runs in a container (the docker module, imported
    only when a docker cell needs it)."""

    name: ClassVar[str] = "docker"
    on_host: ClassVar[bool] = False

    def python_command(self, env: Environment, *, writable: Sequence[Path] = ()) -> list[str]:
        from stackmatrix.builder import docker

        return docker.python_command(env, writable=writable)

    def server_command(
        self, env: Environment, launch: LaunchArgv, *, port: int, model: str, gpus: bool
    ) -> ServerCommand:
        from stackmatrix.builder import docker, jitcache

        name = f"stackmatrix-{uuid.uuid4().hex[:12]}"
        # the container shares the host's network (container_command's default), and
        # `python` inside it is the cell's interpreter; the model is mounted read-only
        mounts = [(model, model)] if Path(model).is_absolute() else []
        # the JIT caches of the image's servers outlive each launch's --rm container
        volume = jitcache.cache_volume(env.image) if env.image else None
        argv = docker.container_command(
            env,
            launch(("python",)),
            name=name,
            port=port,
            mounts=mounts,
            gpus=gpus,
            cache_volume=volume,
        )
        return ServerCommand(argv=argv, handle=name)

    def cleanup(self, handle: str) -> None:
        from stackmatrix.builder import docker

        docker.remove_container(handle)  # only one carrying our owner label; never raises

    def server_env(self, env: Environment) -> dict[str, str]:
        del env  # its caches live in a volume, not in host files
        return {}


_MADE: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """The backend `name` (backend_registry.py), its class imported and made at the first
    ask."""
    if name not in _MADE:
        entry = backend_registry.find(name)
        if entry is None:
            known = ", ".join(backend_registry.NAMES)
            raise ValueError(f"no backend {name!r}; the backends are {known}")
        module, _, cls = entry.target.partition(":")
        _MADE[name] = cast(Backend, getattr(importlib.import_module(module), cls)())
    return _MADE[name]
