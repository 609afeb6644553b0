"""The run: the phases in order under the results directory's lock, with every child
stopped on Ctrl-C, SIGTERM or SIGHUP."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from stackmatrix import _proc, _signals
from stackmatrix._lock import results_dir_lock
from stackmatrix.pipeline.options import (
    Progress,
    RunOptions,
    RunSummary,
    planned_cells,
)
from stackmatrix.pipeline.phases import report_phase
from stackmatrix.pipeline.rundir import mark_finished, open_run_dir, prepare_run
from stackmatrix.pipeline.steps import CELL_STEPS
from stackmatrix.plan import PlannedCell
from stackmatrix.results import PHASES, RunDir


@contextmanager
def children_stop_on_ctrl_c() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP stop our children at once, wherever the main thread
    is (even outside a try block), so worker threads waiting on them finish and the run
    can exit."""
    with _signals.stop_signals(_proc.terminate_all):
        yield


def run_pipeline(opts: RunOptions, progress: Progress) -> RunSummary:
    with children_stop_on_ctrl_c():
        return _run_pipeline(opts, progress)


def _run_pipeline(opts: RunOptions, progress: Progress) -> RunSummary:
    planned = planned_cells(opts)
    run = open_run_dir(opts)
    with results_dir_lock(run.path):
        return _run_locked(run, opts, planned, progress)


def _run_locked(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
) -> RunSummary:
    phases = [p for p in PHASES if p in opts.phases]
    prepare_run(run, opts, planned)
    progress("run", "-", f"results in {run.path}")
    summary = RunSummary(run_dir=run.path, statuses={pc.cell.id: {} for pc in planned})
    for name in phases:
        if name not in CELL_STEPS:
            continue  # the report, below
        for cid, result in CELL_STEPS[name](run, opts, planned, progress).items():
            summary.statuses.setdefault(cid, {})[name] = result.status.value
    if "report" in opts.phases:
        summary.report_paths, summary.policy_failures = report_phase(run, opts, progress)
    mark_finished(run)
    return summary
