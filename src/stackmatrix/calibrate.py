"""`stackmatrix calibrate`: one cell as an A/A experiment over N server launches.

It reports the launch-to-launch and within-launch variation of the headline metric
and the smallest change a verdict could detect with K launches per cell (the power
calculation is in stackmatrix.stats.power and described in docs/report.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict

from stackmatrix import layout
from stackmatrix.errors import ResultsError, UsageError
from stackmatrix.jsontypes import JSONValue
from stackmatrix.pipeline import RunOptions, default_work_dir
from stackmatrix.records import BenchData
from stackmatrix.results import PHASES, RunDir
from stackmatrix.specfile import MAX_LAUNCHES, load_spec

if TYPE_CHECKING:
    from stackmatrix.stats.power import Calibration


def launch_values(bench_data: Mapping[str, JSONValue], metric: str) -> list[list[float]]:
    """Round values of `metric`, one list per launch that measured it (a launch that
    failed after some rounds counts with those)."""
    launches = BenchData.from_dict(bench_data).launches
    return [values for values in (x.values(metric) for x in launches) if values]


def calibrate_main(args: argparse.Namespace) -> int:
    from stackmatrix._console import Console
    from stackmatrix.stats.power import calibrate

    if not 2 <= args.launches <= MAX_LAUNCHES:  # as a spec's bench.launches is
        raise UsageError(
            f"calibrate --launches must be from 2 to {MAX_LAUNCHES} (3 or more is better), "
            f"not {args.launches}"
        )
    spec = load_spec(args.spec)
    if spec.bench is None:
        raise UsageError(f"{args.spec}: calibration needs a [bench] section")
    cell = args.cell[0] if args.cell else spec.baseline
    spec = replace(spec, bench=replace(spec.bench, launches=args.launches))
    opts = RunOptions(
        spec=spec,
        phases=PHASES,
        cells=(cell,),
        output=args.output,
        reports_dir=args.reports_dir,
        work_dir=args.work_dir or default_work_dir(),
        resume=args.resume or args.output is not None,
        force=args.force,
        backend=args.backend,
        order="sequential",
        argv=tuple(sys.argv),
    )
    from stackmatrix.executor import get_executor  # a run's own executor, as `run` takes

    kind = getattr(args, "executor", None) or spec.executor.kind
    summary = get_executor(kind)(opts, Console().progress)
    cell_dir = RunDir(summary.run_dir).cell(cell)
    bench = cell_dir.read("bench")
    metric = spec.report.headline
    values = launch_values(bench.data if bench else {}, metric)
    if len(values) < 2:
        raise ResultsError(
            f"{cell}: only {len(values)} launch(es) produced {metric}; see "
            f"{cell_dir.result_path('bench')}"
        )
    cal = calibrate(values)
    RunDir(summary.run_dir).write_json(
        layout.CALIBRATION_JSON, {"cell": cell, "metric": metric, **cal.to_dict()}
    )
    print(render(cell, metric, values, cal, spec.report.min_effect))
    return 0


def render(
    cell: str, metric: str, values: list[list[float]], cal: Calibration, min_effect: float
) -> str:
    lines = [
        f"calibration of {cell} on {metric}: {cal.launches} launches, "
        f"{cal.rounds_per_launch:.1f} rounds each"
    ]
    for i, rounds in enumerate(values):
        lines.append(f"  launch {i}: " + ", ".join(f"{v:.2f}" for v in rounds))
    within = cal.within_sd
    lines.append(
        f"launch-to-launch sd: {cal.launch_sd * 100:.2f}%   within-launch sd: "
        + (f"{within * 100:.2f}%" if within is not None else "n/a (1 round)")
    )
    lines.append(f"smallest change a verdict can detect (alpha {cal.alpha}, power {cal.power}):")
    for k, change in cal.detectable:
        flag = "" if change <= min_effect else f"  (> min_effect {min_effect:.1%})"
        lines.append(f"  {k:>3} launches per cell: {change * 100:.2f}%{flag}")
    return "\n".join(lines)


class DetectableRow(TypedDict):
    launches: int  # launches per cell
    change: float  # the smallest change a verdict finds with them


class CalibrationData(TypedDict, total=False):
    """matrix.json's `calibration`: the cell it was estimated from and
    Calibration.to_dict() (report/matrix.py writes it; `noise_note` reads it loosely)."""

    cell: str
    launches: int
    rounds_per_launch: float
    per_launch_sd: float
    launch_sd: float
    within_sd: float | None
    alpha: float
    power: float
    detectable: list[DetectableRow]


def noise_note(
    calibration: CalibrationData | None,
    min_effect: float,
    baseline: str = "",
    detectable: Mapping[str, float] | None = None,
) -> list[str]:
    """What `run` prints once a cell (the baseline when it has enough launches, matrix.json's
    `calibration.cell`) has enough launches to estimate noise, and the one power figure the
    report gives: each verdict's own `detectable` (its paired spread at the plan's last
    look; stats/verdict.py), not a second estimate from one cell's launches."""
    if not calibration:
        return []
    sd = float(calibration.get("per_launch_sd", 0.0))
    cell = str(calibration.get("cell") or "")
    source = f"{cell} (the baseline has too few)" if cell and cell != baseline else "the baseline"
    lines = [
        f"noise: a launch's value varies by {sd * 100:.1f}% (from "
        f"{calibration.get('launches')} launches of {source})"
    ]
    if detectable:
        worst, change = max(detectable.items(), key=lambda kv: kv[1])
        lines.append(
            f"a verdict of this plan finds changes of about {change * 100:.1f}% or more "
            f"(80% power, from its own pairs; {worst} has the widest)"
        )
        if change > min_effect:
            lines.append(
                f"WARNING: min_effect {min_effect:.1%} is smaller than these launches can "
                "resolve; more launches per cell or a quieter machine are needed (see "
                "`stackmatrix calibrate`)"
            )
    return lines
