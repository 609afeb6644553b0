"""The recipe for a new executor, performed: in a copy of the package, its entry in
executor_registry.py and its module in executor/ (2 files, as docs/architecture.md
says; a third, spec_model.py's `Executor`, only for settings of its own) make
`stackmatrix run --executor NAME` offer it and run a spec through it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.package_copy import perform_in_copy

pytestmark = pytest.mark.integration

ENTRY = """    ExecutorEntry(
        name="echo",
        target="stackmatrix.executor.echo:run_echo",
        keys=(),
        summary="says so, then every phase on this host",
    ),
"""
MODULE = '''"""A throwaway executor of the recipe's test."""

from stackmatrix.pipeline import Progress, RunOptions, RunSummary, run_pipeline


def run_echo(opts: RunOptions, progress: Progress) -> RunSummary:
    progress("run", "-", "echo executor: running here")
    return run_pipeline(opts, progress)
'''
SPEC = """
name = "recipe"
[[cell]]
id = "here"
backend = "current"
[executor]
kind = "echo"
"""


def _perform(copy: Path) -> None:
    reg = copy / "executor_registry.py"
    text = reg.read_text()
    anchor = '    ExecutorEntry(\n        name="slurm",'
    assert anchor in text
    reg.write_text(text.replace(anchor, ENTRY + anchor, 1))
    (copy / "executor/echo.py").write_text(MODULE)


def test_a_new_executor_touches_two_files_and_runs_a_spec(tmp_path: Path) -> None:
    site = tmp_path / "site"
    perform_in_copy(site, _perform, ["executor/echo.py", "executor_registry.py"])
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    env = {**os.environ, "PYTHONPATH": str(site)}

    def run(*argv: str, environ: dict[str, str] = env) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "stackmatrix", *argv]
        return subprocess.run(
            cmd, env=environ, capture_output=True, text=True, timeout=180, check=False
        )

    # the installed package refuses the kind; the copy offers and runs it
    plain = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    refused = run("validate", str(spec), environ=plain)
    assert refused.returncode == 2 and "executor.kind" in refused.stdout + refused.stderr
    assert "{local,echo,slurm}" in run("run", "--help").stdout
    out = tmp_path / "out"
    done = run("run", str(spec), "--output", str(out), "--work-dir", str(tmp_path / "w"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "echo executor: running here" in done.stdout + done.stderr
    build = json.loads((out / "cells/here/build.json").read_text())
    assert build["status"] == "ok"
    assert (out / "matrix.json").is_file()
