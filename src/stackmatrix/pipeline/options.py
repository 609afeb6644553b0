"""What a run is asked to do (`RunOptions`), what it did (`RunSummary`), and the
cells it runs."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stackmatrix._workdir import work_dir_problem
from stackmatrix.errors import UsageError
from stackmatrix.plan import PlannedCell, make_plan
from stackmatrix.spec_model import PIPELINE_PHASES, Spec

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
        problem = work_dir_problem(Path(env))
        if problem is not None:
            raise UsageError(f"$STACKMATRIX_WORK_DIR: {problem}")
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "stackmatrix"


@dataclass
class RunSummary:
    run_dir: Path
    statuses: dict[str, dict[str, str]]  # cell -> phase -> status
    policy_failures: list[str] = field(default_factory=list)
    report_paths: list[Path] = field(default_factory=list)


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
        cell = replace(pc.cell, backend=backend)
        out.append(replace(pc, cell=cell, content_hash=content_hash(cell, spec_dir)))
    return out


def planned_cells(opts: RunOptions) -> list[PlannedCell]:
    """The cells a run of `opts` runs: the spec's (or `--cell`'s), on `--backend` when
    given; what every executor and a Slurm block start from."""
    return with_backend(select_cells(opts.spec, opts.cells), opts.spec, opts.backend)
