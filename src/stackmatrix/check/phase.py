"""The `check` phase: prove a cell's stack is coherent before anything runs.

Static analysis of the environment's files (inventory, shared libraries, symbols,
CUDA majors, GPU-arch coverage, driver) plus the runtime probe, folded into one
verdict from findings with stable codes (docs/compat.md lists every code).

The public entry points: `check_cell` (one planned cell, as `pipeline/runner.py` runs
it: a cell without a built environment raises `outcome.Skip`), `check_inputs` (what
its result depends on) and `inspect_path`; the work lives in:
- extension.py: discovery and per-extension analysis (each analysis module builds its
  own findings: libs, symbols, coverage, driver, probe, scan);
- static.py: the static check of a tree, `CheckOutcome` and `verdict_of`;
- environment.py: `check_environment` (scan cache, driver, known-bad, features, probe);
- defaults.py: the predictions from a cell's server arguments;
- inspection.py: `inspect_path` (wheels, files, directories; light to import).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from stackmatrix import __version__
from stackmatrix.built_environment import Environment
from stackmatrix.check.defaults import model_kinds, predictions
from stackmatrix.check.environment import check_environment
from stackmatrix.check.inspection import inspect_path
from stackmatrix.check.render import render_text
from stackmatrix.check.static import CheckOutcome, CheckVerdict, verdict_of
from stackmatrix.outcome import Skip
from stackmatrix.plan import PlannedCell
from stackmatrix.records import CheckData
from stackmatrix.results import PhaseResult, Status
from stackmatrix.spec_model import Spec

if TYPE_CHECKING:
    from stackmatrix.check.scancache import ScanCache

__all__ = [
    "CheckOutcome",
    "CheckVerdict",
    "check_cell",
    "check_environment",
    "check_inputs",
    "inspect_path",
    "render_text",
    "scan_note",
    "verdict_of",
]


def check_inputs(pc: PlannedCell, spec: Spec, lock: str | None) -> list[object]:
    """What a cell's check result depends on (`lock`: its build's lock digest): a
    result of other inputs is checked again."""
    return [pc.content_hash, lock, list(spec.targets), spec.driver, __version__, *_served(spec, pc)]


def _served(spec: Spec, pc: PlannedCell) -> list[object]:
    """What the check's predictions read besides the environment (check/defaults.py):
    the engine, the model and the server arguments; none without a bench, so that
    results of a spec without one still resume."""
    if spec.bench is None:
        return []
    return [[spec.bench.engine, spec.bench.model, *spec.bench.server_args, *pc.cell.server_args]]


def check_cell(
    pc: PlannedCell,
    env: Environment | None,
    spec: Spec,
    log_path: Path,
    inputs: str,
    cache: ScanCache | None = None,
) -> PhaseResult:
    """The cell's ok check result, its verdict in the message; raises Skip for a cell
    whose build did not succeed."""
    if env is None:
        raise Skip("not_built", "no environment to check: the build phase did not succeed")
    outcome = check_environment(
        env,
        cell_id=pc.cell.id,
        targets=spec.targets,
        cuda=pc.cell.cuda,
        declared_driver=spec.driver,
        log_path=log_path,
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


def scan_note(result: PhaseResult) -> str:
    """What the progress line adds when the static scan came from the cache."""
    timing = CheckData.from_dict(result.data).timing or {}
    return " (static scan cached)" if timing.get("static_scan") == "hit" else ""
