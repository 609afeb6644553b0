"""Results directories read and copied without ever following a link.

Pieces downloaded from CI and results directories on a shared disk are untrusted
input: a `server-L1.log` that links to /dev/zero, or to a file outside, must not be
read, copied or written through (issue 16, defects 2 and 6). Every open here uses
O_NOFOLLOW and checks that it got a regular file; directories are walked without
following links, so a link loop is never entered.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from stackmatrix.errors import ResultsError

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def open_regular(path: Path) -> int:
    """A read-only descriptor of `path`, which must be a regular file and not a link."""
    try:
        fd = os.open(path, _READ)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ResultsError(
                f"{path} is a symbolic link; stackmatrix never follows links in results "
                "directories: replace it with the file itself"
            ) from exc
        raise ResultsError(f"cannot read {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ResultsError(f"{path} is not a regular file; expected a file written by stackmatrix")
    return fd


def read_bytes(path: Path) -> bytes:
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read()


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_bytes(path).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ResultsError(f"cannot read {path}: not valid JSON: {exc}") from exc


def copy_file(src: Path, dst: Path) -> None:
    """Copy one regular file to a new `dst` (mode and times kept)."""
    with os.fdopen(open_regular(src), "rb") as fin:
        st = os.fstat(fin.fileno())
        with os.fdopen(os.open(dst, _CREATE, stat.S_IMODE(st.st_mode)), "wb") as fout:
            shutil.copyfileobj(fin, fout)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def copy_tree(src: Path, dst: Path) -> list[Path]:
    """Copy the directories and regular files below `src` into a new `dst`; links and
    special files (FIFOs, devices, sockets) are skipped and returned."""
    skipped = []
    dst.mkdir(parents=True)
    for entry, relative in walk(src):
        target = dst / relative
        if entry.is_dir(follow_symlinks=False):
            target.mkdir()
        elif entry.is_file(follow_symlinks=False):
            copy_file(Path(entry.path), target)
        else:
            skipped.append(Path(entry.path))
    return skipped


def walk(root: Path) -> Iterator[tuple[os.DirEntry[str], Path]]:
    """Every entry below `root` (parents before children) and its path relative to
    `root`; links are listed, never entered. Iterative: no recursion limit to reach."""
    pending = [Path()]
    while pending:
        relative = pending.pop()
        with os.scandir(root / relative) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                yield entry, relative / entry.name
                if entry.is_dir(follow_symlinks=False):
                    pending.append(relative / entry.name)


def links_below(root: Path) -> list[Path]:
    """The symbolic links below `root` (root itself may be one: the user named it)."""
    return [Path(entry.path) for entry, _ in walk(root) if entry.is_symlink()]


def refuse_links(paths: Iterable[Path]) -> None:
    """Raise when any of `paths` is a symbolic link: a command about to write there would
    write through it, outside the results directory."""
    links = [p for p in paths if p.is_symlink()]
    if links:
        listing = ", ".join(str(p) for p in links[:5]) + (" ..." if len(links) > 5 else "")
        raise ResultsError(
            f"refusing to write through symbolic links ({listing}); stackmatrix writes "
            "results only inside the results directory, never through a link. Replace "
            "them with the files or directories themselves, or move them aside"
        )
