"""Servers a killed run left behind (issue 16, defect 8).

A server runs in its own session, so when stackmatrix itself is SIGKILLed (the OOM
killer, `kill -9`, a CI runner's hard stop) nothing stops it: it keeps its port and
GPU. Each launch therefore leaves `cells/<id>/server-L<k>.live.json` in the results
while its server runs: the process group, the port, the container and the group
leader's start time and boot id. Teardown removes the record. The next run of those
results (`--resume`, under the results directory's lock, so no live run owns them)
finds what is left and stops it, but only a process group that is provably the one we
started: the same boot, a leader whose start time is the recorded one and which still
leads its own session. A reused pid is left alone, never anything found by name.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from stackmatrix import _atomic, _nofollow
from stackmatrix.errors import ResultsError

log = logging.getLogger(__name__)

SUFFIX = ".live.json"
TERM_WAIT_S = 10.0
KILL_WAIT_S = 5.0


def record_path(log_path: Path) -> Path:
    """`server-L1.log` -> `server-L1.live.json`."""
    return log_path.with_name(log_path.stem + SUFFIX)


def record(log_path: Path, proc: subprocess.Popen[bytes], port: int, backend: str,
           handle: str | None) -> Path:  # fmt: skip
    path = record_path(log_path)
    _atomic.write_json(
        path,
        {
            "schema_version": 1,
            "pgid": proc.pid,
            "port": port,
            "backend": backend,
            "container": handle,  # what the backend's cleanup removes (a container's name)
            "start_time": _start_time(proc.pid),
            "boot_id": _boot_id(),
            "log": log_path.name,
        },
    )
    return path


def reap(run_dir: Path) -> list[str]:
    """Stop the servers recorded under `run_dir` that are still ours; one line each."""
    lines = []
    for path in sorted((run_dir / "cells").glob(f"*/*{SUFFIX}")):
        if path.is_symlink() or not path.is_file():
            continue
        lines.append(f"{path.parent.name}: {_reap_one(path)}")
        path.unlink(missing_ok=True)
    return lines


def _reap_one(path: Path) -> str:
    try:
        data = _nofollow.read_json(path)
        pgid, port = int(data["pgid"]), data.get("port")
    except (OSError, ResultsError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable record {path.name} ({exc}); nothing stopped"
    what = f"server of an earlier run (process group {pgid}, port {port}, {data.get('log')})"
    handle = data.get("container")
    if handle and data.get("boot_id") == _boot_id():  # this machine's (a merged piece
        _cleanup(str(data.get("backend") or "docker"), str(handle))  # may come from another)
    if not _ours(pgid, data):
        return f"{what} is gone (or its pid now belongs to another process); nothing stopped"
    stopped = _stop_group(pgid)
    return f"{what} was still running; " + ("stopped" if stopped else "could not be stopped")


def _ours(pgid: int, data: dict[str, Any]) -> bool:
    stat = _stat(pgid)
    if stat is None or data.get("boot_id") != _boot_id():
        return False
    # fields after the command name: state ppid pgrp session ... starttime (22nd of stat)
    pgrp, session, start = int(stat[2]), int(stat[3]), int(stat[19])
    return pgrp == pgid and session == pgid and start == data.get("start_time")


def _stop_group(pgid: int) -> bool:
    for sig, wait_s in ((signal.SIGTERM, TERM_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not _group_alive(pgid):
                return True
            time.sleep(0.1)
    return not _group_alive(pgid)


def _group_alive(pgid: int) -> bool:
    stat = _stat(pgid)
    if stat is not None and stat[0] == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pgid, os.WNOHANG)  # our own child (tests): reap the zombie
        stat = _stat(pgid)
    return stat is not None and stat[0] != "Z"


def _cleanup(backend: str, handle: str) -> None:
    from stackmatrix.build.backends import get_backend

    try:
        found = get_backend(backend)
    except ValueError:
        return  # a record written by another version: nothing we know how to remove
    found.cleanup(handle)  # docker: only a container carrying our owner label; never raises


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields if len(fields) > 19 else None


def _start_time(pid: int) -> int | None:
    stat = _stat(pid)
    return int(stat[19]) if stat is not None else None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
