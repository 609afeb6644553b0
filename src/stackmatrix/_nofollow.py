"""Results directories read and copied without ever following a link.

Pieces downloaded from CI and results directories on a shared disk are untrusted
input: a `server-L1.log` that links to /dev/zero, or to a file outside, must not be
read, copied or written through. Every open here uses
O_NOFOLLOW and checks that it got a regular file; directories are walked without
following links, so a link loop is never entered.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import stat
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from stackmatrix import _jsonload, layout
from stackmatrix.errors import ResultsError, Unreadable

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not block
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def open_regular(path: Path) -> int:
    """A read-only descriptor of `path`, which must be a regular file and not a link."""
    try:
        fd = os.open(path, _READ)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unreadable(
                f"{path} is a symbolic link; stackmatrix never follows links in results "
                "directories: replace it with the file itself"
            ) from exc
        raise Unreadable(f"cannot read {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Unreadable(f"{path} is not a regular file; expected a file written by stackmatrix")
    return fd


# A file written by stackmatrix is far smaller; a bigger one is not ours (a sparse file,
# a copy of something else) and would only exhaust memory.
DEFAULT_LIMIT = 256 << 20


def read_bytes(path: Path, *, limit: int = DEFAULT_LIMIT) -> bytes:
    """The whole of regular file `path`, refused when larger than `limit` bytes."""
    with os.fdopen(open_regular(path), "rb") as fh:
        data = fh.read(limit + 1)  # a file growing while read is bounded too
    if len(data) > limit:
        raise Unreadable(
            f"{path} is larger than {_size(limit)}; a file that stackmatrix writes is far "
            "smaller: replace it with the file from the run"
        )
    return data


_CHUNK = 1 << 20


def read_gzip(path: Path, *, limit: int = DEFAULT_LIMIT) -> bytes:
    """The decompressed content of regular gzip file `path`, refused when it expands to
    more than `limit` bytes (a gzip bomb stops there, never exhausting memory) or is not
    a whole gzip file."""
    chunks, size = [], 0
    for chunk in gunzip_file(path, limit=limit):
        size += len(chunk)
        if size > limit:
            raise Unreadable(
                f"{path} expands to more than {_size(limit)}; a file that stackmatrix "
                "writes is far smaller: replace it with the file from the run"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def gunzip_file(path: Path, *, limit: int) -> Iterator[bytes]:
    """The decompressed content of `path`, chunk by chunk (never more than one chunk in
    memory); a damaged or truncated gzip file is Unreadable, and so is one larger
    than `limit` bytes on disk (a sparse file's holes count: they are read)."""
    with os.fdopen(open_regular(path), "rb") as raw:
        if os.fstat(raw.fileno()).st_size > limit:
            raise Unreadable(
                f"{path} is too large: over {_size(limit)}; a file that stackmatrix writes "
                "is far smaller: replace it with the file from the run"
            )
        yield from gunzip(raw, path)


_GZIP_WBITS = 16 + zlib.MAX_WBITS
_IN_CHUNK = 16 << 10  # compressed bytes per step: deflate gives at most ~1032x that


def gunzip(raw: BinaryIO, path: Path) -> Iterator[bytes]:
    """The decompressed members of the gzip stream `raw`, one after another. Zero padding
    after a member is skipped a chunk at a time (Python's gzip skips it a byte at a
    time: 256 MiB of it took 25 s); anything else is the start of another member."""
    inflate, between = zlib.decompressobj(_GZIP_WBITS), True  # an empty file is no member
    try:
        while block := raw.read(_IN_CHUNK):
            while block:
                if between:
                    if not (block := block.lstrip(b"\0")):
                        break
                    inflate = zlib.decompressobj(_GZIP_WBITS)
                if out := inflate.decompress(block):
                    yield out
                block, between = (inflate.unused_data, True) if inflate.eof else (b"", False)
    except zlib.error as exc:
        raise _not_gzip(path, exc) from exc
    if not between:
        raise _not_gzip(path, "it ends inside a member")


class ChunkReader(io.RawIOBase):
    """A readable stream of `chunks` (gunzip's), for line-by-line reading through
    io.BufferedReader."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._chunk, self._at = chunks, memoryview(b""), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at >= len(self._chunk):
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._chunk, self._at = memoryview(chunk), 0
        n = min(len(buffer), len(self._chunk) - self._at)
        buffer[:n] = self._chunk[self._at : self._at + n]
        self._at += n
        return n


def _not_gzip(path: Path, why: object) -> Unreadable:
    return Unreadable(
        f"cannot read {path}: not a whole gzip file ({why}); replace it with the "
        "file from the run, or decompress what is left with `zcat`"
    )


def read_ends(path: Path, *, limit: int) -> bytes:
    """Regular file `path` whole, or when larger than `limit` bytes its first and last
    `limit // 2` (a log may be large, even sparse: its start says how the server was
    configured, its end how it stopped). A `.gz` file is read decompressed, the same
    way; it is refused (Unreadable) when it expands to more than GZIP_EXPAND_LIMIT."""
    if path.name.endswith(layout.COMPRESSED_SUFFIX):
        return _gzip_ends(path, limit=limit)
    with os.fdopen(open_regular(path), "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size <= limit:
            return fh.read(limit)
        head = fh.read(limit // 2)
        fh.seek(size - limit // 2)
        return head + b"\n" + fh.read(limit // 2)


GZIP_EXPAND_LIMIT = 1 << 30  # of a compressed log: more is a gzip bomb, not a log


def _gzip_ends(path: Path, *, limit: int) -> bytes:
    """read_ends of the decompressed content of gzip file `path`: the whole of it is
    decompressed (up to GZIP_EXPAND_LIMIT bytes), only its two ends are kept."""
    half = limit // 2
    head, tail, size = bytearray(), bytearray(), 0
    for chunk in gunzip_file(path, limit=GZIP_EXPAND_LIMIT):
        size += len(chunk)
        if size > GZIP_EXPAND_LIMIT:
            raise Unreadable(
                f"{path} expands to more than {_size(GZIP_EXPAND_LIMIT)}; a server log "
                "is far smaller: replace it with the file from the run"
            )
        head += chunk[: max(0, limit - len(head))]
        tail += chunk
        if len(tail) > limit:  # trimmed now and then, not at every chunk
            del tail[: len(tail) - half]
    if size <= limit:
        return bytes(head)
    return bytes(head[:half]) + b"\n" + bytes(tail[len(tail) - half :])


def _size(n: int) -> str:
    if n >= 1 << 30 and not n % (1 << 30):
        return f"{n >> 30} GiB"
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def read_json(path: Path, *, limit: int = DEFAULT_LIMIT) -> Any:
    """The JSON of `path`, decompressed first when its name ends in `.gz`; `limit` bounds
    the bytes of JSON text either way."""
    gzipped = path.name.endswith(layout.COMPRESSED_SUFFIX)
    data = read_gzip(path, limit=limit) if gzipped else read_bytes(path, limit=limit)
    try:
        return _jsonload.loads(data)
    except _jsonload.TooDeepError as exc:
        raise Unreadable(
            f"cannot read {path}: {exc}; stackmatrix writes no JSON that deep: restore "
            "it from the run's artifacts"
        ) from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"cannot read {path}: not valid JSON: {exc}") from exc


def copy_file(src: Path, dst: Path, *, tail: int | None = None, head: int | None = None) -> bool:
    """Copy one regular file to a new `dst` (mode and times kept). With `tail`, a file
    larger than that is copied as its last `tail` bytes after a line saying so; with
    `head`, as its first `head` bytes. Returns whether it was cut."""
    with os.fdopen(open_regular(src), "rb") as fin:
        st = os.fstat(fin.fileno())
        bound = tail if tail is not None else head
        cut = bound is not None and st.st_size > bound
        with create_new(dst, st) as fout:
            if cut and tail is not None:
                fout.write(
                    f"[stackmatrix: {src.name} was {st.st_size} bytes; only its last "
                    f"{_size(tail)} were copied]\n".encode()
                )
                fin.seek(st.st_size - tail)
            shutil.copyfileobj(fin if bound is None else _Bounded(fin, bound), fout)
    keep_times(dst, st)
    return cut


def create_new(dst: Path, st: os.stat_result) -> BinaryIO:
    """`dst` created for writing with the mode of `st`: never through a link, never onto
    a file that is there."""
    return os.fdopen(os.open(dst, _CREATE, stat.S_IMODE(st.st_mode)), "wb")


def keep_times(dst: Path, st: os.stat_result) -> None:
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


class _Bounded:
    """At most `left` bytes of `fh` (a file still growing is copied bounded too)."""

    def __init__(self, fh: Any, left: int) -> None:
        self._fh, self._left = fh, left

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        data: bytes = self._fh.read(size)
        self._left -= len(data)
        return data


@dataclass(frozen=True)
class Copied:
    skipped: list[Path]  # links and special files (FIFOs, devices, sockets): not copied
    cut: list[Path]  # files larger than their limit: only their end was copied


def copy_tree(
    src: Path, dst: Path, *, copy: Callable[[Path, Path, Path], bool] | None = None
) -> Copied:
    """Copy the directories and regular files below `src` into a new `dst`; links and
    special files are skipped. Each file is copied by `copy(source, target, relative
    path)` (default: whole, copy_file), which returns whether it was cut."""
    copied = Copied(skipped=[], cut=[])
    dst.mkdir(parents=True)
    for entry, relative in walk(src):
        target = dst / relative
        if entry.is_dir(follow_symlinks=False):
            target.mkdir()
        elif entry.is_file(follow_symlinks=False):
            source = Path(entry.path)
            if copy(source, target, relative) if copy else copy_file(source, target):
                copied.cut.append(source)
        else:
            copied.skipped.append(Path(entry.path))
    return copied


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
