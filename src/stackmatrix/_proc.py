"""The one process layer: every child stackmatrix starts is started here.

Four ways, with the same guarantees:

- `run`: to completion, output captured (and appended to a log file);
- `stream`: to completion, each output line written to the log as it comes (a person
  can `tail -f` a long build) and handed to a callback;
- `start`: a long-lived child (a server), stopped by the caller with `stop`;
- `reading`: a child whose stdout the caller reads as it comes, a stream too large to
  hold (`docker export`), its stderr captured and logged.

All take argv lists (never a shell string), log the argv redacted (`_proclog`), start
the child as the leader of its own process group (so the group is exactly what we
started) and register it, so that Ctrl-C (`terminate_all`, called by the CLI's SIGINT
handler) stops it wherever the main thread is: SIGTERM to its group, SIGKILL after a
grace period. Only our own children: by the process group of a child we started, never
by name. Each child also dies with its parent (`_deathsig`). Typed failures live in
the callers.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from stackmatrix._deathsig import die_with_parent
from stackmatrix._proclog import append_log, copy_lines, exit_line, log_file
from stackmatrix._proclog import shown as shown  # callers show argv through _proc

log = logging.getLogger(__name__)

TERM_GRACE_S = 10.0  # after a timeout or at `stop`: time to shut down cleanly
INTERRUPT_GRACE_S = 5.0  # after Ctrl-C: the person is waiting
KILL_WAIT_S = 5.0
READER_JOIN_S = 5.0  # a grandchild that left our group may hold the pipe open

# Children started here, so an interrupt in the main thread can stop the ones that
# worker threads are waiting on (only ours: we track the processes we started).
_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.RLock()  # re-entrant: terminate_all may run in a signal handler


_INTERRUPTED = threading.Event()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C arrived before a long-lived child could be started."""


def interrupted() -> bool:
    """True once `terminate_all` ran: results computed after that are not to be trusted."""
    return _INTERRUPTED.is_set()


def terminate_all() -> None:
    """Stop every child process group started here that still runs, all at once."""
    _INTERRUPTED.set()
    with _RUNNING_LOCK:
        procs = list(_RUNNING)
    _kill_groups(procs, grace_s=INTERRUPT_GRACE_S)


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
    _kill_groups([proc], grace_s=grace_s)


def _kill_groups(procs: Iterable[subprocess.Popen[bytes]], *, grace_s: float) -> None:
    # Signal every group first, then wait: n children stop in one grace period, not n.
    live = [p for p in procs if p.poll() is None]
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_WAIT_S)):
        live = [p for p in live if _signal_group(p, sig)]
        deadline = time.monotonic() + wait_s
        live = [p for p in live if not _exited_by(p, deadline)]
        if not live:
            return


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> bool:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return False
    return True


def _exited_by(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _not_started(argv: tuple[str, ...]) -> ProcResult:
    # Ctrl-C already arrived: a worker thread must not start new children
    return ProcResult(
        argv=argv, returncode=-2, duration_s=0.0, timed_out=False, output="not started: interrupted"
    )


def _popen(
    argv: tuple[str, ...],
    *,
    what: str,
    stdin: int,
    stdout: int | IO[bytes],
    env: Mapping[str, str] | None,
    cwd: Path | None,
    stderr: int = subprocess.STDOUT,
) -> subprocess.Popen[bytes]:
    """Start `argv` as the leader of its own process group (setsid) and register it
    for Ctrl-C."""
    log.debug("%s %s", what, shown(argv))
    proc = subprocess.Popen(
        argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=die_with_parent(os.getpid()),  # safe with our threads: see _deathsig
    )
    with _RUNNING_LOCK:
        _RUNNING.add(proc)
    if interrupted():  # terminate_all ran between the caller's check and the registration
        kill_group(proc, grace_s=INTERRUPT_GRACE_S)
    return proc


def _forget(proc: subprocess.Popen[bytes]) -> None:
    with _RUNNING_LOCK:
        _RUNNING.discard(proc)


@contextlib.contextmanager
def _waited_on(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """Whatever ends the wait (an exception, Ctrl-C), the child does not outlive it."""
    try:
        yield
    except BaseException:
        kill_group(proc)
        raise
    finally:
        _forget(proc)


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
    if interrupted():
        return _not_started(argv)
    start = time.monotonic()
    stdin = subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL
    proc = _popen(argv, what="run", stdin=stdin, stdout=subprocess.PIPE, env=env, cwd=cwd)
    timed_out = False
    with _waited_on(proc):
        try:
            out, _ = proc.communicate(input=stdin_data, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
            out, _ = proc.communicate()
    text = out.decode("utf-8", errors="replace")
    if log_path is not None:
        append_log(log_path, argv, text, proc.returncode, timed_out)
    return _result(argv, proc, start, timed_out, text)


def stream(
    argv: Sequence[str],
    *,
    log_path: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    on_line: Callable[[str], None] | None = None,
) -> ProcResult:
    """Run `argv` to completion, appending each output line to the log as it comes and
    handing it (without its newline) to `on_line`; never raises for a non-zero exit."""
    argv = tuple(str(a) for a in argv)
    if interrupted():
        return _not_started(argv)
    start = time.monotonic()
    lines: list[str] = []
    with log_file(log_path, argv) as fh:
        proc = _popen(
            argv, what="stream", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=env, cwd=cwd
        )
        reader = threading.Thread(
            target=copy_lines,
            args=(proc.stdout, fh, lines, on_line),
            name="stream-reader",
            daemon=True,
        )
        reader.start()
        timed_out = False
        with _waited_on(proc):
            try:
                # always a finite wait: it polls, so the SIGINT handler can reap too
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(proc)
        reader.join(timeout=READER_JOIN_S)
        rc = proc.returncode if not timed_out else -1
        fh.write(exit_line(rc, timed_out).encode())
    return _result(argv, proc, start, timed_out, "".join(lines))


def start(
    argv: Sequence[str],
    *,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start a long-lived child whose output goes straight into the log; the caller
    stops it with `stop` (Ctrl-C stops it too). Raises `Interrupted` after Ctrl-C."""
    argv = tuple(str(a) for a in argv)
    if interrupted():
        raise Interrupted(f"not started after Ctrl-C: {shown(argv)}")
    with log_file(log_path, argv) as fh:
        # the child keeps its own copy of the descriptor: ours can close
        return _popen(argv, what="start", stdin=subprocess.DEVNULL, stdout=fh, env=env, cwd=cwd)


def stop(proc: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """Stop a child from `start`: SIGTERM then SIGKILL to its process group."""
    try:
        kill_group(proc, grace_s=grace_s)
    finally:
        _forget(proc)


@dataclass(kw_only=True)
class Reading:
    """A child started by `reading`: its stdout to read; `result` once it has ended."""

    stdout: IO[bytes]
    result: ProcResult | None = None  # set when the block exits, however it exits


@contextlib.contextmanager
def reading(
    argv: Sequence[str],
    *,
    log_path: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> Iterator[Reading]:
    """Run `argv` with its stdout a pipe that the block reads as it comes (nothing of
    it is stored); its stderr is appended to the log and is the result's `output`.

    A normal exit from the block reads what is left of the stdout and waits for the
    child. An exception in the block (Ctrl-C too) kills the child's group before it
    propagates, and so does the timeout (the block then reads a truncated stream).
    Never raises for a non-zero exit: `result` says how the child ended. Raises
    `Interrupted` after Ctrl-C."""
    argv = tuple(str(a) for a in argv)
    if interrupted():
        raise Interrupted(f"not started after Ctrl-C: {shown(argv)}")
    start = time.monotonic()
    lines: list[str] = []
    with log_file(log_path, argv) as fh:
        proc = _popen(
            argv,
            what="read",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=None,
        )
        assert proc.stdout is not None
        _widen_pipe(proc.stdout)
        errors = threading.Thread(
            target=copy_lines,
            args=(proc.stderr, fh, lines, None),
            name="read-stderr",
            daemon=True,
        )
        errors.start()
        expired = threading.Event()
        timer = threading.Timer(timeout, _expire, args=(proc, expired))
        timer.daemon = True
        timer.start()
        handle = Reading(stdout=proc.stdout)
        try:
            with _waited_on(proc):
                yield handle
                _drain(proc.stdout)
                proc.wait(timeout=max(1.0, timeout - (time.monotonic() - start)))
        finally:
            timer.cancel()
            proc.stdout.close()
            errors.join(timeout=READER_JOIN_S)
            if proc.returncode is None:  # another thread's kill may be reaping it right now
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=KILL_WAIT_S)
            timed_out = expired.is_set()
            rc = proc.returncode if proc.returncode is not None and not timed_out else -1
            fh.write(exit_line(rc, timed_out).encode())
            handle.result = _result(argv, proc, start, timed_out, "".join(lines))


def _widen_pipe(pipe: IO[bytes]) -> None:
    """A 1 MiB pipe instead of 64 KiB: fewer switches between the writer and us."""
    with contextlib.suppress(OSError, AttributeError):  # over the system's limit; not Linux
        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)


def _expire(proc: subprocess.Popen[bytes], expired: threading.Event) -> None:
    expired.set()
    kill_group(proc)


def _drain(stdout: IO[bytes]) -> None:
    """What the child writes after the part the block wanted (a tar's trailing blocks),
    read so the child can finish writing it."""
    while stdout.read(1 << 20):
        pass


def _result(
    argv: tuple[str, ...], proc: subprocess.Popen[bytes], start: float, timed_out: bool, text: str
) -> ProcResult:
    return ProcResult(
        argv=argv,
        returncode=proc.returncode if proc.returncode is not None and not timed_out else -1,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
        output=text,
    )
