"""run.json and plan.json of a newer schema_version are refused (exit 3, naming the
file and the version), never read as this version's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackmatrix.cli import main

from .test_corrupt_results import results


def _newer(path: Path) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "schema_version": 99}))


@pytest.mark.parametrize("name", ["run.json", "plan.json"])
def test_report_refuses_a_newer_schema_version(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rd = results(tmp_path)
    _newer(rd / name)
    assert main(["report", str(rd)]) == 3
    assert f"{rd / name} has schema_version 99; this stackmatrix reads 1" in capsys.readouterr().err
    assert not (rd / "matrix.md").exists()
