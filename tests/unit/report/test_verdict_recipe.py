"""The recipe for a new verdict, performed: in a copy of the package, a member of
`Verdict` with its traits in verdict_registry.py and the place `stats/verdict.py`
reaches it (2 files, as docs/architecture.md says) make `stackmatrix report` give it in
every output: matrix.json and matrix.md by name, matrix.html in its tone, junit.xml as
its outcome, and `--fail-on regression` fails on it as its traits say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.package_copy import perform_in_copy

from ._results import two_equal_cells

MEMBER = '    NOT_MEASURED = "not measured"\n'
TRAITS = "VERDICTS: dict[Verdict, VerdictTraits] = {\n"
# reached where equivalence was: the same intervals, another name
REACHED = (
    '            Verdict.EQUIVALENT,\n            (\n                f"{_span_text(equal)} lies'
)


def _perform(copy: Path) -> None:
    registry = copy / "verdict_registry.py"
    text = registry.read_text()
    assert MEMBER in text and TRAITS in text
    text = text.replace(MEMBER, MEMBER + '    MARGINAL = "marginal"\n')
    text = text.replace(
        TRAITS,
        TRAITS + "    Verdict.MARGINAL: VerdictTraits(\n        decided=True, difference=False,"
        ' tone="open", junit="failure", regression=True\n    ),\n',
    )
    registry.write_text(text)
    stats = copy / "stats/verdict.py"
    text = stats.read_text()
    assert REACHED in text
    stats.write_text(text.replace(REACHED, REACHED.replace("EQUIVALENT", "MARGINAL")))


def test_a_new_verdict_touches_two_files_and_every_output_gives_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    perform_in_copy(site, _perform, ["stats/verdict.py", "verdict_registry.py"])

    rd = two_equal_cells(tmp_path / "run")
    env = {**os.environ, "PYTHONPATH": str(site)}
    argv = [sys.executable, "-m", "stackmatrix", "report", str(rd), "--fail-on", "regression"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 5, done.stderr  # the new verdict's traits: a regression
    assert "--fail-on matched" in done.stderr

    cells = {c["id"]: c for c in json.loads((rd / "matrix.json").read_text())["cells"]}
    assert cells["b"]["verdict"] == "marginal"
    md = (rd / "matrix.md").read_text()
    assert "| marginal |" in md and "**marginal**" not in md  # not a difference: not bold
    html = (rd / "matrix.html").read_text()
    assert '<span class="badge open">marginal</span>' in html
    junit = (rd / "junit.xml").read_text()
    cases = [c.split("</testcase>")[0] for c in junit.split('name="perf[')[1:]]
    assert len(cases) == 2 and "baseline" in cases[0]  # a, the baseline; then b
    assert "<failure" in cases[1] and "<failure" not in cases[0]

    # and the installed package, unchanged, calls the same results equivalent
    again = [sys.executable, "-m", "stackmatrix", "report", str(rd), "--fail-on", "regression"]
    assert subprocess.run(again, capture_output=True, timeout=120, check=False).returncode == 0
    assert json.loads((rd / "matrix.json").read_text())["cells"][1]["verdict"] == "equivalent"
