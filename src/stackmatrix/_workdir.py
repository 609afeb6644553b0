"""Whether a directory can be the work dir, where environments and caches are kept:
stackmatrix creates and removes directories in it (scan-cache/, envs/, models/), so
neither the filesystem root nor a directory this user cannot write will do."""

from __future__ import annotations

import os
from pathlib import Path


def work_dir_problem(path: Path) -> str | None:
    """What is wrong with `path` as the work dir, or None (a new directory is fine)."""
    if path.resolve() == Path(path.resolve().anchor):
        return f"{str(path)!r} is the filesystem root; pass a directory of its own"
    if path.exists() and not path.is_dir():
        return f"{str(path)!r} is not a directory"
    if path.is_dir() and not os.access(path, os.W_OK | os.X_OK):
        return f"{str(path)!r} is not writable by this user; pass a directory of your own"
    return None
