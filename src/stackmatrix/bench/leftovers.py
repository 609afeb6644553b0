"""Servers a killed run left behind.

A server runs in its own session, so when stackmatrix itself is SIGKILLed (the OOM
killer, `kill -9`, a CI runner's hard stop) only the parent-death signal that
`_proc` asks for stops it, and a server may ignore that: it keeps its port and GPU.
Each launch therefore leaves `cells/<id>/server-L<k>.live.json` in the results while
its server runs: the process group, the port, the container, the group leader's start
time and boot id, and the SHA-256 of a random nonce handed to the server in its
environment (`NONCE_ENV`), never the nonce itself. Teardown removes the record. The
next run of those results (`--resume`, under the results directory's lock, so no live
run owns them) finds what is left and stops it, but only a process group that is
provably the one we started: the same boot, a leader whose start time is the recorded
one, which still leads its own session and whose environment (`/proc/<pid>/environ`,
readable only by its own user and root) holds the nonce behind the recorded hash.
Anyone can read or forge a record's pgid, start time and boot id; only our child
holds the nonce. A reused pid or a forged record is left alone, never anything found
by name.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from stackmatrix import _atomic, _nofollow, layout
from stackmatrix._secrets import redact_files
from stackmatrix.errors import Unreadable

log = logging.getLogger(__name__)

TERM_WAIT_S = 10.0
KILL_WAIT_S = 5.0
NONCE_ENV = "STACKMATRIX_LAUNCH_NONCE"  # in the server's environment: proof it is ours


def new_nonce() -> str:
    """A fresh 128-bit secret for one launch, put in its environment as `NONCE_ENV`."""
    return secrets.token_hex(16)


def _digest(nonce: str) -> str:
    return hashlib.sha256(nonce.encode()).hexdigest()


def record_path(log_path: Path) -> Path:
    """`server-L1.log` -> `server-L1.live.json`."""
    return log_path.with_name(layout.live_record(log_path.stem))


def record(
    log_path: Path,
    proc: subprocess.Popen[bytes],
    port: int,
    backend: str,
    handle: str | None,
    nonce: str,
) -> Path:
    """`nonce`: the one `proc` was started with in its environment (`NONCE_ENV`)."""
    path = record_path(log_path)
    _atomic.write_json(
        path,
        {
            "schema_version": 2,
            "pgid": proc.pid,
            "port": port,
            "backend": backend,
            "container": handle,  # what the backend's cleanup removes (a container's name)
            "start_time": _start_time(proc.pid),
            "boot_id": _boot_id(),
            "nonce_sha256": _digest(nonce),  # a forged record cannot name a process holding it
            "log": log_path.name,
        },
    )
    return path


def reap(run_dir: Path) -> list[str]:
    """Stop the servers recorded under `run_dir` that are still ours; one line each."""
    lines = []
    for path in sorted((run_dir / layout.CELLS_DIR).glob(f"*/*{layout.LIVE_SUFFIX}")):
        if path.is_symlink() or not path.is_file():
            continue
        lines.append(f"{path.parent.name}: {_reap_one(path)}")
        _redact_log(path)
        path.unlink(missing_ok=True)
    return lines


def _redact_log(path: Path) -> None:
    """The log of a server that is gone now, redacted: the teardown that redacts it
    (server.launch) never ran for a SIGKILLed run, so it holds what the engine printed
    (sglang's ServerArgs, api_key included). Only credential shapes and `api_key='...'`
    are known here; a log whose process may still write it is left as it is."""
    try:
        pgid = int(_nofollow.read_json(path)["pgid"])
    except (OSError, Unreadable, ValueError, KeyError, TypeError):
        return
    if not _group_alive(pgid):
        redact_files(path.with_name(layout.live_record_log(path.name)))


def _reap_one(path: Path) -> str:
    try:
        data = _nofollow.read_json(path)
        pgid, port = int(data["pgid"]), data.get("port")
    except (OSError, Unreadable, ValueError, KeyError, TypeError) as exc:
        return f"unreadable record {path.name} ({exc}); nothing stopped"
    what = f"server of an earlier run (process group {pgid}, port {port}, {data.get('log')})"
    handle = data.get("container")
    if handle and data.get("boot_id") == _boot_id():  # this machine's (a merged piece
        _cleanup(str(data.get("backend") or "docker"), str(handle))  # may come from another)
    if not _group_alive(pgid):
        return f"{what} is gone; nothing stopped"
    why = _not_ours(pgid, data)
    if why is not None:
        log.warning("leftover server record %s: not ours: %s; nothing stopped", path, why)
        return f"{what} is not ours: {why}; nothing stopped"
    stopped = _stop_group(pgid)
    return f"{what} was still running; " + ("stopped" if stopped else "could not be stopped")


def _not_ours(pgid: int, data: Mapping[str, object]) -> str | None:
    """Why process group `pgid` is not provably the one the record's run started, or
    None when it is."""
    stat = _stat(pgid)
    if stat is None:
        return "no such process"
    if data.get("boot_id") != _boot_id():
        return "recorded on another boot or machine"
    # fields after the command name: state ppid pgrp session ... starttime (22nd of stat)
    pgrp, session, start = int(stat[2]), int(stat[3]), int(stat[19])
    if pgrp != pgid or session != pgid:
        return f"pid {pgid} no longer leads its own session"
    if start != data.get("start_time"):
        return f"pid {pgid} started at another time (a reused pid)"
    return _nonce_mismatch(pgid, data.get("nonce_sha256"))


def _nonce_mismatch(pid: int, digest: object) -> str | None:
    if not isinstance(digest, str):
        return "the record has no launch nonce hash"
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError as exc:  # another user's process: not readable, so not ours
        return f"its environment is unreadable ({exc.strerror or exc})"
    prefix = f"{NONCE_ENV}=".encode()
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            found = hashlib.sha256(entry[len(prefix) :]).hexdigest()
            if hmac.compare_digest(found.encode(), digest.encode()):
                return None
            return "its launch nonce does not match the record"
    return "its environment holds no launch nonce"


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
    from stackmatrix.builder.backends import get_backend

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
