"""One writer per results directory: an flock, the mechanism the environment builds use.

Two runs with the same --output at once lost half their measurements. The kernel drops an
flock when its holder exits, however it exits
(SIGKILL included), so a lock is never left behind.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stackmatrix import layout
from stackmatrix.errors import ResultsError
from stackmatrix.results import now_iso

LOCK_FILE = layout.LOCK_FILE
_OPEN = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


@contextmanager
def results_dir_lock(run_dir: Path) -> Iterator[None]:
    """Hold `run_dir`'s lock for the block; refuse at once if another process holds it."""
    path = run_dir / LOCK_FILE
    try:
        fd = os.open(path, _OPEN, 0o644)
    except OSError as exc:
        raise ResultsError(f"cannot lock {run_dir}: {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted there
        os.close(fd)
        raise ResultsError(f"cannot lock {run_dir}: {path} is not a regular file; move it aside")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            raise ResultsError(
                f"{run_dir} is in use by another stackmatrix run ({holder}); wait for it "
                "to finish, or pass another --output"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {now_iso()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock
