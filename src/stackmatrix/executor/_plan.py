"""Which blocks a Slurm run still needs, from what the results directory records: a
block whose launches are all recorded is never submitted again (resume, requeue)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path

from stackmatrix.bench import schedule
from stackmatrix.errors import Unreadable
from stackmatrix.pipeline import RunOptions
from stackmatrix.pipeline.runner import reusable
from stackmatrix.plan import PlannedCell
from stackmatrix.records import BenchData
from stackmatrix.results import PHASES, RunDir, Status
from stackmatrix.spec_model import Spec


def blocks_to_run(run: RunDir, opts: RunOptions, planned: Sequence[PlannedCell]) -> list[int]:
    """0 (build and check) when a cell lacks a complete build or check, then every
    cycle k for which some cell still lacks its k-th launch."""
    phases = opts.phases
    ids = [pc.cell.id for pc in planned]
    prepare = ("build" in phases or "check" in phases) and not all(
        reusable(run.cell(cid), phase) is not None for cid in ids for phase in ("build", "check")
    )
    blocks = [0] if prepare else []
    bench = opts.spec.bench
    if "bench" not in phases or bench is None:
        return blocks
    done = [_launches_done(run, cid, final_if_skipped=not prepare) for cid in ids]
    return blocks + [k for k in range(1, bench.launches + 1) if any(n < k for n in done)]


def _launches_done(run: RunDir, cid: str, *, final_if_skipped: bool) -> int:
    """The cell's recorded good launches; a cell whose bench was skipped (not built,
    incompatible) needs none, unless build and check run again first."""
    try:
        result = run.cell(cid).read("bench")
    except Unreadable:
        return 0
    if result is None:
        return 0
    if result.status is Status.SKIPPED and final_if_skipped:
        return 1 << 30
    return sum(1 for ln in BenchData.from_dict(result.data).launches if ln.ok)


def order_seed(spec: Spec, run_dir: Path) -> int:
    """The spec's order_seed, else the one an earlier invocation of these results drew,
    else a new one: every block of the run follows one balanced design."""
    if spec.order_seed is not None:
        return spec.order_seed
    for session in reversed(schedule.earlier_sessions(run_dir / schedule_file())):
        if isinstance(seed := session.get("order_seed"), int):
            return int(seed)
    return secrets.randbelow(2**31)


def schedule_file() -> str:
    from stackmatrix import layout

    return layout.BENCH_SCHEDULE


def statuses(run: RunDir, ids: Sequence[str], phases: Sequence[str]) -> dict[str, dict[str, str]]:
    """Each cell's status per phase, as its records say after the jobs ended."""
    out: dict[str, dict[str, str]] = {}
    for cid in ids:
        out[cid] = {}
        for phase in (p for p in PHASES if p in phases):
            try:
                result = run.cell(cid).read(phase)
            except Unreadable:
                result = None
            out[cid][phase] = result.status.value if result is not None else "not run"
    return out
