"""What `stackmatrix build` adds to building a venv by hand (printed for the README).

Side by side in one run, same uv cache state (warm: a first build fills it): the whole
`stackmatrix build` of a new cell (a fresh work dir each repeat, so the environment is
really built) against `uv venv` + `uv pip install -r lock.txt` of the lock that build
resolved, into a fresh directory. The medians, their ratio, and where stackmatrix's
time goes (build.json's timings: venv, resolve, install; the rest is process start,
the inventory read back with the cell's interpreter, drift detection and the results
files). The goal is <= 5% over the hand-made venv, or a clear account of what the
extra time buys.

    python benchmarks/bench_build.py [--pins P ...] [--find-links DIR ...] [--python 3.11]
                                     [--repeats 5]

e.g. the CPU spec's stack: --pins torch==2.13.0 'transformers[serving]==5.17.0'
'requests>=2.32' --find-links /opt/wheels
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 0.05
DEFAULT_PINS = ("numpy==2.2.6", "requests==2.32.3", "rich==13.9.4", "pyyaml==6.0.2")


def timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.monotonic() - t0


def cache_env(cache: Path | None) -> dict[str, str] | None:
    """uv's environment: a cache of its own (--cold: an empty one per build), else as is."""
    return None if cache is None else {**os.environ, "UV_CACHE_DIR": str(cache)}


def spec_text(pins: list[str], python: str, find_links: list[str]) -> str:
    quoted = ", ".join(json.dumps(p) for p in pins)
    links = ", ".join(json.dumps(f) for f in find_links)
    return (
        f'name = "bench-build"\nbaseline = "a"\n\n[[cell]]\nid = "a"\n'
        f'python = "{python}"\nbackend = "venv"\npins = [{quoted}]\nfind_links = [{links}]\n'
    )


def stackmatrix_build(
    spec: Path, tmp: Path, k: int, cache: Path | None = None
) -> tuple[float, dict[str, float], Path]:
    out, work = tmp / f"run-{k}", tmp / f"work-{k}"
    wall = timed(
        [
            sys.executable,
            "-m",
            "stackmatrix",
            "build",
            str(spec),
            "--output",
            str(out),
            "--work-dir",
            str(work),
        ],
        env=cache_env(cache),
    )
    build = json.loads((out / "cells" / "a" / "build.json").read_text())
    timings = dict(build["data"].get("timings") or {})
    lock = Path(build["data"]["env_dir"]) / "lock.txt"  # the cell's venv (one per environment)
    return wall, timings, lock


def by_hand(
    uv: str, python: str, lock: Path, dest: Path, find_links: list[str], cache: Path | None = None
) -> float:
    links = [a for f in find_links for a in ("--find-links", f)]
    env = cache_env(cache)
    return timed([uv, "venv", "--python", python, str(dest)], env) + timed(
        [uv, "pip", "install", "--python", str(dest / "bin" / "python"), "-r", str(lock), *links],
        env,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pins", nargs="+", default=list(DEFAULT_PINS))
    ap.add_argument("--python", default=f"{sys.version_info.major}.{sys.version_info.minor}")
    ap.add_argument("--find-links", nargs="*", default=[], help="wheel directories")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="an empty uv cache for every build")
    args = ap.parse_args()
    uv = shutil.which("uv")
    if uv is None:
        print("bench_build: uv is not on PATH (pip install uv)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-build-") as name:
        tmp = Path(name)
        spec = tmp / "spec.toml"
        spec.write_text(spec_text(args.pins, args.python, args.find_links))
        _, _, lock = stackmatrix_build(spec, tmp, 0)  # fills the uv cache: both sides warm
        sm: list[float] = []
        hand: list[float] = []
        steps: dict[str, list[float]] = {}
        for k in range(1, args.repeats + 1):  # alternated, so drift hits both alike
            cold = (tmp / f"cache-sm-{k}", tmp / f"cache-hand-{k}") if args.cold else (None, None)
            wall, timings, _ = stackmatrix_build(spec, tmp, k, cold[0])
            sm.append(wall)
            for step, seconds in timings.items():
                steps.setdefault(step, []).append(seconds)
            hand.append(by_hand(uv, args.python, lock, tmp / f"hand-{k}", args.find_links, cold[1]))
    a, b = statistics.median(sm), statistics.median(hand)
    state = "an empty uv cache per build" if args.cold else "warm uv cache"
    print(f"pins: {' '.join(args.pins)} (python {args.python}, {state}, median of {args.repeats})")
    print(f"  stackmatrix build (whole process)   {a:7.2f} s")
    for step, values in steps.items():
        print(f"    {step:<33} {statistics.median(values):7.2f} s")
    inside = sum(statistics.median(v) for v in steps.values())
    print(f"    {'the rest (start, inventory, files)':<33} {a - inside:7.2f} s")
    print(f"  uv venv + uv pip install -r lock   {b:7.2f} s")
    over = a / b - 1
    verdict = "within" if over <= GOAL else "over"
    print(f"overhead: {over:+.1%} ({verdict} the {GOAL:.0%} goal)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
