"""The build, check and report phases of a run: build and check hand each cell, in
parallel (`--jobs`), to the phase runner, which runs its package's per-cell entry
(`builder/phase.py` `build_cell`, `check/phase.py` `check_cell`)."""

from __future__ import annotations

from pathlib import Path

from stackmatrix.builder.phase import build_cell, environments, still_there
from stackmatrix.built_environment import Environment
from stackmatrix.pipeline.options import Progress, RunOptions
from stackmatrix.pipeline.rundir import history_db
from stackmatrix.pipeline.runner import bind, describe, digest, in_parallel, reusable, run_phase
from stackmatrix.plan import PlannedCell
from stackmatrix.records import BuildData
from stackmatrix.results import PhaseResult, RunDir


def build_phase(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
) -> dict[str, PhaseResult]:
    spec_dir = Path(opts.spec.path).parent

    def one(pc: PlannedCell) -> PhaseResult:
        cell_dir = run.cell(pc.cell.id)
        old = reusable(cell_dir, "build", pc.content_hash) if opts.resume else None
        if old is not None and still_there(old):
            progress("build", pc.cell.id, "already built in this run (resumed)")
            return old
        progress("build", pc.cell.id, f"building ({pc.cell.backend})")
        body = bind(build_cell, pc, spec_dir, opts.work_dir, cell_dir.log_path("build"))
        result = run_phase(cell_dir, "build", pc.content_hash, body)
        progress("build", pc.cell.id, describe(result))
        return result

    return in_parallel(planned, opts.jobs, one)


def check_phase(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
) -> dict[str, PhaseResult]:
    """Cells are checked in parallel, like builds (`--jobs`): the runtime probe is a child
    process, and the static scan of an unchanged environment comes from the work dir's
    cache (check/scancache.py)."""
    envs = environments(run, [pc.cell.id for pc in planned], opts.spec)

    def one(pc: PlannedCell) -> PhaseResult:
        return _check_cell(run, opts, pc, envs.get(pc.cell.id), progress)

    return in_parallel(planned, opts.jobs, one)


def _check_cell(
    run: RunDir, opts: RunOptions, pc: PlannedCell, env: Environment | None, progress: Progress
) -> PhaseResult:
    # imported when a run checks: the check's analyses are heavy to import
    from stackmatrix.check.phase import check_cell, check_inputs, scan_note
    from stackmatrix.check.scancache import ScanCache

    cell_dir = run.cell(pc.cell.id)
    build = cell_dir.read("build")
    lock = BuildData.from_dict(build.data).lock_digest if build else None
    inputs = digest(check_inputs(pc, opts.spec, lock))
    old = reusable(cell_dir, "check", inputs) if opts.resume else None
    if old is not None:
        progress("check", pc.cell.id, "unchanged since the last check (resumed)")
        return old
    progress("check", pc.cell.id, "checking")
    cache = ScanCache.in_work_dir(opts.work_dir, identity=(pc.content_hash, lock))
    body = bind(check_cell, pc, env, opts.spec, cell_dir.log_path("check"), inputs, cache)
    result = run_phase(cell_dir, "check", inputs, body)
    progress("check", pc.cell.id, describe(result) + scan_note(result))
    return result


def report_phase(run: RunDir, opts: RunOptions, progress: Progress) -> tuple[list[Path], list[str]]:
    from stackmatrix.report import build_report

    fail_on = opts.fail_on or opts.spec.report.fail_on
    outcome = build_report(run.path, fail_on=fail_on, history_db=history_db(opts, run.path))
    paths = list(outcome.files.values())
    progress("report", "-", f"wrote {', '.join(p.name for p in paths)}")
    return paths, list(outcome.policy_failures)
