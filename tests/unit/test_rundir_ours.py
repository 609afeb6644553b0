"""A results directory whose run.json was lost is resumed when it holds only what
stackmatrix writes, a Slurm run's records and a calibration included, and refused when
it holds anything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackmatrix import layout
from stackmatrix.errors import ResultsError
from stackmatrix.pipeline.rundir import _refuse_foreign


def test_what_a_slurm_run_or_calibrate_writes_first_is_ours(tmp_path: Path) -> None:
    (tmp_path / layout.SLURM_DIR).mkdir()
    (tmp_path / layout.SLURM_DIR / layout.SLURM_JOBS).write_text("{}")
    (tmp_path / layout.CALIBRATION_JSON).write_text("{}")
    (tmp_path / layout.PLAN_JSON).write_text("{}")
    _refuse_foreign(tmp_path)  # no error


def test_anything_else_is_refused(tmp_path: Path) -> None:
    (tmp_path / layout.SLURM_DIR).mkdir()
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(ResultsError, match=r"not stackmatrix results \(thesis.tex\)"):
        _refuse_foreign(tmp_path)
