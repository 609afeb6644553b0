"""The build, check and report phases of a run: build and check run per cell, in
parallel (`--jobs`), through the phase runner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackmatrix import __version__
from stackmatrix._secrets import REDACTED, redact
from stackmatrix.build.backends import get_backend
from stackmatrix.build.base import BuildOutcome, Environment
from stackmatrix.build.lock import lock_digest
from stackmatrix.pipeline.options import Progress, RunOptions
from stackmatrix.pipeline.rundir import history_db
from stackmatrix.pipeline.runner import bind, describe, digest, in_parallel, reusable, run_phase
from stackmatrix.plan import PlannedCell
from stackmatrix.records import BuildData, CheckData
from stackmatrix.records._read import JSONObject
from stackmatrix.results import CellDir, PhaseResult, RunDir, Status
from stackmatrix.spec_model import Spec

if TYPE_CHECKING:
    from stackmatrix.check.scancache import ScanCache
    from stackmatrix.check.static import CheckOutcome


def build_phase(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
) -> dict[str, PhaseResult]:
    spec_dir = Path(opts.spec.path).parent

    def one(pc: PlannedCell) -> PhaseResult:
        cell_dir = run.cell(pc.cell.id)
        old = reusable(cell_dir, "build", pc.content_hash) if opts.resume else None
        if old is not None and _env_still_there(old):
            progress("build", pc.cell.id, "already built in this run (resumed)")
            return old
        progress("build", pc.cell.id, f"building ({pc.cell.backend})")

        def body() -> PhaseResult:
            outcome = _backend_build(pc, spec_dir, opts.work_dir, cell_dir.log_path("build"))
            return _build_result(pc, outcome)

        result = run_phase(cell_dir, "build", pc.content_hash, body)
        progress("build", pc.cell.id, describe(result))
        return result

    return in_parallel(planned, opts.jobs, one)


def _env_still_there(result: PhaseResult) -> bool:
    env = BuildData.from_dict(result.data).environment
    if not env:
        return False
    prefix = env.get("prefix")
    return prefix is None or (isinstance(prefix, str) and Path(prefix).exists())


def _backend_build(pc: PlannedCell, spec_dir: Path, work_dir: Path, log_path: Path) -> BuildOutcome:
    return get_backend(pc.cell.backend).build(
        pc.cell, spec_dir=spec_dir, work_dir=work_dir, log_path=log_path,
        content_hash=pc.content_hash,
    )  # fmt: skip


def _build_result(pc: PlannedCell, outcome: BuildOutcome) -> PhaseResult:
    return PhaseResult(
        phase="build",
        cell=pc.cell.id,
        status=outcome.status,
        inputs_hash=pc.content_hash,
        code=outcome.code,
        message=outcome.message,
        findings=list(outcome.findings),
        data=BuildData(
            environment=_public_environment(outcome.environment),
            lock=tuple(e.to_dict() for e in outcome.lock),
            lock_digest=lock_digest(outcome.lock) if outcome.lock else None,
            extra={"reused": outcome.reused, "content_hash": pc.content_hash, **outcome.data},
        ).to_dict(),
    )


def _public_environment(env: Environment | None) -> JSONObject | None:
    """build.json travels as a CI artifact: secret env values stay out of it, and come
    back from the spec when a later phase runs the cell."""
    return None if env is None else {**env.to_dict(), "env": redact(dict(env.env))}


def environments(run: RunDir, cell_ids: Sequence[str], spec: Spec) -> dict[str, Environment]:
    out = {}
    cells = {c.id: c for c in spec.cells}
    for cid in cell_ids:
        result = run.cell(cid).read("build")
        if result is None or result.status is not Status.OK:
            continue
        environment = BuildData.from_dict(result.data).environment
        if environment:
            env = Environment.from_dict(environment)
            out[cid] = _with_secrets(env, dict(cells[cid].env) if cid in cells else {})
    return out


def _with_secrets(env: Environment, spec_env: Mapping[str, str]) -> Environment:
    restored = {k: spec_env.get(k, v) if REDACTED in v else v for k, v in env.env.items()}
    return replace(env, env=restored)


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
    cell_dir = run.cell(pc.cell.id)
    build = cell_dir.read("build")
    lock = BuildData.from_dict(build.data).lock_digest if build else None
    inputs = digest([pc.content_hash, lock, list(opts.spec.targets), opts.spec.driver, __version__,
                     *_served(opts.spec, pc)])  # fmt: skip
    old = reusable(cell_dir, "check", inputs) if opts.resume else None
    if old is not None:
        progress("check", pc.cell.id, "unchanged since the last check (resumed)")
        return old
    progress("check", pc.cell.id, "checking")
    from stackmatrix.check.scancache import ScanCache

    cache = ScanCache.in_work_dir(opts.work_dir, identity=(pc.content_hash, lock))
    body = bind(_check_one, pc, env, opts.spec, cell_dir, inputs, cache)
    result = run_phase(cell_dir, "check", inputs, body)
    progress("check", pc.cell.id, describe(result) + _scan_note(result))
    return result


def _served(spec: Spec, pc: PlannedCell) -> list[Any]:
    """What the check's predictions read besides the environment (check/defaults.py):
    the engine, the model and the server arguments; none without a bench, so that
    results of a spec without one still resume."""
    if spec.bench is None:
        return []
    return [[spec.bench.engine, spec.bench.model, *spec.bench.server_args, *pc.cell.server_args]]


def _scan_note(result: PhaseResult) -> str:
    timing = CheckData.from_dict(result.data).timing or {}
    return " (static scan cached)" if timing.get("static_scan") == "hit" else ""


def _check_one(
    pc: PlannedCell,
    env: Environment | None,
    spec: Spec,
    cell_dir: CellDir,
    inputs: str,
    cache: ScanCache | None = None,
) -> PhaseResult:
    if env is None:
        return PhaseResult(
            phase="check",
            cell=pc.cell.id,
            inputs_hash=inputs,
            status=Status.SKIPPED,
            code="not_built",
            message="no environment to check: the build phase did not succeed",
        )
    from stackmatrix.check.phase import check_environment

    outcome = check_environment(
        env,
        cell_id=pc.cell.id,
        targets=spec.targets,
        cuda=pc.cell.cuda,
        declared_driver=spec.driver,
        log_path=cell_dir.log_path("check"),
        scan_cache=cache,
        engine=spec.bench.engine if spec.bench else None,
    )
    outcome = _with_predictions(outcome, pc, spec)
    return PhaseResult(
        phase="check",
        cell=pc.cell.id,
        inputs_hash=inputs,
        status=Status.OK,
        message=f"verdict: {outcome.verdict}",
        findings=list(outcome.findings),
        data=CheckData.from_dict(outcome.data).to_dict(),
    )


def _with_predictions(outcome: CheckOutcome, pc: PlannedCell, spec: Spec) -> CheckOutcome:
    """The environment's findings joined with this cell's server arguments (cells that
    share an environment differ in them): check/defaults.py."""
    from stackmatrix.check.defaults import model_kinds, predictions
    from stackmatrix.check.static import CheckOutcome, verdict_of

    if spec.bench is None:
        return outcome
    spec_dir = Path(spec.path).parent if spec.path else Path.cwd()
    model = spec.bench.model
    if model and not Path(model).is_absolute():
        model = str(spec_dir / model)
    found = predictions(
        engine=spec.bench.engine,
        server_args=[*spec.bench.server_args, *pc.cell.server_args],
        kinds=model_kinds(model),
        targets=spec.targets,
        findings=outcome.findings,
        cell=pc.cell.id,
    )
    if not found:
        return outcome
    findings = [*found, *outcome.findings]
    verdict = verdict_of(findings)
    data = {**outcome.data, "verdict": verdict, "findings": [f.to_dict() for f in findings]}
    return CheckOutcome(verdict=verdict, findings=findings, data=data)


def report_phase(run: RunDir, opts: RunOptions, progress: Progress) -> tuple[list[Path], list[str]]:
    from stackmatrix.report import build_report

    fail_on = opts.fail_on or opts.spec.report.fail_on
    outcome = build_report(run.path, fail_on=fail_on, history_db=history_db(opts, run.path))
    paths = [outcome.markdown, outcome.html, outcome.json, outcome.junit]
    progress("report", "-", f"wrote {', '.join(p.name for p in paths)}")
    return paths, list(outcome.policy_failures)
