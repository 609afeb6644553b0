"""Children that die with their parent: on Linux each child started by `_proc` asks the
kernel for SIGTERM when its parent dies (`PR_SET_PDEATHSIG`), so a SIGKILLed stackmatrix
leaves no server or build running (one that ignores SIGTERM is found by the next run:
bench/leftovers.py).

That takes a `preexec_fn`, which CPython documents as unsafe with threads: the child
runs Python code between fork and exec while another thread may hold a lock. Ours runs
only a `prctl` through a ctypes function resolved at import and `os.getppid`, taking no
lock that another thread holds (glibc's malloc is reset across fork), so the worker
threads of `pipeline/runner.py` are no hazard. The signal is bound to the thread that
started the child, not the process: every child of `_proc` is waited on or stopped by
the call, and so the thread, that started it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # a libc without prctl (none known): no such signal
        return None
    return fn


_PRCTL = _load_prctl()  # resolved here, never in a forked child


def die_with_parent(parent: int) -> Callable[[], None] | None:
    """The `preexec_fn` that has the child SIGTERMed when `parent` dies (Linux)."""
    prctl = _PRCTL
    if prctl is None:
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # it died before the prctl: no signal will come
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec
