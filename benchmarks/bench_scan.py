"""Scan speed: stackmatrix's ELF/fatbin reader against cuobjdump + readelf.

Both sides gather the same facts for the four extensions of the real sgl-kernel
0.3.21 wheel: needed libraries, dynamic symbols and fatbin entries. Each side runs
once to warm the page cache, then `--repeats` times; the best time counts.

    python benchmarks/bench_scan.py [--wheel PATH] [--repeats 3]

It also times the whole `stackmatrix inspect` process on the extensions' directory (the
library call alone leaves out Python's start and the imports).

The wheel is downloaded from PyPI into ~/.cache/stackmatrix/wheels when missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

from stackmatrix.check.scan import scan_extension

CACHE = Path.home() / ".cache" / "stackmatrix" / "wheels"
WHEEL = "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
EXTENSIONS = (
    "sgl_kernel/flash_ops.abi3.so",
    "sgl_kernel/flashmla_ops.abi3.so",
    "sgl_kernel/sm90/common_ops.abi3.so",
    "sgl_kernel/sm100/common_ops.abi3.so",
)


def wheel_path(arg: str | None) -> Path:
    path = Path(arg) if arg else CACHE / WHEEL
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                "3.10",
                "--platform",
                "manylinux2014_x86_64",
                "sgl-kernel==0.3.21",
                "-d",
                str(CACHE),
            ],
            check=True,
        )
    return path


def unpack(wheel: Path) -> list[Path]:
    dest = CACHE / "sgl_kernel-0.3.21-unpacked"
    with zipfile.ZipFile(wheel) as zf:
        for name in EXTENSIONS:
            if not (dest / name).is_file():
                zf.extract(name, dest)
    return [dest / n for n in EXTENSIONS]


def find_cuobjdump() -> str:
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for cand in sorted(Path(root).glob("*/bin/cuobjdump")):
            return str(cand)
    found = shutil.which("cuobjdump")
    if not found:
        sys.exit("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    return found


def with_tools(files: list[Path], cuobjdump: str) -> int:
    """The baseline: one process per fact, as a person would run them."""
    lines = 0
    for f in files:
        for argv in (
            [cuobjdump, "--list-elf", str(f)],
            [cuobjdump, "--list-ptx", str(f)],
            ["readelf", "-d", "-W", str(f)],
            ["readelf", "--dyn-syms", "-W", str(f)],
        ):
            out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
            lines += out.count("\n")
    return lines


def with_stackmatrix(files: list[Path]) -> int:
    facts = 0
    for f in files:
        scan = scan_extension(f)
        facts += len(scan.dynamic.needed) + len(scan.symbols) + len(scan.fatbin)
    return facts


def with_inspect_scan(files: list[Path]) -> int:
    """The scan `inspect` makes: it prints only how many symbols are undefined."""
    return sum(scan_extension(f, with_symbols=False).undefined_count for f in files)


def with_inspect(root: Path) -> int:
    """The whole `stackmatrix inspect` process on the directory holding the extensions:
    start-up, imports, the scan and the findings."""
    # as installed: pip writes the bytecode, so the warm-up run may write it here too
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(
        [sys.executable, "-m", "stackmatrix", "inspect", str(root), "--json"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    return out.stdout.count("\n")


def best_of(fn: Callable[[], int], repeats: int) -> tuple[float, int]:
    fn()  # warm the page cache so both sides read from memory
    best, result = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wheel", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    files = unpack(wheel_path(args.wheel))
    size = sum(f.stat().st_size for f in files) / 1e9
    cuobjdump = find_cuobjdump()
    tools_s, lines = best_of(lambda: with_tools(files, cuobjdump), args.repeats)
    ours_s, facts = best_of(lambda: with_stackmatrix(files), args.repeats)
    light_s, _ = best_of(lambda: with_inspect_scan(files), args.repeats)
    root = files[0].parent  # sgl_kernel/: the four extensions and the package's .py files
    whole_s, _ = best_of(lambda: with_inspect(root), args.repeats)
    print(f"sgl-kernel 0.3.21: {len(files)} extensions, {size:.2f} GB")
    print(
        f"cuobjdump --list-elf/--list-ptx + readelf -d/--dyn-syms: {tools_s:.3f} s ({lines} lines)"
    )
    print(
        f"stackmatrix scan_extension:                               {ours_s:.3f} s ({facts} facts)"
    )
    print(f"speed-up: {tools_s / ours_s:.1f}x")
    print(f"the same without symbol names (inspect's scan):          {light_s:.3f} s")
    print(f"stackmatrix inspect {root.name}/ (whole process):        {whole_s:.3f} s")
    print(f"speed-up, whole process: {tools_s / whole_s:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
