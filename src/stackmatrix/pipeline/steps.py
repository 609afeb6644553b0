"""The per-cell phases of a run as one registry: each a `CellPhase`, run in the order
of `spec_names.CELL_PHASES` (results.PHASES) by the local run (`pipeline/run.py`); the
report, once per run, is `phases.report_phase`. A Slurm block runs some of them on its
node (executor/block.py) through the same entries."""

from __future__ import annotations

from typing import Protocol

from stackmatrix.pipeline.bench import bench_phase
from stackmatrix.pipeline.options import Progress, RunOptions
from stackmatrix.pipeline.phases import build_phase, check_phase
from stackmatrix.plan import PlannedCell
from stackmatrix.results import PHASES, PhaseResult, RunDir


class CellPhase(Protocol):
    """A phase that runs for each planned cell and returns each one's recorded result."""

    def __call__(
        self, run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress, /
    ) -> dict[str, PhaseResult]: ...


CELL_STEPS: dict[str, CellPhase] = {
    "build": build_phase,
    "check": check_phase,
    "bench": bench_phase,
}
if tuple(CELL_STEPS) != PHASES:  # the registry and the phases' order are one list
    raise ImportError(f"pipeline/steps.py names {tuple(CELL_STEPS)}, not the phases {PHASES}")
