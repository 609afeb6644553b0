#!/usr/bin/env python3
"""Compress the request records of kept results directories (reports/examples/*):
every cells/<id>/requests-*.jsonl and warmup-*.jsonl becomes <name>.gz (gzip -9,
no name or time in the header, so the bytes depend on the content only). The report
reads either form; nothing else in the directory changes.

    python scripts/compact-example.py reports/examples/h200-verdicts [...]
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

PATTERNS = ("requests-*.jsonl", "warmup-*.jsonl")


def compact(run_dir: Path) -> tuple[int, int, int]:
    """(files, bytes before, bytes after) for one results directory."""
    if not (run_dir / "run.json").is_file() or run_dir.is_symlink():
        raise SystemExit(f"compact-example: {run_dir} is not a results directory (no run.json)")
    files = before = after = 0
    for cell in sorted((run_dir / "cells").iterdir()):
        if cell.is_symlink() or not cell.is_dir():
            continue
        for pattern in PATTERNS:
            for path in sorted(cell.glob(pattern)):
                if path.is_symlink() or not path.is_file():
                    continue
                data = path.read_bytes()
                packed = path.with_name(path.name + ".gz")
                tmp = packed.with_name(packed.name + ".tmp")
                tmp.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
                tmp.replace(packed)
                path.unlink()
                files, before, after = files + 1, before + len(data), after + packed.stat().st_size
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
