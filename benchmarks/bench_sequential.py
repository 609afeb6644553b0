"""Launches per decided verdict: the sequential design against the even split of alpha.

Both designs judge the same simulated runs (tests/support/sequential_sim.py: launch
noise, a cold first launch on the host, a drift the cells share, a position effect in
the cycle, an occasional cold launch; the H200's figures by default), an adaptive plan
of `--low` to `--high` launches per cell, a +-2% margin:

    python benchmarks/bench_sequential.py [--runs 1000] [--low 3] [--high 8]

Printed per scenario and design: how often a change was called (faster or slower), how
often equivalence was, the median launches of the candidate, and the launches run
(warm-ups included) per decided verdict; then the ratio of the last figure, new / old.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.sequential_sim import H200, NEW, OLD, Noise, rates

SCENARIOS: list[tuple[str, float, Noise]] = [
    ("A/A, 0.5% launch noise", 0.0, H200),
    ("A/A, 0.2% launch noise", 0.0, replace(H200, launch_sd=0.002)),
    ("A/A, 1% launch noise", 0.0, replace(H200, launch_sd=0.01)),
    ("A/A, the candidate drifting 2.5%/cycle", 0.0, replace(H200, cell_drift=0.025)),
    ("a change at the margin (+2%)", 0.02, H200),
    ("-3%", -0.03, H200),
    ("-6%", -0.06, H200),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--low", type=int, default=3)
    ap.add_argument("--high", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"{args.runs} simulated runs per line, launches {args.low}-{args.high} per cell")
    print(
        f"{'scenario':42} {'design':22} {'change':>7} {'equiv':>7} {'median':>7} "
        f"{'per decided':>12}"
    )
    for name, change, noise in SCENARIOS:
        cost = {}
        for design in (NEW, OLD):
            r = rates(
                change,
                runs=args.runs,
                seed=args.seed,
                design=design,
                noise=noise,
                low=args.low,
                high=args.high,
            )
            cost[design.name] = r.cost_per_decided
            print(
                f"{name:42} {design.name:22} {r.called_a_change:7.1%} {r.equivalent:7.1%} "
                f"{r.median_launches:7.0f} {r.cost_per_decided:12.1f}"
            )
        print(
            f"{'':42} {'new / old':22} {'':7} {'':7} {'':7} {cost[NEW.name] / cost[OLD.name]:12.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
