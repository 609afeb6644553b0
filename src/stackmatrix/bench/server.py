"""Server lifecycle: launch, wait until ready, and tear down on every exit path.

The server is started by `_proc.start`: in its own session (so its process group
holds exactly what we started) and registered, so Ctrl-C stops it too. Teardown sends
SIGTERM then SIGKILL to that group only, then proves the port is free and, where
nvidia-smi exists, that no process we started holds a GPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stackmatrix import _proc
from stackmatrix._secrets import redact_files, redact_known, secret_values
from stackmatrix.bench import _http, envfacts, leftovers
from stackmatrix.bench.engines import Engine
from stackmatrix.builder.backends import Backend, get_backend
from stackmatrix.built_environment import Environment
from stackmatrix.jsontypes import JSONObject

log = logging.getLogger(__name__)

_RANDOM = random.SystemRandom()
POLL_S = 0.5
PORT_FREE_TIMEOUT_S = 15.0
# How long teardown waits for the GPU to let go of the processes it killed: on the H200 a
# killed SGLang server's scheduler was still listed by nvidia-smi right after the kill
# (reports/examples/h200-sglang-cache), with the next launch about to start.
GPU_RELEASE_TIMEOUT_S = 30.0


class ServerFailed(Exception):
    """The server did not come up (or died); becomes status failed at the phase boundary."""

    def __init__(self, message: str, *, code: str = "server_failed") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.server: RunningServer | None = None  # set by `launch`, for its teardown record


@dataclass(kw_only=True)
class Teardown:
    """What teardown proved; recorded with the launch."""

    port_free: bool = True
    gpu_pids_left: list[int] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)
    returncode: int | None = None

    def to_dict(self) -> JSONObject:
        return {
            "port_free": self.port_free,
            "gpu_pids_left": list(self.gpu_pids_left),
            "pids": list(self.pids),
            "returncode": self.returncode,
        }


@dataclass(kw_only=True)
class RunningServer:
    base_url: str
    argv: tuple[str, ...]
    launch_args: tuple[str, ...]  # the engine flags (spec + cell), for the effective config
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None  # None for an external server
    ready_s: float | None = None  # seconds from its start to ready (None: not started by us)
    teardown: Teardown = field(default_factory=Teardown)
    secrets: frozenset[str] = frozenset()  # what its argv and env handed it, never quoted

    def last_lines(self) -> str:
        """The end of its log, secrets hidden: the log itself is redacted only once the
        server has stopped, and this is quoted into messages before then."""
        return log_tail(self.log_path, known=self.secrets)

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def exit_message(self) -> str:
        rc = self.proc.poll() if self.proc is not None else None
        return (
            f"the server exited with code {rc} during the run; last lines of "
            f"{self.log_path}:\n{self.last_lines()}"
        )


MAX_PORT = 65535
PORT_ATTEMPTS = 200


def free_port(offsets: Iterable[int] = ()) -> int:
    """A free port whose derived ports (port + each offset) are free and valid too."""
    room = max(offsets, default=0)
    for _ in range(PORT_ATTEMPTS):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + room > MAX_PORT:
            port = _RANDOM.randrange(1024, MAX_PORT - room + 1)
        if all(_bindable(port + off) for off in (0, *offsets)):
            return port
    raise ServerFailed(
        f"found no free port with room for the engine's derived ports (+{room}) after "
        f"{PORT_ATTEMPTS} attempts",
        code="no_free_port",
    )


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


TAIL_BYTES = 64 << 10  # of a log, for its last lines: a runaway log is never read whole


def log_tail(path: Path, lines: int = 30, *, known: Iterable[str] = ()) -> str:
    """The last `lines` of the log at `path`, with credential-shaped values and the
    `known` secrets hidden (sglang prints its ServerArgs, `api_key` included)."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - TAIL_BYTES))
            text = fh.read(TAIL_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return redact_known("\n".join(text.splitlines()[-lines:]), known)


@contextlib.contextmanager
def external(
    url: str, *, engine: Engine, log_path: Path, ready_timeout_s: float
) -> Iterator[RunningServer]:
    """An already-running server: wait until it answers, start and stop nothing."""
    server = RunningServer(base_url=url.rstrip("/"), argv=(), launch_args=(), log_path=log_path)
    wait_ready(server, engine, ready_timeout_s)
    yield server


# Starts of one launch whose server exits before it is ready because its port was
# taken between our check and its bind: on the H200 an SGLang server bound its HTTP
# port 47 s after we found it free, and found it in use (reports/examples/h200-sglang-cache).
BIND_ATTEMPTS = 3
_PORT_TAKEN = ("address already in use", "[errno 98]")


@contextlib.contextmanager
def launch(
    *,
    engine: Engine,
    environment: Environment,
    model: str,
    args: Sequence[str],
    log_path: Path,
    ready_timeout_s: float,
    gpus: bool = False,
) -> Iterator[RunningServer]:
    """Start the engine in `environment`, yield it once ready, always tear it down. A
    server that exits before it is ready because its port was taken in the meantime is
    started again on another port (at most BIND_ATTEMPTS starts; its log keeps each)."""
    for attempt in range(1, BIND_ATTEMPTS + 1):
        ready = False
        try:
            with _launch_once(
                engine=engine,
                environment=environment,
                model=model,
                args=args,
                log_path=log_path,
                ready_timeout_s=ready_timeout_s,
                gpus=gpus,
            ) as server:
                ready = True
                yield server
            return
        except ServerFailed as exc:
            if ready or attempt == BIND_ATTEMPTS or not port_was_taken(exc):
                raise
            log.warning(
                "its port was taken before the server bound it (start %d of %d); "
                "starting it again on another port",
                attempt,
                BIND_ATTEMPTS,
            )


def port_was_taken(exc: ServerFailed) -> bool:
    """A server that exited before it was ready, its log ending on a port in use."""
    text = exc.message.lower()
    return text.startswith("the server exited") and any(m in text for m in _PORT_TAKEN)


@contextlib.contextmanager
def _launch_once(
    *,
    engine: Engine,
    environment: Environment,
    model: str,
    args: Sequence[str],
    log_path: Path,
    ready_timeout_s: float,
    gpus: bool,
) -> Iterator[RunningServer]:
    port = free_port(engine.derived_port_offsets.values())
    backend = get_backend(environment.backend)
    command = backend.server_command(
        environment,
        lambda python: engine.launch_argv(python, model, "127.0.0.1", port, args),
        port=port,
        model=model,
        gpus=gpus,
    )
    argv = command.argv
    nonce = leftovers.new_nonce()  # the live record's proof that a leftover is ours
    server = RunningServer(
        base_url=f"http://127.0.0.1:{port}",
        argv=tuple(argv),
        launch_args=tuple(args),
        log_path=log_path,
        secrets=frozenset(secret_values(argv, environment.env) | {nonce}),
    )
    started = time.monotonic()
    server.proc = _start(
        argv, {**command.env, **environment.env, leftovers.NONCE_ENV: nonce}, log_path
    )
    live: Path | None = None
    try:
        # kept while it runs: a SIGKILLed run leaves it to the next one (leftovers.py)
        live = leftovers.record(log_path, server.proc, port, backend.name, command.handle, nonce)
        wait_ready(server, engine, ready_timeout_s)
        server.ready_s = round(time.monotonic() - started, 3)
        yield server
    except ServerFailed as exc:
        exc.server = server
        raise
    finally:
        try:
            server.teardown = stop(server.proc, port, backend, command.handle)
        finally:  # a second signal may cut the teardown short: kept while it may run
            if live is not None and server.proc.poll() is not None:
                live.unlink(missing_ok=True)
            # engines print their arguments back (sglang: ServerArgs, api_key included)
            redact_files(log_path, known=server.secrets)


def _start(argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    log.info("starting server: %s", _proc.shown(argv))
    return _proc.start(argv, log_path=log_path, env={**os.environ, **env})


def wait_ready(server: RunningServer, engine: Engine, timeout_s: float) -> None:
    """Poll the engine's readiness endpoints; fail early if the process exits."""
    deadline = time.monotonic() + timeout_s
    while True:
        if server.proc is not None and server.proc.poll() is not None:
            raise ServerFailed(
                f"the server exited with code {server.proc.returncode} before it was ready; "
                f"last lines of {server.log_path}:\n{server.last_lines()}"
            )
        for path in engine.ready_paths:
            status, _ = _http.get(server.base_url + path, timeout_s=5.0)
            if status == 200:
                return
        if time.monotonic() >= deadline:
            raise ServerFailed(
                f"the server at {server.base_url} was not ready after {timeout_s:g} s "
                f"(probed {', '.join(engine.ready_paths)}); raise bench.ready_timeout_s if "
                f"it is still loading. Last lines of {server.log_path}:\n"
                f"{server.last_lines()}"
            )
        time.sleep(POLL_S)


def stop(
    proc: subprocess.Popen[bytes],
    port: int,
    backend: Backend | None = None,
    handle: str | None = None,
) -> Teardown:
    """SIGTERM/SIGKILL our process group, then what the backend left (a container), then
    prove it is gone."""
    pids = group_pids(proc.pid)
    _proc.stop(proc)
    if backend is not None and handle is not None:
        backend.cleanup(handle)
    port_free = _wait_port_free(port)
    left = _wait_gpu_released(pids)
    if not port_free:
        log.warning("port %d is still in use after the server was stopped", port)
    if left:
        log.warning(
            "processes we started still hold a GPU %.0f s after they were killed: %s",
            GPU_RELEASE_TIMEOUT_S,
            left,
        )
    return Teardown(port_free=port_free, gpu_pids_left=left, pids=pids, returncode=proc.poll())


def _wait_gpu_released(pids: Sequence[int]) -> list[int]:
    """Those of `pids` that a GPU still lists, after waiting up to GPU_RELEASE_TIMEOUT_S
    for none to be (a GPU frees a killed process's memory a moment after it dies; the
    next launch should not start beside it)."""
    deadline = time.monotonic() + GPU_RELEASE_TIMEOUT_S
    while left := sorted(set(envfacts.gpu_pids()) & set(pids)):
        if time.monotonic() >= deadline:
            return left
        time.sleep(POLL_S)
    return []


def _wait_port_free(port: int) -> bool:
    deadline = time.monotonic() + PORT_FREE_TIMEOUT_S
    while port_in_use(port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def group_pids(pgid: int) -> list[int]:
    """Pids whose process group is `pgid` (Linux /proc; empty elsewhere)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # After the command name: state, ppid, pgrp, ...
        if len(fields) > 2 and int(fields[2]) == pgid:
            pids.append(int(stat.parent.name))
    return sorted(pids)
