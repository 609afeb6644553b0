"""SIGTERM and SIGHUP end a command the way Ctrl-C does.

`kill PID`, a CI runner's cancel or a closed terminal used to end the process at once:
no `finally` ran, so servers it had started lived on and temporary directories stayed.
Under `stop_signals` each of them raises `Stopped` (a KeyboardInterrupt) in the main
thread, after `on_stop` (the pipeline stops our children there), so every cleanup
path Ctrl-C takes runs for them too. A signal the caller ignores (`nohup`) stays
ignored.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived; `signum` says which (the exit code is 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _nothing() -> None:
    return None


@contextlib.contextmanager
def stop_signals(on_stop: Callable[[], None] = _nothing) -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP call `on_stop`, then raise Stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; its own block handles them
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        on_stop()
        raise Stopped(signum)

    previous = {
        sig: signal.signal(sig, handler)
        for sig in STOP_SIGNALS
        if signal.getsignal(sig) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + (exc.signum if isinstance(exc, Stopped) else int(signal.SIGINT))


def name(exc: KeyboardInterrupt) -> str:
    return signal.Signals(exc.signum).name if isinstance(exc, Stopped) else "SIGINT"
