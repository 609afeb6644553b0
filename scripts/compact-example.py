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

import fnmatch
import gzip
import sys
from collections.abc import Iterator
from pathlib import Path

ALWAYS = ("check.json", "server-L*.log", "requests-*.jsonl", "warmup-*.jsonl")
WHEN_LARGE = ("build.json", "bench.json")
LARGE = 64 << 10  # bytes


def pack(data: bytes) -> bytes:
    """gzip -9 of `data`, the same bytes whatever Python wrote them (mtime 0, OS 255)."""
    packed = bytearray(gzip.compress(data, compresslevel=9, mtime=0))
    packed[9] = 255  # the header's OS byte: Python 3.11 and 3.12 write the host's
    return bytes(packed)


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
    """Replace `path` by `<path>.gz`; the size of that."""
    data = path.read_bytes()
    packed = pack(data)
    if gzip.decompress(packed) != data:  # never remove what the copy does not hold
        raise SystemExit(f"compact-example: {path} does not decompress to itself")
    target = path.with_name(path.name + ".gz")
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_bytes(packed)
    tmp.replace(target)
    path.unlink()
    return len(packed)


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
