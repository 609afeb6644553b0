"""A block as a Slurm job runs it, on its node (`stackmatrix _block`, never typed by a
person): block 0 builds and checks every cell there (so the check sees the node's
driver and GPUs), block k runs launch k of every cell in the schedule's order for
cycle k, on this one node. Every launch is recorded in the cells' bench.json as the
local run records it; a launch already recorded (a requeued or resumed job) is not
run again. The block's own record, block-K.json, says where and how it ran."""

from __future__ import annotations

import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from stackmatrix import _atomic, layout
from stackmatrix._lock import results_dir_lock
from stackmatrix.errors import ResultsError
from stackmatrix.executor._records import block_name, jobs_dir
from stackmatrix.pipeline import Progress, RunOptions, planned_cells
from stackmatrix.pipeline.run import children_stop_on_ctrl_c
from stackmatrix.pipeline.steps import CELL_STEPS
from stackmatrix.plan import PlannedCell
from stackmatrix.results import PHASES, PhaseResult, RunDir, now_iso
from stackmatrix.spec_model import Spec

if TYPE_CHECKING:
    import argparse


def block_main(args: argparse.Namespace, progress: Progress) -> int:
    from stackmatrix.pipeline import default_work_dir
    from stackmatrix.specfile import load_spec

    spec = replace(load_spec(args.spec), order_seed=args.order_seed)
    opts = RunOptions(
        spec=spec,
        cells=tuple(args.cell),
        output=args.output,
        resume=True,
        work_dir=args.work_dir or default_work_dir(),
        force=args.force,
        backend=args.backend,
        order=args.order,
        argv=(),
    )
    run_block(opts, args.block, progress)
    return 0


def run_block(opts: RunOptions, block: int, progress: Progress) -> None:
    """Run block `block` into opts.output (a results directory the submitting host made)."""
    assert opts.output is not None
    run = RunDir(opts.output)
    if not (run.path / layout.RUN_JSON).is_file() or run.path.is_symlink():
        raise ResultsError(f"{run.path} is not a results directory this run prepared")
    planned = planned_cells(opts)
    record = _Record(run.path, block)
    record.write("running")
    try:
        with children_stop_on_ctrl_c(), results_dir_lock(run.path):
            results = _phases(run, opts, planned, block, progress)
    except KeyboardInterrupt:
        record.write("interrupted")
        raise
    except BaseException:
        record.write("failed")
        raise
    record.write("finished", {cid: r.status.value for cid, r in results.items()})


def _phases(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], block: int, progress: Progress
) -> dict[str, PhaseResult]:
    if block == 0:  # the phases before the bench: build and check
        results: dict[str, PhaseResult] = {}
        for name in PHASES[: PHASES.index("bench")]:
            results = CELL_STEPS[name](run, opts, planned, progress)
        return results
    return CELL_STEPS["bench"](run, through_cycle(opts, block), planned, progress)


def through_cycle(opts: RunOptions, k: int) -> RunOptions:
    """The run asked for launches 1..k of every cell: the bench runs only those not yet
    recorded, which after blocks 1..k-1 is launch k of each cell (cycle k). The spec's
    adaptive plan is not looked at here: the submitting host runs `launches` blocks."""
    spec: Spec = opts.spec
    assert spec.bench is not None
    bench = replace(spec.bench, launches=k, min_launches=None)
    return replace(opts, spec=replace(spec, bench=bench), phases=("bench",))


class _Record:
    """block-K.json: the job, its node and what the block did, rewritten as it goes."""

    def __init__(self, run_dir: Path, block: int) -> None:
        self.path = jobs_dir(run_dir) / layout.slurm_block(block)
        self.data = {
            "schema_version": 1,
            "block": block,
            "name": block_name(block),
            "job_id": os.environ.get("SLURM_JOB_ID", ""),
            "restarts": os.environ.get("SLURM_RESTART_COUNT", "0"),
            "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
            "started": now_iso(),
        }

    def write(self, status: str, cells: dict[str, str] | None = None) -> None:
        self.data["status"] = status
        if status != "running":
            self.data["finished"] = now_iso()
        if cells is not None:
            self.data["cells"] = cells
        _atomic.write_json(self.path, self.data)
