"""The results directory of a run: where it is (new, resumed, --output), refusing
links and a history that cannot be one, and the run-level files (run.json, plan.json,
spec.toml)."""

from __future__ import annotations

import datetime as _dt
import glob
import hashlib
import logging
import os
import re
from dataclasses import replace
from pathlib import Path

from stackmatrix import __version__, _atomic, _nofollow, layout
from stackmatrix._secrets import redact_spec_text
from stackmatrix.errors import ResultsError, Unreadable, UsageError
from stackmatrix.pipeline.options import RunOptions
from stackmatrix.plan import PlannedCell, make_plan
from stackmatrix.records import ReportPolicyRecord, RunRecord
from stackmatrix.results import RunDir, now_iso
from stackmatrix.specfile.report import slo_table

log = logging.getLogger(__name__)


def spec_digest(spec_path: Path) -> str:
    return digest_of(spec_path.read_bytes())


def digest_of(spec_bytes: bytes) -> str:
    """A spec's digest (run.json's spec_hash) from its bytes: a spec not yet written."""
    return hashlib.sha256(spec_bytes).hexdigest()


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
    _refuse_foreign(path)
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
    """The history a run's report appends to: --history, else the
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
    "adv-other-<stamp>"."""
    if not _STAMP.fullmatch(path.name.removeprefix(f"{name}-")) or path.is_symlink():
        return False
    try:
        meta = _nofollow.read_json(path / layout.RUN_JSON)
    except Unreadable:
        return False
    return isinstance(meta, dict) and meta.get("spec_name") == name


# what a results directory holds before its run.json (a run stopped early, a results
# directory whose run.json was lost); a spec.toml there may be the user's own spec
_OURS = frozenset(
    {
        layout.LOCK_FILE,
        layout.CELLS_DIR,
        layout.EXPLAIN_DIR,
        layout.PLAN_JSON,
        layout.WORKLOAD_JSON,
        layout.WORKLOAD_JSONL,
        layout.BENCH_SCHEDULE,
        *layout.REPORT_FILES.values(),
        layout.SLURM_DIR,
        layout.CALIBRATION_JSON,
    }
)


def _refuse_foreign(path: Path) -> None:
    """The results directory itself a link (a run then wrote a whole results tree into
    the directory it named), or a directory of someone else's files (no run.json)."""
    if path.is_symlink():
        raise ResultsError(
            f"refusing to write into {path}: it is a symbolic link; stackmatrix writes "
            "results only into a directory of its own, never through a link"
        )
    if not path.is_dir() or (path / layout.RUN_JSON).exists():
        return
    try:
        foreign = [e.name for e in path.iterdir() if e.name not in _OURS]
    except OSError as exc:
        raise ResultsError(f"cannot list {path}: {exc.strerror}") from exc
    if foreign:
        raise ResultsError(
            f"refusing to write into {path}: it holds files that are not stackmatrix "
            f"results ({', '.join(sorted(foreign)[:5])}); pass a new or empty --output"
        )


def _refuse_links(path: Path) -> None:
    """Resuming writes into every cell's directory and appends to its logs: through a
    link it would write outside the results."""
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


def prepare_run(run: RunDir, opts: RunOptions, planned: list[PlannedCell]) -> None:
    """What every executor does first, under the results lock: before anything is
    written, the places the run writes into are what it wrote and a bench.json it
    cannot read is refused (it may hold measured launches); then run.json, plan.json
    and spec.toml."""
    from stackmatrix.results import PHASES

    run.check_layout([pc.cell.id for pc in planned], [p for p in PHASES if p in opts.phases])
    if "bench" in opts.phases:
        for pc in planned:
            run.cell(pc.cell.id).read_to_resume("bench")
    write_run_files(run, opts, planned)


def write_run_files(run: RunDir, opts: RunOptions, planned: list[PlannedCell]) -> None:
    spec_path = Path(opts.spec.path)
    # the spec as run, its secret values hidden: results travel (CI artifacts, merges);
    # `explain` reads the original spec, found by its path and digest (run.json)
    spec_text = spec_path.read_bytes().decode("utf-8")  # load_spec decoded it already
    _atomic.write_bytes(run.path / layout.SPEC_TOML, redact_spec_text(spec_text).encode())
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
        report=ReportPolicyRecord(
            headline=policy.headline,
            confidence=policy.confidence,
            min_effect=policy.min_effect,
            fail_on=tuple(opts.fail_on or policy.fail_on),
            slo=slo_table(policy.slo) if policy.slo else None,
        ),
    )
    run.write_json(layout.RUN_JSON, record.to_dict())
    all_planned = make_plan(opts.spec)
    run.write_json(layout.PLAN_JSON, {"cells": [pc.to_dict() for pc in all_planned]})


def mark_finished(run: RunDir) -> None:
    """run.json's `finished`: when this invocation's phases ended; `updated` says when it
    began. An interrupted or crashed invocation leaves no `finished` (each invocation
    writes run.json anew at its start)."""
    finished = replace(RunRecord.read(run), finished=now_iso())
    run.write_json(layout.RUN_JSON, finished.to_dict())
