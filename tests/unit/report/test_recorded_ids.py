"""A cell id recorded in run.json or plan.json names the cell's directory: one that is
not a plain name (`../../other/cells/secret`) is refused with exit 3, and nothing
outside the results directory is read or published."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackmatrix.cli import main
from stackmatrix.errors import Unreadable
from stackmatrix.results import RunDir

from ._results import phase, run_dir, write

OUTSIDE_MESSAGE = "the other directory's secret message"


def _results_beside_a_secret(tmp_path: Path, evil: str) -> Path:
    defs = {c: {"python": "3.11", "pins": [f"x=={i}"]} for i, c in enumerate("ab")}
    rd = run_dir(tmp_path / "run", cells=["a", "b"], baseline="a", definitions=defs)
    for c in "ab":
        write(rd / "cells" / c / "build.json", phase(c, "build"))
    outside = (rd / "cells" / evil).resolve()  # where the id leads
    assert not outside.is_relative_to(rd.resolve())
    write(outside / "build.json", phase("b", "build", "failed", message=OUTSIDE_MESSAGE))
    return rd


def _in_plan(rd: Path, evil: str) -> None:
    plan = json.loads((rd / "plan.json").read_text())
    plan["cells"][1]["id"] = evil
    (rd / "plan.json").write_text(json.dumps(plan))


def _in_run(rd: Path, evil: str) -> None:
    run = json.loads((rd / "run.json").read_text())
    run["cells"] = ["a", evil]
    (rd / "run.json").write_text(json.dumps(run))


@pytest.mark.parametrize("evil", ["../../x", "../../other/cells/secret"])
@pytest.mark.parametrize("plant", [_in_plan, _in_run])
def test_report_refuses_an_id_that_leads_outside(
    tmp_path: Path, evil: str, plant: object, capsys: pytest.CaptureFixture[str]
) -> None:
    rd = _results_beside_a_secret(tmp_path, evil)
    assert callable(plant)
    plant(rd, evil)
    assert main(["report", str(rd)]) == 3
    out, err = capsys.readouterr()
    assert f"cell id {evil!r} is not a plain name" in err
    assert ("plan.json" if plant is _in_plan else "run.json") in err
    assert OUTSIDE_MESSAGE not in out + err
    written = [p for p in rd.iterdir() if p.name.startswith("matrix") or p.name == "junit.xml"]
    assert written == []  # nothing published


def test_a_cell_directory_is_made_only_for_a_plain_id(tmp_path: Path) -> None:
    with pytest.raises(Unreadable, match="not a plain name"):
        RunDir(tmp_path / "run").cell("../escaped")
    assert not (tmp_path / "escaped").exists()
