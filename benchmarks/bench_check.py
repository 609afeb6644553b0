"""The check phase's own time on a re-run of an unchanged spec, with and without the
cached static scan. Printed for docs/compat.md.

Each repeat makes a new results directory, builds into it (the environments are
reused: nothing is installed) and runs `stackmatrix check` as a whole process, twice:
once with the work dir's scan cache emptied first (what every re-run cost before the
cache, plus writing the entry) and once with it kept. Per cell, from check.json: the
check's time outside the runtime probe (`duration_s - timing.probe_s`: reading the
import path, the static scan or its cache entry, driver, rules, features). Per run: the
whole process and, with `--jobs 1`, the whole process less the probes, per cell
(start-up, reading build.json and writing check.json included). Medians over
`--repeats`; the goal is < 1 s per cell outside the probe, cached.

    python benchmarks/bench_check.py [SPEC] [--work-dir DIR] [--jobs 1] [--repeats 3]

The default work dir is a private one (its scan cache is emptied); the first run
builds the spec's environments there once.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL_S = 1.0  # per cell, outside the runtime probe
WIDTH = 36  # of the labels: cell ids up to 19 characters line up
ROOT = Path(__file__).resolve().parents[1]


def stackmatrix(*args: str) -> float:
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "stackmatrix", *args], check=True, capture_output=True)
    return time.monotonic() - t0


def one_run(spec: Path, out: Path, work: Path, jobs: int, *, cached: bool) -> dict[str, Any]:
    common = ["--output", str(out), "--work-dir", str(work)]
    stackmatrix("build", str(spec), *common)
    if not cached:
        shutil.rmtree(work / "scan-cache", ignore_errors=True)
    wall = stackmatrix("check", str(spec), *common, "--jobs", str(jobs))
    cells = {}
    for check in sorted(out.glob("cells/*/check.json")):
        result = json.loads(check.read_text())
        timing = result["data"]["timing"]
        probe = timing.get("probe_s", 0.0)
        cells[result["cell"]] = {
            "outside_probe": result["duration_s"] - probe,
            "probe": probe,
            "static_scan": timing["static_scan"],
        }
    probes = sum(c["probe"] for c in cells.values())
    return {"wall": wall, "per_cell_outside_probe": (wall - probes) / len(cells), "cells": cells}


def median(runs: list[dict[str, Any]], *path: str) -> float:
    values = []
    for run in runs:
        value: Any = run
        for key in path:
            value = value[key]
        values.append(float(value))
    return statistics.median(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", type=Path, default=ROOT / "matrix" / "cpu-smoke.toml")
    parser.add_argument(
        "--work-dir", type=Path, default=Path.home() / ".cache" / "stackmatrix-bench"
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        for r in range(args.repeats):
            for cached in (False, True):
                out = Path(tmp) / f"run-{r}-{'cached' if cached else 'cold'}"
                runs[cached].append(
                    one_run(args.spec, out, args.work_dir, args.jobs, cached=cached)
                )
    return 0 if report(args, runs) else 1


def report(args: argparse.Namespace, runs: dict[bool, list[dict[str, Any]]]) -> bool:
    """Prints the table; True when the goal is met."""
    cold, warm = runs[False], runs[True]
    if not all(c["static_scan"] == "hit" for run in warm for c in run["cells"].values()):
        print("a cached run missed: stackmatrix's code or compat data changed meanwhile")
        return False
    print(f"spec {args.spec}, --jobs {args.jobs}, medians of {args.repeats} runs")
    print(f"{'':<{WIDTH}} {'no cache':>9} {'cached':>8} {'ratio':>7}")
    worst = 0.0
    for cell in sorted(cold[0]["cells"]):
        before = median(cold, "cells", cell, "outside_probe")
        after = median(warm, "cells", cell, "outside_probe")
        probe = median(warm, "cells", cell, "probe")
        worst = max(worst, after)
        line(f"{cell}: outside the probe", before, after, f"(probe {probe:.2f} s)")
    line("whole `stackmatrix check`", median(cold, "wall"), median(warm, "wall"))
    if args.jobs == 1:  # with parallel checks the probes overlap: nothing to subtract
        before, after = (
            median(cold, "per_cell_outside_probe"),
            median(warm, "per_cell_outside_probe"),
        )
        line("  less the probes, per cell", before, after)
        worst = max(worst, after)
    met = worst < GOAL_S
    goal = f"goal: < {GOAL_S:.0f} s per cell outside the runtime probe"
    print(f"{goal}; worst, cached: {worst:.3f} s: {'PASS' if met else 'FAIL'}")
    return met


def line(label: str, before: float, after: float, note: str = "") -> None:
    print(
        f"{label:<{WIDTH}} {before:>7.3f} s {after:>6.3f} s {before / after:>6.1f}x {note}".rstrip()
    )


if __name__ == "__main__":
    sys.exit(main())
