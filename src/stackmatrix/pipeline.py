"""The run pipeline: spec -> plan -> build -> check -> bench -> report.

Each phase reads what the one before it wrote in the results directory. A failed
cell is a result, never the end of the run; exceptions from a phase become a
`failed` status here, at this one boundary. Re-running resumes: a phase whose
inputs hash is unchanged and whose result is complete is not redone.
"""

from __future__ import annotations

import datetime as _dt
import glob
import hashlib
import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackmatrix import __version__, _atomic, _nofollow, _proc, _signals, layout
from stackmatrix._lock import results_dir_lock
from stackmatrix._secrets import REDACTED, redact
from stackmatrix.envs.backends import get_backend
from stackmatrix.envs.base import BuildOutcome, Environment
from stackmatrix.envs.lock import lock_digest
from stackmatrix.errors import ResultsError, StackmatrixError, UsageError
from stackmatrix.plan import PlannedCell, make_plan
from stackmatrix.records import ReportPolicy, RunRecord
from stackmatrix.results import INTERNAL_ERROR, CellDir, PhaseResult, RunDir, Status, now_iso
from stackmatrix.spec_model import PIPELINE_PHASES, Spec

if TYPE_CHECKING:
    from stackmatrix.compat.scancache import ScanCache

log = logging.getLogger(__name__)
ALL_PHASES = PIPELINE_PHASES
Progress = Callable[[str, str, str], None]  # (phase, cell, message)


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    spec: Spec
    phases: tuple[str, ...] = ALL_PHASES
    cells: tuple[str, ...] = ()  # empty: every cell
    output: Path | None = None
    reports_dir: Path = Path("reports")
    history: Path | None = None  # --history; None: see history_db()
    work_dir: Path = field(default_factory=lambda: default_work_dir())
    jobs: int = 2
    resume: bool = False
    force: bool = False
    backend: str | None = None  # override every cell's backend
    order: str | None = None
    fail_on: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()


def default_work_dir() -> Path:
    env = os.environ.get("STACKMATRIX_WORK_DIR")
    if env:
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "stackmatrix"


@dataclass
class RunSummary:
    run_dir: Path
    statuses: dict[str, dict[str, str]]  # cell -> phase -> status
    policy_failures: list[str] = field(default_factory=list)
    report_paths: list[Path] = field(default_factory=list)


def spec_digest(spec_path: Path) -> str:
    return hashlib.sha256(spec_path.read_bytes()).hexdigest()


def select_cells(spec: Spec, wanted: Sequence[str]) -> list[PlannedCell]:
    plan = make_plan(spec)
    if not wanted:
        return plan
    ids = [pc.cell.id for pc in plan]
    unknown = [w for w in wanted if w not in ids]
    if unknown:
        import difflib

        hints = []
        for u in unknown:
            close = difflib.get_close_matches(u, ids, n=1)
            hints.append(f"{u!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise UsageError(f"unknown cell {', '.join(hints)}; the spec's cells are {', '.join(ids)}")
    return [pc for pc in plan if pc.cell.id in wanted]


def with_backend(planned: list[PlannedCell], spec: Spec, backend: str | None) -> list[PlannedCell]:
    if backend is None:
        return planned
    from dataclasses import replace

    from stackmatrix.plan import content_hash

    spec_dir = Path(spec.path).parent
    out = []
    for pc in planned:
        cell = replace(pc.cell, backend=backend)  # type: ignore[arg-type]
        out.append(replace(pc, cell=cell, content_hash=content_hash(cell, spec_dir)))
    return out


# ---------------------------------------------------------------- run directory


def open_run_dir(opts: RunOptions) -> RunDir:
    spec_path = Path(opts.spec.path)
    if opts.output is not None:
        path = opts.output
    elif opts.resume:
        path = _latest_run(opts.reports_dir, opts.spec.name)
    else:
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        path = opts.reports_dir / f"{opts.spec.name}-{stamp}"
    run = RunDir(path)
    if path.is_dir():
        _refuse_links(path)
    if run.run_json.exists():
        _check_same_spec(run, spec_path)
    if "report" in opts.phases:
        _check_history(history_db(opts, path))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # `reports` a file, a read-only parent: before any work
        raise ResultsError(f"cannot create the results directory {path}: {exc}") from exc
    return run


def history_db(opts: RunOptions, run_path: Path) -> Path | None:
    """The history a run's report appends to (issue 16, defect 14): --history, else the
    reports directory's when the results directory is inside it, else none: a run with
    --output elsewhere writes nothing outside what it was given."""
    if opts.history is not None:
        return opts.history
    reports = opts.reports_dir.resolve()
    if opts.output is None or reports in opts.output.resolve().parents:
        return opts.reports_dir / layout.HISTORY_DB
    return None


def _check_history(db: Path | None) -> None:
    """A history path that cannot be one fails now, not at the report after all the work."""
    if db is None:
        return
    if db.is_symlink() or (db.exists() and not db.is_file()):
        raise UsageError(f"history database {db} is not a regular file; pass --history PATH")
    parent = next((p for p in (db.parent, *db.parent.parents) if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UsageError(
            f"history database {db}: {parent} is not a directory; pass --history PATH "
            "or --reports-dir DIR"
        )


_STAMP = re.compile(r"\d{8}T\d{6}Z")


def _latest_run(reports_dir: Path, name: str) -> Path:
    runs = sorted(p for p in reports_dir.glob(f"{glob.escape(name)}-*") if _is_run_of(p, name))
    if not runs:
        raise UsageError(
            f"--resume found no earlier run of {name!r} under {reports_dir}; "
            "drop --resume or pass --output DIR"
        )
    return runs[-1]


def _is_run_of(path: Path, name: str) -> bool:
    """`NAME-<UTC stamp>` whose run.json names spec NAME: the spec "adv" must not resume
    "adv-other-<stamp>" (issue 16, defect 3)."""
    if not _STAMP.fullmatch(path.name.removeprefix(f"{name}-")) or path.is_symlink():
        return False
    try:
        meta = _nofollow.read_json(path / layout.RUN_JSON)
    except ResultsError:
        return False
    return isinstance(meta, dict) and meta.get("spec_name") == name


def _refuse_links(path: Path) -> None:
    """Resuming writes into every cell's directory and appends to its logs: through a
    link it would write outside the results (issue 16, defect 6)."""
    links = _nofollow.links_below(path)
    if links:
        listing = ", ".join(str(p) for p in links[:5]) + (" ..." if len(links) > 5 else "")
        raise ResultsError(
            f"refusing to write into {path}: it holds symbolic links ({listing}); "
            "stackmatrix writes results only inside the results directory, never through "
            "a link. Remove the links or start a new run"
        )


def _check_same_spec(run: RunDir, spec_path: Path) -> None:
    if RunRecord.read(run).spec_hash != spec_digest(spec_path):
        log.warning(
            "%s was written for another version of the spec; phases whose inputs "
            "changed will be redone",
            run.path,
        )


def run_identity() -> str | None:
    """Names the CI run that several per-cell jobs belong to, so merge can tell."""
    explicit = os.environ.get("STACKMATRIX_RUN_ID")
    if explicit:
        return explicit
    gh = os.environ.get("GITHUB_RUN_ID")
    return f"github:{gh}.{os.environ.get('GITHUB_RUN_ATTEMPT', '1')}" if gh else None


def write_run_files(run: RunDir, opts: RunOptions, planned: list[PlannedCell]) -> None:
    spec_path = Path(opts.spec.path)
    _atomic.write_bytes(run.path / layout.SPEC_TOML, spec_path.read_bytes())
    previous = RunRecord.read(run) if run.run_json.exists() else RunRecord()
    cells = sorted(set(previous.cells) | {pc.cell.id for pc in planned})
    policy = opts.spec.report
    record = RunRecord(
        spec_name=opts.spec.name,
        spec_path=str(spec_path),
        spec_hash=spec_digest(spec_path),
        baseline=opts.spec.baseline,
        targets=tuple(opts.spec.targets),
        driver=opts.spec.driver,
        cells=tuple(cells),
        order=opts.order or opts.spec.order,
        order_seed=opts.spec.order_seed,
        created=previous.created or now_iso(),
        updated=now_iso(),  # this invocation's start; `finished` comes at its end
        stackmatrix_version=__version__,
        run_id=previous.run_id or run_identity(),
        argv=tuple(opts.argv),
        report=ReportPolicy(
            headline=policy.headline,
            confidence=policy.confidence,
            min_effect=policy.min_effect,
            fail_on=tuple(opts.fail_on or policy.fail_on),
        ),
    )
    run.write_json(layout.RUN_JSON, record.to_dict())
    all_planned = make_plan(opts.spec)
    run.write_json(layout.PLAN_JSON, {"cells": [pc.to_dict() for pc in all_planned]})


# ---------------------------------------------------------------- phases


def _reusable(cell_dir: CellDir, phase: str, inputs_hash: str) -> PhaseResult | None:
    try:
        old = cell_dir.read(phase)
    except ResultsError:
        return None
    if old is not None and old.complete and old.inputs_hash == inputs_hash:
        return old
    return None


def _run_phase(
    cell_dir: CellDir, phase: str, inputs_hash: str, body: Callable[[], PhaseResult]
) -> PhaseResult:
    """Mark the phase interrupted, run it, and record what happened, crash or not."""
    started = now_iso()
    t0 = time.monotonic()
    cell_dir.write(
        PhaseResult(
            phase=phase,
            cell=cell_dir.cell,
            status=Status.INTERRUPTED,
            inputs_hash=inputs_hash,
            started=started,
            message="in progress",
        )
    )
    try:
        result = body()
    except Exception as exc:  # a phase's crash becomes a status (bench: per launch)
        result = PhaseResult(
            phase=phase,
            cell=cell_dir.cell,
            status=Status.FAILED,
            inputs_hash=inputs_hash,
            code=INTERNAL_ERROR,
            message=cell_dir.crashed(phase, exc),
        )
    if _proc.interrupted():
        # its child was stopped by Ctrl-C: whatever it returned is not a real outcome
        result = PhaseResult(
            phase=phase,
            cell=cell_dir.cell,
            status=Status.INTERRUPTED,
            inputs_hash=inputs_hash,
            code="interrupted",
            message="interrupted; re-run with --resume",
        )
        cell_dir.write(result)
        return result
    result.started = started
    result.finished = now_iso()
    result.duration_s = time.monotonic() - t0
    cell_dir.write(result)
    return result


def build_phase(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
) -> dict[str, PhaseResult]:
    spec_dir = Path(opts.spec.path).parent

    def one(pc: PlannedCell) -> PhaseResult:
        cell_dir = run.cell(pc.cell.id)
        old = _reusable(cell_dir, "build", pc.content_hash) if opts.resume else None
        if old is not None and _env_still_there(old):
            progress("build", pc.cell.id, "already built in this run (resumed)")
            return old
        progress("build", pc.cell.id, f"building ({pc.cell.backend})")

        def body() -> PhaseResult:
            outcome = _backend_build(pc, spec_dir, opts.work_dir, cell_dir.log_path("build"))
            return _build_result(pc, outcome)

        result = _run_phase(cell_dir, "build", pc.content_hash, body)
        progress("build", pc.cell.id, _describe(result))
        return result

    return _in_parallel(planned, opts.jobs, one)


def _env_still_there(result: PhaseResult) -> bool:
    env = result.data.get("environment")
    if not env:
        return False
    prefix = env.get("prefix")
    return prefix is None or Path(prefix).exists()


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
        data={
            "environment": _public_environment(outcome.environment),
            "lock": [e.to_dict() for e in outcome.lock],
            "lock_digest": lock_digest(outcome.lock) if outcome.lock else None,
            "reused": outcome.reused,
            "content_hash": pc.content_hash,
            **outcome.data,
        },
    )


def _public_environment(env: Environment | None) -> dict[str, Any] | None:
    """build.json travels as a CI artifact: secret env values stay out of it, and come
    back from the spec when a later phase runs the cell (issue 16, defect 9)."""
    return None if env is None else {**env.to_dict(), "env": redact(dict(env.env))}


def environments(run: RunDir, cell_ids: Sequence[str], spec: Spec) -> dict[str, Environment]:
    out = {}
    cells = {c.id: c for c in spec.cells}
    for cid in cell_ids:
        result = run.cell(cid).read("build")
        if result is not None and result.status is Status.OK and result.data.get("environment"):
            env = Environment.from_dict(result.data["environment"])
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
    cache (compat/scancache.py)."""
    envs = environments(run, [pc.cell.id for pc in planned], opts.spec)

    def one(pc: PlannedCell) -> PhaseResult:
        return _check_cell(run, opts, pc, envs.get(pc.cell.id), progress)

    return _in_parallel(planned, opts.jobs, one)


def _in_parallel(
    planned: list[PlannedCell], jobs: int, one: Callable[[PlannedCell], PhaseResult]
) -> dict[str, PhaseResult]:
    """One cell per worker, at most `jobs` at once; Ctrl-C stops the children and the
    cells not started yet, and the results come back in the plan's order."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pc.cell.id: pool.submit(one, pc) for pc in planned}
        try:
            return {cid: f.result() for cid, f in futures.items()}
        except KeyboardInterrupt:
            for f in futures.values():
                f.cancel()
            _proc.terminate_all()
            raise


def _check_cell(
    run: RunDir, opts: RunOptions, pc: PlannedCell, env: Environment | None, progress: Progress
) -> PhaseResult:
    cell_dir = run.cell(pc.cell.id)
    build = cell_dir.read("build")
    lock = build.data.get("lock_digest") if build else None
    inputs = _digest(
        [pc.content_hash, lock, list(opts.spec.targets), opts.spec.driver, __version__]
    )
    old = _reusable(cell_dir, "check", inputs) if opts.resume else None
    if old is not None:
        progress("check", pc.cell.id, "unchanged since the last check (resumed)")
        return old
    progress("check", pc.cell.id, "checking")
    from stackmatrix.compat.scancache import ScanCache

    cache = ScanCache.in_work_dir(opts.work_dir, identity=(pc.content_hash, lock))
    body = _bind(_check_one, pc, env, opts.spec, cell_dir, inputs, cache)
    result = _run_phase(cell_dir, "check", inputs, body)
    progress("check", pc.cell.id, _describe(result) + _scan_note(result))
    return result


def _scan_note(result: PhaseResult) -> str:
    timing = result.data.get("timing") or {}
    return " (static scan cached)" if timing.get("static_scan") == "hit" else ""


def _bind(fn: Callable[..., PhaseResult], *args: Any) -> Callable[[], PhaseResult]:
    return lambda: fn(*args)


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
    from stackmatrix.compat.phase import check_environment

    outcome = check_environment(
        env,
        cell_id=pc.cell.id,
        targets=spec.targets,
        cuda=pc.cell.cuda,
        declared_driver=spec.driver,
        log_path=cell_dir.log_path("check"),
        scan_cache=cache,
    )
    return PhaseResult(
        phase="check",
        cell=pc.cell.id,
        inputs_hash=inputs,
        status=Status.OK,
        message=f"verdict: {outcome.verdict}",
        findings=list(outcome.findings),
        data=dict(outcome.data),
    )


def bench_phase(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
) -> dict[str, PhaseResult]:
    ids = [pc.cell.id for pc in planned]
    if opts.spec.bench is None:
        return _mark_all(
            run, ids, "bench", Status.SKIPPED, "no_bench", "the spec has no [bench] section"
        )
    from stackmatrix.bench.phase import run_bench_phase

    envs = environments(run, ids, opts.spec)
    spec = opts.spec
    if spec.bench is not None and spec.bench.model.startswith(TINY_MODEL_PREFIX):
        try:
            spec = _with_tiny_model(spec, opts.work_dir, envs, progress)
        except StackmatrixError as exc:
            return _mark_all(run, ids, "bench", Status.FAILED, "model_unavailable", exc.message)
    return run_bench_phase(
        spec,
        run,
        ids,
        environments=envs,
        order=opts.order or opts.spec.order,
        force=opts.force,
        progress=lambda cell, msg: progress("bench", cell, msg),
    )


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

    from stackmatrix.bench.tinymodel import make_tiny_model

    assert spec.bench is not None
    order = [c for c in dict.fromkeys([spec.baseline, *sorted(envs)]) if c in envs]
    # a host interpreter first: an image's writes the model through a bind mount
    built = sorted((envs[c] for c in order), key=lambda e: not get_backend(e.backend).on_host)
    if not built:
        raise StackmatrixError(
            "model = 'stackmatrix:tiny-llama' needs a built cell with torch and "
            "transformers to generate the model; no cell was built"
        )
    env = built[0]
    size = spec.bench.model.removeprefix(TINY_MODEL_PREFIX).lstrip("-") or "tiny"
    if size not in ("tiny", "1b"):
        raise StackmatrixError(
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


def _mark_all(
    run: RunDir, ids: Sequence[str], phase: str, status: Status, code: str, message: str
) -> dict[str, PhaseResult]:
    out = {}
    for cid in ids:
        result = PhaseResult(
            phase=phase,
            cell=cid,
            status=status,
            inputs_hash="",
            code=code,
            message=message,
            started=now_iso(),
            finished=now_iso(),
        )
        run.cell(cid).write(result)
        out[cid] = result
    return out


def report_phase(run: RunDir, opts: RunOptions, progress: Progress) -> tuple[list[Path], list[str]]:
    from stackmatrix.report import build_report

    fail_on = opts.fail_on or opts.spec.report.fail_on
    outcome = build_report(run.path, fail_on=fail_on, history_db=history_db(opts, run.path))
    paths = [outcome.markdown, outcome.html, outcome.json, outcome.junit]
    progress("report", "-", f"wrote {', '.join(p.name for p in paths)}")
    return paths, list(outcome.policy_failures)


def _describe(result: PhaseResult) -> str:
    text = result.status.value
    if result.code:
        text += f" ({result.code})"
    if result.message:
        text += f": {result.message.splitlines()[0]}"
    return f"{text} [{result.duration_s:.1f}s]"


def _digest(data: Any) -> str:
    import json

    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------- driver


@contextmanager
def _children_stop_on_ctrl_c() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP stop our children at once, wherever the main thread
    is (even outside a try block), so worker threads waiting on them finish and the run
    can exit (issue 16, defect 8: a SIGTERM used to leave the server running)."""
    with _signals.stop_signals(_proc.terminate_all):
        yield


def run_pipeline(opts: RunOptions, progress: Progress) -> RunSummary:
    with _children_stop_on_ctrl_c():
        return _run_pipeline(opts, progress)


def _run_pipeline(opts: RunOptions, progress: Progress) -> RunSummary:
    planned = with_backend(select_cells(opts.spec, opts.cells), opts.spec, opts.backend)
    run = open_run_dir(opts)
    with results_dir_lock(run.path):
        return _run_locked(run, opts, planned, progress)


def _run_locked(
    run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
) -> RunSummary:
    write_run_files(run, opts, planned)
    progress("run", "-", f"results in {run.path}")
    summary = RunSummary(run_dir=run.path, statuses={pc.cell.id: {} for pc in planned})
    steps: list[tuple[str, Callable[[], dict[str, PhaseResult]]]] = [
        ("build", lambda: build_phase(run, opts, planned, progress)),
        ("check", lambda: check_phase(run, opts, planned, progress)),
        ("bench", lambda: bench_phase(run, opts, planned, progress)),
    ]
    for name, step in steps:
        if name not in opts.phases:
            continue
        for cid, result in step().items():
            summary.statuses.setdefault(cid, {})[name] = result.status.value
    if "report" in opts.phases:
        summary.report_paths, summary.policy_failures = report_phase(run, opts, progress)
    _mark_finished(run)
    return summary


def _mark_finished(run: RunDir) -> None:
    """run.json's `finished`: when this invocation's phases ended; `updated` says when it
    began. An interrupted or crashed invocation leaves no `finished` (each invocation
    writes run.json anew at its start)."""
    finished = replace(RunRecord.read(run), finished=now_iso())
    run.write_json(layout.RUN_JSON, finished.to_dict())
