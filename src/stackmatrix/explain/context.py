"""What explaining a cell starts from: the run's context (its spec as run, the cells'
definitions, the thresholds) and the reverts derived from its differences."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackmatrix import _nofollow, layout
from stackmatrix.errors import ResultsError, StackmatrixError, UsageError
from stackmatrix.explain.derive import Derived, derive
from stackmatrix.report.load import RunResults, load_run
from stackmatrix.report.model import build_model
from stackmatrix.report.stats import Thresholds

SPEC_LIMIT = 16 << 20  # a spec is a few KiB; its copy in a results directory no more


@dataclass(frozen=True, kw_only=True)
class Context:
    run_dir: Path
    cell: str
    baseline: str
    metric: str
    thresholds: Thresholds
    raw_spec: dict[str, Any]
    spec_dir: Path
    definitions: dict[str, dict[str, Any]]
    launches: int | None
    warmup: int | None = None  # warm-up requests per launch in the rounds (None: the run's)
    warmup_launches: int | None = None  # per cell in the rounds (None: the run's, at least 1)
    rejudge: bool = False  # judge the rounds kept under explain/<cell>/, measure nothing
    note: str = ""  # said in the explanation's notes


def prepare(run_dir: Path, cell: str, launches: int | None) -> tuple[Context, Derived]:
    """What explaining `cell` starts from: the run's context and the reverts derived from
    its differences (nothing is measured)."""
    results = load_run(run_dir)
    model = build_model(results)
    ctx = _context(results, cell, launches, model.thresholds, model.headline)
    report = model.cell(cell)
    if report.drift is None:
        raise UsageError(f"cell {cell!r} has no comparison with the baseline to explain")
    derived = derive(report.drift.intended, report.drift.unintended,
                     engine=_engine(results, cell), baseline_def=ctx.definitions[ctx.baseline],
                     cell_def=ctx.definitions[cell])  # fmt: skip
    return ctx, derived


def _context(
    results: RunResults, cell: str, launches: int | None, th: Thresholds, metric: str
) -> Context:
    if results.cell(cell) is None:
        known = ", ".join(c.id for c in results.cells)
        raise UsageError(f"no cell {cell!r} in {results.path} (cells: {known})")
    if cell == results.baseline:
        raise UsageError(f"{cell!r} is the baseline: explain a cell that differs from it")
    original = Path(str(results.run.get("spec_path") or ""))
    spec_dir = original.resolve().parent if original.is_file() else results.path
    definitions = {c.id: dict(c.definition) for c in results.cells if c.definition}
    unredacted = _original_spec(original, str(results.run.get("spec_hash") or ""))
    if unredacted is not None:
        # the spec as run, secrets included (the results hold it with them hidden)
        raw, definitions = unredacted[0], {**definitions, **unredacted[1]}
        note = ""
    else:
        spec_file = results.path / layout.SPEC_TOML
        try:
            # the results' copy: never through a link, never a FIFO, never unbounded
            raw = tomllib.loads(_nofollow.read_bytes(spec_file, limit=SPEC_LIMIT).decode())
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ResultsError(f"cannot read {spec_file}: {exc}") from exc
        note = (
            f"the spec as run ({original}) is not here or has changed: revert cells are "
            "built from the results' copy, whose secret values (index credentials, "
            "secret env) are hidden"
        )
    for needed in (cell, results.baseline):
        if needed not in definitions:
            raise ResultsError(f"plan.json of {results.path} has no definition of {needed!r}")
    return Context(run_dir=results.path, cell=cell, baseline=results.baseline, metric=metric,
                   thresholds=th, raw_spec=raw, spec_dir=spec_dir, definitions=definitions,
                   launches=launches, note=note)  # fmt: skip


def _original_spec(
    path: Path, digest: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]] | None:
    """The original spec's TOML and cell definitions, when it is still the one run."""
    from stackmatrix.pipeline.rundir import spec_digest
    from stackmatrix.plan import cell_definition
    from stackmatrix.spec import load_spec

    try:
        if not path.is_file() or spec_digest(path) != digest:
            return None
        spec = load_spec(path)
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, StackmatrixError):
        return None
    return raw, {c.id: cell_definition(c) for c in spec.cells}


def _engine(results: RunResults, cell: str) -> str:
    found = results.cell(cell)
    engine = found.data("bench").get("engine") if found is not None else None
    return str(engine or "")
