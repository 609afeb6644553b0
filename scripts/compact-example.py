#!/usr/bin/env python3
"""Compress the large files of kept results directories (reports/examples/*), which
the report reads compressed as it reads them plain:

- each cell's check.json (its inventory and extensions are most of an example's bytes),
  and its build.json and bench.json when larger than 64 KiB;
- each cell's server logs (server-L*.log) and request records (requests-*.jsonl,
  warmup-*.jsonl).

Each becomes <name>.gz (gzip -9, no name or time in the header and the header's OS
byte "unknown", so the bytes depend on the content and zlib only), checked to
decompress to the same bytes before the file it replaces is removed. A results
directory's explanation rounds (explain/<cell>/round-<n>/, results directories too)
are compacted with it. Nothing else changes: `stackmatrix report` writes the same
matrix.* from the compacted directory, and running this again changes nothing.

    python scripts/compact-example.py reports/examples/h200-verdicts [...]
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import os
import stat
import struct
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

ALWAYS = ("check.json", "server-L*.log", "requests-*.jsonl", "warmup-*.jsonl")
WHEN_LARGE = ("build.json", "bench.json")
LARGE = 64 << 10  # bytes


# gzip, deflate, no name, mtime 0, "maximum compression", OS unknown (Python 3.11 and
# 3.12 write the host's OS byte): the bytes depend on the content and zlib only
_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
_CHUNK = 1 << 20


def pack(data: bytes) -> bytes:
    """gzip -9 of `data`, the same bytes whatever Python wrote them (mtime 0, OS 255)."""
    out = io.BytesIO()
    pack_stream(io.BytesIO(data), out)
    return out.getvalue()


def pack_stream(src: BinaryIO, dst: BinaryIO) -> tuple[str, int]:
    """`pack` chunk by chunk, never holding a file whole; (sha256, size) of the content."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    digest, crc, size = hashlib.sha256(), 0, 0
    dst.write(_HEADER)
    while chunk := src.read(_CHUNK):
        digest.update(chunk)
        crc, size = zlib.crc32(chunk, crc), size + len(chunk)
        dst.write(deflate.compress(chunk))
    dst.write(deflate.flush() + struct.pack("<LL", crc, size & 0xFFFFFFFF))
    return digest.hexdigest(), size


def unpacked(src: BinaryIO) -> tuple[str, int]:
    """(sha256, size) of what gzip stream `src` decompresses to, chunk by chunk (16 kB
    in: deflate makes at most about 16 MB of that)."""
    inflate, digest, size = zlib.decompressobj(16 + zlib.MAX_WBITS), hashlib.sha256(), 0
    while chunk := src.read(16 << 10):
        out = inflate.decompress(chunk)
        digest.update(out)
        size += len(out)
    return digest.hexdigest(), size


def results_dirs(run_dir: Path) -> Iterator[Path]:
    """`run_dir` and its explanation rounds (explain/<cell>/round-<n>/), links left out."""
    if run_dir.is_symlink() or not (run_dir / "run.json").is_file():
        raise SystemExit(f"compact-example: {run_dir} is not a results directory (no run.json)")
    yield run_dir
    for round_dir in sorted(run_dir.glob("explain/*/round-*")):
        linked = any(p.is_symlink() for p in (round_dir, *round_dir.parents[:2]))
        if not linked and round_dir.is_dir() and (round_dir / "run.json").is_file():
            yield round_dir


def _plain_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def to_compress(cell: Path) -> list[Path]:
    """The files of one cell directory that are compressed: regular files, never links."""
    regular = (p for p in cell.iterdir() if p.is_file() and not p.is_symlink())
    return sorted(p for p in regular if _wanted(p))


def _wanted(path: Path) -> bool:
    if any(fnmatch.fnmatchcase(path.name, pattern) for pattern in ALWAYS):
        return True
    return path.name in WHEN_LARGE and path.stat().st_size > LARGE


def compress(path: Path) -> int:
    """Replace `path` by `<path>.gz`; the size of that. Never through a link: the source
    is opened without following one, the copy is written to a new file of its own
    (O_CREAT | O_EXCL) and renamed onto the target, which must be a regular file or
    absent."""
    target = path.with_name(path.name + ".gz")
    _refuse_odd(target)
    with _open_regular(path) as src:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{target.name}.", suffix=".tmp")
        tmp = Path(name)
        try:
            with os.fdopen(fd, "w+b") as out:
                os.fchmod(out.fileno(), stat.S_IMODE(os.fstat(src.fileno()).st_mode))
                content = pack_stream(src, out)
                size = out.tell()
                out.seek(0)
                if unpacked(out) != content:  # never remove what the copy does not hold
                    raise SystemExit(f"compact-example: {path} does not decompress to itself")
            _replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    path.unlink()
    return size


def _refuse_odd(target: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.lstat(target).st_mode):
            raise SystemExit(
                f"compact-example: {target} is there and is not a regular file (a link or "
                "a directory); move it aside and run again"
            )


def _open_regular(path: Path) -> BinaryIO:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SystemExit(f"compact-example: {path} is not a regular file")
    return os.fdopen(fd, "rb")


def _replace(tmp: Path, target: Path) -> None:
    try:
        tmp.replace(target)  # a rename: it replaces a link itself, never writes through it
    except OSError as exc:
        raise SystemExit(f"compact-example: cannot replace {target}: {exc.strerror}") from exc


def compact(run_dir: Path) -> tuple[int, int, int]:
    """(files, bytes before, bytes after) for one results directory and its rounds."""
    files = before = after = 0
    for results in results_dirs(run_dir):
        cells = results / "cells"
        if not _plain_dir(cells):
            continue
        for cell in sorted(c for c in cells.iterdir() if _plain_dir(c)):
            for path in to_compress(cell):
                size = path.stat().st_size
                files, before, after = files + 1, before + size, after + compress(path)
    return files, before, after


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for arg in argv:
        n, before, after = compact(Path(arg))
        print(f"{arg}: {n} files, {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
