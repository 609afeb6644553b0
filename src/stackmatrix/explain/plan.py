"""`explain --plan`: the reverts, what cannot be isolated and what round 1 costs, in
launches and in minutes at the newest launch times; nothing is measured."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from stackmatrix import layout
from stackmatrix.explain import roundspec
from stackmatrix.explain.context import prepare
from stackmatrix.explain.search import split
from stackmatrix.report.load import RunResults, load_run


def plan_lines(
    run_dir: Path, cell: str, launches: int | None, warmup_launches: int | None = None
) -> list[str]:
    """`explain --plan`: the reverts and the first round's cost, without measuring."""
    ctx, derived = prepare(run_dir, cell, launches)
    ctx = dataclasses.replace(ctx, warmup_launches=warmup_launches)
    groups = split(list(derived.changes)) if derived.changes else []
    bench = ctx.spec.bench
    per_cell = ctx.launches or (bench.launches if bench is not None else 5)
    warm = roundspec.warmup_launches(ctx, bench)
    out = [f"{cell} against {ctx.baseline} ({ctx.metric}): {len(derived.changes)} revert(s)"]
    for change in derived.changes:
        how = [*change.args, *(f"{k}={v}" for k, v in change.env), *change.pins]
        if change.server_args is not None:
            how = ["server_args:", *change.server_args]
        out.append(f"  revert {change.label}: {' '.join(how)}")
    out += [f"  cannot be isolated: {key}: {why}" for key, why in derived.cannot]
    out += [f"  note: {note}" for note in derived.notes]
    if groups:
        cells = len(groups) + 2
        out.append(
            f"round 1: {len(groups)} revert cell(s) + {ctx.baseline} + {cell}, "
            f"{per_cell} launch(es) each = {cells * per_cell} launches"
            + (f", after {warm} warm-up launch(es) each ({cells * warm} more)" if warm else "")
        )
        out += _round_time(run_dir, ctx.baseline, cell, len(groups), per_cell + warm)
    return out


def _round_time(run_dir: Path, baseline: str, cell: str, reverts: int, each: int) -> list[str]:
    """Round 1's wall time at the launch times of the newest measurement: the last round
    kept under explain/<cell>/ (its revert cells' own times), else the run (a revert
    cell counted at the slower of the two). What a GPU budget must hold."""
    source, results = _newest(run_dir, cell)
    base, cand = _launch_seconds(results, baseline), _launch_seconds(results, cell)
    if not base or not cand:  # not recorded (or no time at all: a synthetic run)
        return []
    kept = [t for c in results.cells if "~" in c.id and (t := _launch_seconds(results, c.id))]
    revert = sum(kept) / len(kept) if kept else max(base, cand)
    total = each * (base + cand + reverts * revert)
    return [
        f"  about {total / 60:.0f} min at the launch times of {source} ({baseline} {base:.0f} "
        f"s, {cell} {cand:.0f} s, a revert cell {revert:.0f} s per launch)"
    ]


def _newest(run_dir: Path, cell: str) -> tuple[str, RunResults]:
    rounds, k = run_dir / layout.EXPLAIN_DIR / cell, 1
    while (rounds / layout.explain_round(k) / layout.RUN_JSON).is_file():
        k += 1
    if k > 1:
        newest = layout.explain_round(k - 1)
        return f"its {newest}", load_run(rounds / newest)
    return "this run", load_run(run_dir)


def _launch_seconds(results: RunResults, cid: str) -> float | None:
    """The median wall time of a cell's launches, from start to finish (its server's
    start-up, its rounds, its teardown)."""
    import statistics

    found = results.cell(cid)
    launches = found.bench.launches if found is not None else ()
    spans = [(s[1] - s[0]).total_seconds() for launch in launches if (s := launch.span())]
    return statistics.median(spans) if spans else None
