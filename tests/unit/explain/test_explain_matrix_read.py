"""`stackmatrix explain RUN` reads RUN/matrix.json bounded: never through a link, never a
FIFO or a device, never more than its limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stackmatrix import layout
from stackmatrix.cli import main
from stackmatrix.explain import command


def _explain(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["explain", str(run)])
    return code, capsys.readouterr().err


def test_matrix_json_linked_to_dev_zero_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / layout.REPORT_JSON).symlink_to("/dev/zero")
    code, err = _explain(tmp_path, capsys)
    assert code == 3
    assert "symbolic link" in err


def test_matrix_json_fifo_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.mkfifo(tmp_path / layout.REPORT_JSON)
    code, err = _explain(tmp_path, capsys)
    assert code == 3
    assert "not a regular file" in err


def test_matrix_json_over_its_limit_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command, "MATRIX_LIMIT", 1 << 10)
    with (tmp_path / layout.REPORT_JSON).open("wb") as fh:
        fh.truncate(1 << 20)  # sparse: cheap to make, large to read
    code, err = _explain(tmp_path, capsys)
    assert code == 3
    assert "larger than" in err


def test_missing_matrix_json_says_to_run_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _explain(tmp_path, capsys)
    assert code == 3
    assert "stackmatrix report" in err
