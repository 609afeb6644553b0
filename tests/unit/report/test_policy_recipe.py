"""The recipe for a new `--fail-on` policy, performed: in a copy of the package, its
name in spec_names.py `FAIL_ON`, its meaning in cli.py (the `--help` of run, report and
merge) and its match in report/policy.py (3 files, as docs/architecture.md says) make
`stackmatrix report --fail-on` take it and exit 5 when it matches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.package_copy import insert_after, perform_in_copy

from ._results import two_equal_cells

NAME = '    "failed",\n'
MEANING = '    "failed": "a phase failed, was interrupted or is unreadable",\n'
MATCH = "    out: list[str] = []\n    for cell in report.cells:\n"


def _perform(copy: Path) -> None:
    insert_after(copy / "spec_names.py", NAME, '    "unchanged",\n')
    insert_after(
        copy / "cli.py", MEANING, '    "unchanged": "a cell equivalent to the baseline",\n'
    )
    insert_after(
        copy / "report/policy.py",
        MATCH,
        '        if "unchanged" in fail_on and cell.verdict.value == "equivalent":\n'
        '            out.append(f"{cell.id}: equivalent to {report.baseline}")\n',
    )


def test_a_new_policy_touches_three_files_and_fails_the_report(tmp_path: Path) -> None:
    site = tmp_path / "site"
    perform_in_copy(site, _perform, ["cli.py", "report/policy.py", "spec_names.py"])
    env = {**os.environ, "PYTHONPATH": str(site)}
    rd = two_equal_cells(tmp_path / "run")
    argv = [sys.executable, "-m", "stackmatrix", "report", str(rd)]

    helped = subprocess.run(
        [*argv[:4], "--help"], env=env, capture_output=True, text=True, timeout=120
    )
    assert "unchanged: a cell equivalent to the baseline" in " ".join(helped.stdout.split())
    done = subprocess.run(
        [*argv, "--fail-on", "unchanged"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 5, done.stderr
    assert "b: equivalent to a" in done.stderr
    # other policies are as they were, and the installed package knows no such policy
    kept = [*argv, "--fail-on", "regression"]
    assert subprocess.run(kept, env=env, capture_output=True, timeout=120).returncode == 0
    refused = subprocess.run(
        [*argv, "--fail-on", "unchanged"], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "unchanged" in refused.stderr
