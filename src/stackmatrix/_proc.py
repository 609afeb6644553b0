"""The one low-level subprocess runner.

argv lists only (never a shell string), a timeout, output appended to a log file,
and on timeout or Ctrl-C: SIGTERM, then SIGKILL, to the child's own process group
only (the child is started in a new session, so the group is exactly what we
started). Typed failures live in the callers.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stackmatrix._secrets import redact_argv

log = logging.getLogger(__name__)

TERM_GRACE_S = 10.0

# Children started by `run`, so an interrupt in the main thread can stop the ones
# that worker threads are waiting on (only ours: we track the pids we started).
_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.RLock()  # re-entrant: terminate_all may run in a signal handler


_INTERRUPTED = threading.Event()


def interrupted() -> bool:
    """True once `terminate_all` ran: results computed after that are not to be trusted."""
    return _INTERRUPTED.is_set()


def terminate_all() -> None:
    """Stop every child process group that `run` started and that still runs."""
    _INTERRUPTED.set()
    with _RUNNING_LOCK:
        procs = list(_RUNNING)
    for proc in procs:
        kill_group(proc, grace_s=5.0)


@dataclass(frozen=True, kw_only=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int
    duration_s: float
    timed_out: bool
    output: str  # captured stdout+stderr (also appended to the log when one is given)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM then SIGKILL the process group that `proc` leads (ours alone)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run(
    argv: Sequence[str],
    *,
    log_path: Path | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin_data: bytes | None = None,
) -> ProcResult:
    """Run `argv` to completion; never raises for a non-zero exit."""
    argv = tuple(str(a) for a in argv)
    start = time.monotonic()
    if interrupted():
        # Ctrl-C already arrived: a worker thread must not start new children
        return ProcResult(
            argv=argv,
            returncode=-2,
            duration_s=0.0,
            timed_out=False,
            output="not started: interrupted",
        )
    log.debug("run %s", argv)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
    )
    timed_out = False
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    if interrupted():  # terminate_all ran between the check above and the registration
        kill_group(proc, grace_s=5.0)
    try:
        out, _ = proc.communicate(input=stdin_data, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
        out, _ = proc.communicate()
    except BaseException:
        kill_group(proc)
        raise
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc)
    text = out.decode("utf-8", errors="replace")
    if log_path is not None:
        _append_log(log_path, argv, text, proc.returncode, timed_out)
    return ProcResult(
        argv=argv,
        returncode=proc.returncode if not timed_out else -1,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        output=text,
    )


def _append_log(path: Path, argv: tuple[str, ...], text: str, rc: int, timed_out: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {' '.join(redact_argv(argv))}\n{text}")
        fh.write(f"[exit {rc}{' (timed out)' if timed_out else ''}]\n")
