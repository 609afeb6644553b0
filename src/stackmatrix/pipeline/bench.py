"""The bench phase of a run: every cell's launches (bench/phase.py), after the model
is there (a generated tiny model is made once per work dir)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from stackmatrix.builder.backends import get_backend
from stackmatrix.builder.phase import environments
from stackmatrix.built_environment import Environment
from stackmatrix.errors import StackmatrixError, Unreadable
from stackmatrix.outcome import Fail, Skip, write
from stackmatrix.pipeline.options import Progress, RunOptions
from stackmatrix.pipeline.runner import reusable
from stackmatrix.plan import PlannedCell
from stackmatrix.results import INTERNAL_ERROR, PhaseResult, PhaseRun, RunDir
from stackmatrix.spec_model import Spec


def bench_phase(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
) -> dict[str, PhaseResult]:
    ids = [pc.cell.id for pc in planned]
    if opts.spec.bench is None:
        return _mark_all(run, ids, Skip("no_bench", "the spec has no [bench] section"))
    from stackmatrix.bench.phase import run_bench_phase
    from stackmatrix.bench.tinymodel import TinyModelError

    envs = environments(run, ids, opts.spec)
    spec = opts.spec
    if spec.bench is not None and spec.bench.model.startswith(TINY_MODEL_PREFIX):
        try:
            spec = _with_tiny_model(spec, opts.work_dir, envs, progress)
        except TinyModelError as exc:
            return _mark_all(run, ids, Fail("model_unavailable", exc.message))
    try:
        return run_bench_phase(
            spec,
            run,
            ids,
            environments=envs,
            order=opts.order or opts.spec.order,
            force=opts.force,
            progress=lambda cell, msg: progress("bench", cell, msg),
        )
    except Exception as exc:  # the phase's own set-up (workload, schedule), not a cell's
        return _phase_crashed(run, ids, exc, progress)


def _phase_crashed(
    run: RunDir, ids: Sequence[str], exc: Exception, progress: Progress
) -> dict[str, PhaseResult]:
    """A crash outside any one cell's launches (a workload file that cannot be read, a
    full disk writing the schedule) becomes the status of every cell whose bench did
    not finish, through the same `PhaseRun.crash` as build's and check's crashes (the
    traceback in each one's bench.log); finished cells keep theirs. Bad input says
    what is wrong instead."""
    done = {cid: old for cid in ids if (old := reusable(run.cell(cid), "bench")) is not None}
    unfinished = [cid for cid in ids if cid not in done]
    if isinstance(exc, StackmatrixError | Unreadable):  # bad input: said, no traceback
        failed = _mark_all(run, unfinished, Fail("bench_failed", exc.message))
    else:
        failed = {cid: _crash(run, cid, exc) for cid in unfinished}
    for cid, result in failed.items():
        progress("bench", cid, f"bench failed: {result.message}")
    return {**done, **failed}


def _crash(run: RunDir, cid: str, exc: Exception) -> PhaseResult:
    try:
        return PhaseRun.begin(run.cell(cid), "bench", "").crash(exc)
    except OSError:  # the log cannot be written either (the disk that caused it)
        message = f"{type(exc).__name__}: {exc}"
        return _mark_all(run, [cid], Fail(INTERNAL_ERROR, message))[cid]


TINY_MODEL_PREFIX = "stackmatrix:tiny-llama"


def _with_tiny_model(
    spec: Spec, work_dir: Path, envs: dict[str, Environment], progress: Progress
) -> Spec:
    """`model = "stackmatrix:tiny-llama"`: a tiny random Llama built locally, once per
    work dir, by the baseline cell's own interpreter (it has torch + transformers).

    A host interpreter (venv/current cell) is preferred; with docker cells only, the
    image's python writes the model through a bind mount of the models directory, so
    it lies on the host where every cell's server gets it (read-only) at the same path."""
    from dataclasses import replace

    from stackmatrix.bench.tinymodel import TinyModelError, make_tiny_model

    assert spec.bench is not None
    order = [c for c in dict.fromkeys([spec.baseline, *sorted(envs)]) if c in envs]
    # a host interpreter first: an image's writes the model through a bind mount
    built = sorted((envs[c] for c in order), key=lambda e: not get_backend(e.backend).on_host)
    if not built:
        raise TinyModelError(
            "model = 'stackmatrix:tiny-llama' needs a built cell with torch and "
            "transformers to generate the model; no cell was built"
        )
    env = built[0]
    size = spec.bench.model.removeprefix(TINY_MODEL_PREFIX).lstrip("-") or "tiny"
    if size not in ("tiny", "1b"):
        raise TinyModelError(
            f"bench.model {spec.bench.model!r}: the generated models are "
            f"'{TINY_MODEL_PREFIX}' and '{TINY_MODEL_PREFIX}-1b'"
        )
    dest = work_dir / "models" / ("tiny-llama" if size == "tiny" else f"random-llama-{size}")
    progress("bench", "-", f"generated model: {dest}")
    dest = dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    python = tuple(get_backend(env.backend).python_command(env, writable=[dest.parent]))
    path = make_tiny_model(dest, python=python, env={**os.environ, **env.env}, size=size)
    return replace(spec, bench=replace(spec.bench, model=str(path)))


def _mark_all(run: RunDir, ids: Sequence[str], said: Skip | Fail) -> dict[str, PhaseResult]:
    """Every cell's bench recorded as `said`, a skip or a failure of the whole phase."""
    return {cid: write(run.cell(cid), "bench", said) for cid in ids}
