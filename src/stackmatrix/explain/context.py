"""What explaining a cell starts from: the run's context (its spec as run, typed, with
the cells' definitions; the thresholds) and the reverts derived from its differences."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stackmatrix import _nofollow, layout
from stackmatrix.errors import ResultsError, StackmatrixError, UsageError
from stackmatrix.explain.derive import Derived, derive
from stackmatrix.report.load import RunResults, load_run
from stackmatrix.report.model import build_model
from stackmatrix.spec_model import Cell, Spec
from stackmatrix.stats.verdict import Thresholds

SPEC_LIMIT = 16 << 20  # a spec is a few KiB; its copy in a results directory no more


@dataclass(frozen=True, kw_only=True)
class ExplainContext:
    run_dir: Path
    cell: str
    baseline: str
    metric: str
    thresholds: Thresholds
    spec: Spec  # the spec as run (with the baseline and the cell), or the results' copy
    spec_dir: Path
    launches: int | None
    warmup: int | None = None  # warm-up requests per launch in the rounds (None: the run's)
    warmup_launches: int | None = None  # per cell in the rounds (None: the run's, at least 1)
    rejudge: bool = False  # judge the rounds kept under explain/<cell>/, measure nothing
    note: str = ""  # said in the explanation's notes

    @property
    def baseline_cell(self) -> Cell:
        return self.spec.cell(self.baseline)

    @property
    def candidate(self) -> Cell:
        return self.spec.cell(self.cell)


def prepare(run_dir: Path, cell: str, launches: int | None) -> tuple[ExplainContext, Derived]:
    """What explaining `cell` starts from: the run's context and the reverts derived from
    its differences (nothing is measured)."""
    results = load_run(run_dir)
    model = build_model(results)
    ctx = _context(results, cell, launches, model.thresholds, model.headline)
    report = model.cell(cell)
    if report.drift is None:
        raise UsageError(f"cell {cell!r} has no comparison with the baseline to explain")
    derived = derive(
        report.drift.intended,
        report.drift.unintended,
        engine=_engine(results, cell),
        baseline=ctx.baseline_cell,
        cell=ctx.candidate,
    )
    return ctx, derived


def _context(
    results: RunResults, cell: str, launches: int | None, th: Thresholds, metric: str
) -> ExplainContext:
    if results.cell(cell) is None:
        known = ", ".join(c.id for c in results.cells)
        raise UsageError(f"no cell {cell!r} in {results.path} (cells: {known})")
    if cell == results.baseline:
        raise UsageError(f"{cell!r} is the baseline: explain a cell that differs from it")
    original = Path(str(results.run.get("spec_path") or ""))
    spec_dir = original.resolve().parent if original.is_file() else results.path
    needed = (cell, results.baseline)
    spec = _original_spec(original, str(results.run.get("spec_hash") or ""))
    if spec is not None and all(c in {x.id for x in spec.cells} for c in needed):
        # the spec as run, secrets included (the results hold it with them hidden)
        note = ""
    else:
        spec = _results_copy(results, needed)
        note = (
            f"the spec as run ({original}) is not here or has changed: revert cells are "
            "built from the results' copy, whose secret values (index credentials, "
            "secret env) are hidden"
        )
    return ExplainContext(
        run_dir=results.path,
        cell=cell,
        baseline=results.baseline,
        metric=metric,
        thresholds=th,
        spec=spec,
        spec_dir=spec_dir,
        launches=launches,
        note=note,
    )


def _original_spec(path: Path, digest: str) -> Spec | None:
    """The original spec, when it is still the one run."""
    from stackmatrix.pipeline.rundir import spec_digest
    from stackmatrix.specfile import load_spec

    try:
        if not path.is_file() or spec_digest(path) != digest:
            return None
        return load_spec(path)
    except (OSError, StackmatrixError):
        return None


def _results_copy(results: RunResults, needed: Sequence[str]) -> Spec:
    """The results' copy of the spec as run (its secret values hidden), its cells those
    of plan.json that explaining needs: the baseline and the cell."""
    from stackmatrix.specfile import parse_spec

    spec_file = results.path / layout.SPEC_TOML
    try:
        # the results' copy: never through a link, never a FIFO, never unbounded
        raw = tomllib.loads(_nofollow.read_bytes(spec_file, limit=SPEC_LIMIT).decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ResultsError(f"cannot read {spec_file}: {exc}") from exc
    tables: list[dict[str, object]] = []
    for cell_id in needed:
        found = results.cell(cell_id)
        if found is None or not found.definition:
            raise ResultsError(
                f"{layout.PLAN_JSON} of {results.path} has no definition of {cell_id!r}"
            )
        fields = {
            k: v for k, v in found.definition.items() if k not in ("id", "axes") and v is not None
        }
        tables.append({"id": cell_id, **fields})
    # the cells as plan.json defines them, in place of the copy's own
    top = {k: v for k, v in raw.items() if k not in _CELL_TABLES}
    return parse_spec({**top, "baseline": results.baseline, "cell": tables}, path=str(spec_file))


_CELL_TABLES = ("cell", "defaults", "axes", "include", "exclude")


def _engine(results: RunResults, cell: str) -> str:
    found = results.cell(cell)
    engine = found.data("bench").get("engine") if found is not None else None
    return str(engine or "")
