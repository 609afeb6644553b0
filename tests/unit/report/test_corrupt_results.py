"""Corrupt results directories: the report shows a broken cell file as that cell's
problem, and a broken run.json (or an unwritable output) ends with exit 3 naming the
file, never with a traceback."""

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stackmatrix import _nofollow
from stackmatrix.cli import main
from stackmatrix.errors import Unreadable
from stackmatrix.records import PlanRecord, RunRecord
from stackmatrix.records.decode import problem
from stackmatrix.records.phases import data_problem
from stackmatrix.report import build_report

from ._results import bench_data, phase, run_dir, write
from .test_svg import deadline


def results(tmp: Path) -> Path:
    defs = {c: {"python": "3.11", "pins": [f"x=={i}"]} for i, c in enumerate("ab")}
    rd = run_dir(tmp, cells=["a", "b"], baseline="a", definitions=defs)
    request = {"ttft_s": 0.04, "itl_s": [0.02], "e2e_s": 0.08, "output_tokens": 3, "error": None}
    for c in "ab":
        write(rd / "cells" / c / "build.json", phase(c, "build"))
        bench = bench_data([[47.1, 47.3], [46.0, 46.5]], config={"port": 1})
        write(rd / "cells" / c / "bench.json", phase(c, "bench", data=bench))
        (rd / "cells" / c / "requests-L0-R0.jsonl").write_text(json.dumps(request) + "\n")
    return rd


def edit(path: Path, change: Callable[[dict[str, Any]], object]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def launch(d: dict[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], d["data"]["launches"][0])


def replace_with_directory(p: Path) -> None:
    p.unlink()
    p.mkdir()


def replace_with_file(p: Path) -> None:
    shutil.rmtree(p)
    p.write_text("x")


BENCH = "cells/a/bench.json"
RUN_JSON: dict[str, Callable[[Path], object]] = {
    "truncated": lambda p: p.write_text('{"spec'),
    "a list": lambda p: p.write_text("[1]"),
    "not UTF-8": lambda p: p.write_bytes(b'{"a": "\xff"}'),
    "cells = 5": lambda p: edit(p, lambda d: d.update(cells=5)),
    "report = 5": lambda p: edit(p, lambda d: d.update(report=5)),
    "a directory": replace_with_directory,
    "confidence 1.0": lambda p: edit(p, lambda d: d["report"].update(confidence=1.0)),
    "confidence NaN": lambda p: edit(p, lambda d: d["report"].update(confidence=float("nan"))),
    "confidence 2": lambda p: edit(p, lambda d: d["report"].update(confidence=2)),
    "min_effect -1": lambda p: edit(p, lambda d: d["report"].update(min_effect=-1)),
}
CELL_FILES: dict[str, tuple[str, Callable[[Path], object]]] = {
    "launches = 5": (BENCH, lambda p: edit(p, lambda d: d["data"].update(launches=5))),
    "launches of strings": (BENCH, lambda p: edit(p, lambda d: d["data"].update(launches=["x"]))),
    "rounds = 5": (BENCH, lambda p: edit(p, lambda d: launch(d).update(rounds=5))),
    "env_facts = 5": (BENCH, lambda p: edit(p, lambda d: launch(d).update(env_facts=5))),
    "config = 5": (BENCH, lambda p: edit(p, lambda d: d["data"].update(effective_config=5))),
    "no phase key": (BENCH, lambda p: edit(p, lambda d: d.pop("phase"))),
    "bad status": (BENCH, lambda p: edit(p, lambda d: d.update(status="weird"))),
    "data = 5": (BENCH, lambda p: edit(p, lambda d: d.update(data=5))),
    "bench a list": (BENCH, lambda p: p.write_text("[1]")),
    "launch_plan max 2**60": (
        BENCH,
        lambda p: edit(p, lambda d: d["data"].update(launch_plan={"min": 2, "max": 2**60})),
    ),
    "lock = 5": ("cells/a/build.json", lambda p: edit(p, lambda d: d["data"].update(lock=5))),
}
RUN_FILES: dict[str, tuple[str, Callable[[Path], object]]] = {
    "plan a list": ("plan.json", lambda p: p.write_text("[1]")),
    "plan truncated": ("plan.json", lambda p: p.write_text('{"cel')),
    "plan cells = 5": ("plan.json", lambda p: p.write_text('{"cells": 5}')),
    "spec not UTF-8": ("spec.toml", lambda p: p.write_bytes(b'name = "\xff"')),
    "requests not UTF-8": ("cells/a/requests-L0-R0.jsonl", lambda p: p.write_bytes(b"\xff\n")),
    "requests of wrong types": (
        "cells/a/requests-L0-R0.jsonl",
        lambda p: p.write_text('{"ttft_s": "x", "itl_s": 5, "e2e_s": [1], "error": 3}\n'),
    ),
    "cells a file": ("cells", replace_with_file),
}


def report_of(tmp: Path, name: str, corrupt: Callable[[Path], object]) -> tuple[str, Any]:
    rd = results(tmp)
    corrupt(rd / name)
    return name, build_report(rd)


@pytest.mark.parametrize("case", sorted(RUN_JSON))
def test_a_corrupt_run_json_is_exit_3_naming_it(case, tmp_path, capsys):
    rd = results(tmp_path)
    RUN_JSON[case](rd / "run.json")
    with pytest.raises(Unreadable, match=r"run\.json"):
        build_report(rd)
    assert main(["report", str(rd)]) == 3
    assert f"{rd / 'run.json'}" in capsys.readouterr().err


@pytest.mark.parametrize("case", sorted(CELL_FILES))
def test_a_corrupt_cell_file_is_that_cells_problem(case, tmp_path):
    name, outcome = report_of(tmp_path, *CELL_FILES[case])
    cell = outcome.report.cell("a")
    assert any("unreadable" in p for p in cell.problems), cell.problems
    assert f"{Path(name).name} unreadable" in outcome.markdown.read_text()
    assert outcome.report.cell("b").headline is not None  # the other cell is intact


@pytest.mark.parametrize("case", sorted(RUN_FILES))
def test_other_corrupt_files_still_give_the_four_outputs(case, tmp_path):
    _, outcome = report_of(tmp_path, *RUN_FILES[case])
    for path in (outcome.markdown, outcome.html, outcome.json, outcome.junit):
        assert path.is_file()


def test_an_unwritable_output_is_exit_3_naming_it(tmp_path, capsys):
    rd = results(tmp_path)
    (rd / "matrix.md").mkdir()
    assert main(["report", str(rd)]) == 3
    assert f"cannot write the report into {rd}" in capsys.readouterr().err


def test_links_and_fifos_in_results_are_never_read(tmp_path):
    rd = results(tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text((rd / BENCH).read_text())
    cell = rd / "cells" / "a"
    (cell / "server-L1.log").symlink_to("/dev/zero")
    os.mkfifo(cell / "server-L2.log")
    (cell / "requests-L0-R0.jsonl").unlink()
    os.mkfifo(cell / "requests-L0-R0.jsonl")
    (cell / "bench.json").unlink()
    (cell / "bench.json").symlink_to(outside)
    with deadline(20):
        outcome = build_report(rd)
    assert any(
        "bench.json" in p and "symbolic link" in p for p in outcome.report.cell("a").problems
    )
    elsewhere = tmp_path.parent / f"{tmp_path.name}-run.json"
    (rd / "run.json").rename(elsewhere)
    (rd / "run.json").symlink_to(elsewhere)
    with pytest.raises(Unreadable, match="symbolic link"):
        build_report(rd)


EXAMPLES = Path(__file__).resolve().parents[3] / "reports" / "examples"


def test_every_result_stackmatrix_wrote_fits_the_shapes():
    """The shapes refuse only what stackmatrix never writes: the kept example runs
    (CPU and H200, warm-up launches included) all fit."""
    files = sorted(EXAMPLES.glob("*/cells/*/*.json")) + sorted(EXAMPLES.glob("*/cells/*/*.json.gz"))
    assert len(files) > 20
    for path in files:
        raw = _nofollow.read_json(path)  # a kept check.json is compressed
        where = f"{path.relative_to(EXAMPLES)} data"
        assert data_problem(raw["phase"], raw["data"], where) is None
    for path in sorted(EXAMPLES.glob("*/run.json")):
        assert problem(RunRecord, json.loads(path.read_text())) is None, path
    for path in sorted(EXAMPLES.glob("*/plan.json")):
        assert problem(PlanRecord, json.loads(path.read_text())) is None, path


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
TARGETS = st.sampled_from(["run.json", "plan.json", BENCH, "cells/a/build.json"])
KEYS = st.sampled_from(["", "data", "cells", "launches", "report", "rounds", "status", "phase"])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(target=TARGETS, key=KEYS, value=JSON)
def test_any_json_anywhere_is_a_report_or_exit_3(tmp_path_factory, target, key, value):
    """Whatever JSON a results file holds, at its top or under a key the readers use,
    the report is written or refused with exit 3: never a traceback."""
    rd = results(tmp_path_factory.mktemp("fuzz"))
    path = rd / target
    data = json.loads(path.read_text())
    if not key:
        data = value
    elif key in data:
        data[key] = value
    elif key in data.get("data", {}):
        data["data"][key] = value
    else:
        for launch in data.get("data", {}).get("launches", []):
            launch[key] = value
    path.write_text(json.dumps(data))
    try:
        build_report(rd)
    except Unreadable as exc:
        assert target == "run.json", exc.message


def test_a_corrupt_phase_result_is_unreadable_not_missing(tmp_path):
    """A corrupt bench.json was summarized as "bench missing: no bench.json": it is
    unreadable, and the summary names the file."""
    rd = results(tmp_path)
    bench = rd / "cells" / "a" / "bench.json"
    bench.write_text('{"trunc')
    outcome = build_report(rd, fail_on=("failed",))
    [summary] = [p for p in outcome.report.cell("a").phases if p.phase == "bench"]
    assert summary.status == "unreadable" and str(bench) in summary.message
    md = outcome.markdown.read_text()
    assert f"bench unreadable: cannot read {bench}: not valid JSON" in md
    assert "no bench.json" not in md
    assert "a: bench unreadable" in outcome.policy_failures
    assert f'failure message="bench unreadable : cannot read {bench}' in outcome.junit.read_text()
    bench.write_text(json.dumps({**phase("a", "bench"), "data": {"launches": 5}}))
    [summary] = [p for p in build_report(rd).report.cell("a").phases if p.phase == "bench"]
    assert summary.message.startswith(f"{bench}: ")  # a shape problem, named by its file
