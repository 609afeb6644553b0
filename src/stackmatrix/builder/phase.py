"""The build phase for one cell: its backend's `BuildOutcome` becomes build.json's
result, in this one place (a failed build raises `outcome.Fail`, which
`pipeline/runner.py` records), and the built environments are read back from the
results for the later phases."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from stackmatrix._secrets import is_secret_name, redact
from stackmatrix.builder.backends import get_backend
from stackmatrix.builder.base import BuildOutcome, Environment
from stackmatrix.builder.lock import lock_digest
from stackmatrix.jsontypes import JSONObject
from stackmatrix.outcome import Fail
from stackmatrix.plan import PlannedCell
from stackmatrix.records import BuildData
from stackmatrix.results import PhaseResult, RunDir, Status
from stackmatrix.spec_model import Cell, Spec


def build_cell(pc: PlannedCell, spec_dir: Path, work_dir: Path, log_path: Path) -> PhaseResult:
    """The cell's environment built (or a verified one reused): its ok result; raises
    Fail with the backend's code, message and findings when it could not be built."""
    outcome = get_backend(pc.cell.backend).build(
        pc.cell,
        spec_dir=spec_dir,
        work_dir=work_dir,
        log_path=log_path,
        content_hash=pc.content_hash,
    )
    data = _data(pc, outcome)
    if outcome.status is not Status.OK:
        code = outcome.code or "build_failed"
        raise Fail(code, outcome.message, findings=outcome.findings, data=data)
    return PhaseResult(
        phase="build",
        cell=pc.cell.id,
        status=Status.OK,
        inputs_hash=pc.content_hash,
        code=outcome.code,
        message=outcome.message,
        findings=list(outcome.findings),
        data=data,
    )


def _data(pc: PlannedCell, outcome: BuildOutcome) -> JSONObject:
    return BuildData(
        environment=_public_environment(outcome.environment),
        lock=tuple(e.to_dict() for e in outcome.lock),
        lock_digest=lock_digest(outcome.lock) if outcome.lock else None,
        extra={"reused": outcome.reused, "content_hash": pc.content_hash, **outcome.data},
    ).to_dict()


def _public_environment(env: Environment | None) -> JSONObject | None:
    """build.json travels as a CI artifact: secret env values stay out of it, and come
    back from the spec when a later phase runs the cell."""
    return None if env is None else {**env.to_dict(), "env": redact(dict(env.env))}


def still_there(result: PhaseResult) -> bool:
    """Whether the environment an ok build.json describes still exists (a resumed run
    reuses the result only then)."""
    env = BuildData.from_dict(result.data).environment
    if not env:
        return False
    prefix = env.get("prefix")
    return prefix is None or (isinstance(prefix, str) and Path(prefix).exists())


def environments(run: RunDir, cell_ids: Sequence[str], spec: Spec) -> dict[str, Environment]:
    """The environments of the cells whose build is ok, with the spec's env: env is a
    runtime setting (in the cell's run hash, not its content hash), so a build made
    before the spec's env changed is reused, and what build.json recorded of env is
    what that build saw, not what the cell runs with now (and without its secrets)."""
    out = {}
    cells = {c.id: c for c in spec.cells}
    for cid in cell_ids:
        result = run.cell(cid).read("build")
        if result is None or result.status is not Status.OK:
            continue
        environment = BuildData.from_dict(result.data).environment
        if environment:
            env = Environment.from_dict(environment)
            out[cid] = _spec_env(env, cells[cid]) if cid in cells else env
    return out


def _spec_env(env: Environment, cell: Cell) -> Environment:
    """The spec's env; a secret the build kept out of its environment altogether (the
    docker backend passes secrets to a container by name only) stays out."""
    kept = {k: v for k, v in cell.env if k in env.env or not is_secret_name(k)}
    return replace(env, env=kept)
