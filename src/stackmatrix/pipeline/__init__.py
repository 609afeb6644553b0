"""The run pipeline: spec -> plan -> build -> check -> bench -> report.

Each phase reads what the one before it wrote in the results directory. A failed
cell is a result, never the end of the run: what a cell's phase did (its result, a
Skip or Fail it raised, a crash, Ctrl-C) becomes its status at one boundary
(`runner.run_phase`; the bench's is each launch). A cell's build and check are the
work of their own packages (`build.phase`, `check.phase`); this one orders the phases.
Re-running resumes: a phase whose inputs hash is unchanged and whose result is
complete is not redone.

    options   what a run is asked to do, its cells      rundir   the results directory
    runner    the per-cell phase runner                 phases   build, check, report
    bench     the bench phase (and a generated model)   run      run_pipeline: all in order
"""

from __future__ import annotations

from stackmatrix.builder.phase import environments
from stackmatrix.pipeline.bench import TINY_MODEL_PREFIX, bench_phase
from stackmatrix.pipeline.options import (
    ALL_PHASES,
    Progress,
    RunOptions,
    RunSummary,
    default_work_dir,
    planned_cells,
    select_cells,
    with_backend,
)
from stackmatrix.pipeline.phases import build_phase, check_phase, report_phase
from stackmatrix.pipeline.run import children_stop_on_ctrl_c, run_pipeline
from stackmatrix.pipeline.rundir import (
    history_db,
    open_run_dir,
    prepare_run,
    run_identity,
    spec_digest,
    write_run_files,
)

__all__ = [
    "ALL_PHASES",
    "TINY_MODEL_PREFIX",
    "Progress",
    "RunOptions",
    "RunSummary",
    "bench_phase",
    "build_phase",
    "check_phase",
    "children_stop_on_ctrl_c",
    "default_work_dir",
    "environments",
    "history_db",
    "open_run_dir",
    "planned_cells",
    "prepare_run",
    "report_phase",
    "run_identity",
    "run_pipeline",
    "select_cells",
    "spec_digest",
    "with_backend",
    "write_run_files",
]
