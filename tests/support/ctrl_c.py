"""Ctrl-C during a streamed child, the way a person at a terminal does it.

Run as a script (`python ctrl_c.py LOG ARGV...`), this is a stackmatrix process that
streams ARGV into LOG from a worker thread, as the build phase does, under the CLI's
SIGINT handler. `ctrl_c_during_stream` starts it, waits until the child has started,
and sends SIGINT to that process alone: the child runs in its own session, so only
stackmatrix can stop it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

INTERRUPTED_EXIT = 130
START_TIMEOUT_S = 300.0  # a docker build reaches its RUN step in seconds; room for a slow host
EXIT_TIMEOUT_S = 90.0  # longer than any test's bound, so a slow stop is measured, not hung


# exec'd in place of the child, so the command runs with SIGINT and SIGHUP at their
# defaults: a test suite started as a background job (`cmd &` without job control,
# nohup) passes them on ignored, and an ignored Ctrl-C stays ignored by design
_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.signal(signal.SIGHUP, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
)


def as_in_a_terminal(argv: Sequence[str]) -> list[str]:
    """`argv` run with Ctrl-C and hang-up delivered as a terminal session has them."""
    return [sys.executable, "-c", _TERMINAL, *argv]


@dataclass(frozen=True, kw_only=True)
class Stopped:
    seconds: float  # from SIGINT to the stackmatrix process's exit
    returncode: int
    output: str


def ctrl_c_during_stream(
    argv: Sequence[str],
    log_path: Path,
    *,
    started: Callable[[], bool],
    env: Mapping[str, str] | None = None,
) -> Stopped:
    proc = subprocess.Popen(
        as_in_a_terminal([sys.executable, __file__, str(log_path), *argv]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    try:
        _wait_started(proc, started)
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=EXIT_TIMEOUT_S)
        seconds = time.monotonic() - t0
    finally:
        if proc.poll() is None:  # never leave our own child behind, even when failing
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return Stopped(seconds=seconds, returncode=proc.returncode, output=out.decode(errors="replace"))


def _wait_started(proc: subprocess.Popen[bytes], started: Callable[[], bool]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not started():
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.communicate()[0].decode(errors="replace") if proc.poll() is not None else ""
            raise AssertionError(f"the streamed child never started (exit {proc.poll()}):\n{out}")
        time.sleep(0.1)


def pids_running(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (Linux /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _main(args: list[str]) -> int:
    from stackmatrix import pipeline
    from stackmatrix.builder import _docker_cli

    log_path, argv = Path(args[0]), args[1:]
    try:
        with pipeline.children_stop_on_ctrl_c(), ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(_docker_cli.run_streaming, argv, log_path=log_path, timeout=600.0).result()
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
