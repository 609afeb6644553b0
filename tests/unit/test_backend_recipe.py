"""The recipe for a new backend, performed: in a copy of the package, its entry in
backend_registry.py and a module of its own under builder/ (2 files, as
docs/architecture.md says) make it a backend a cell may name, `--backend` offers and
`stackmatrix build` builds with, recorded as it; a setting another backend owns is
refused for its cells."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.package_copy import insert_after, perform_in_copy

ENTRY = '    BackendEntry("current", "stackmatrix.builder.backends:CurrentBackend"),\n'
MODULE = '''"""A throwaway backend: the interpreter running stackmatrix, under a name of its own."""

import dataclasses

from stackmatrix.builder import current
from stackmatrix.builder.backends import CurrentBackend


class HereBackend(CurrentBackend):
    name = "here"


def build(cell, **where):
    outcome = current.build(cell, **where)
    if outcome.environment is None:
        return outcome
    env = dataclasses.replace(outcome.environment, backend="here")
    return dataclasses.replace(outcome, environment=env)
'''
SPEC = """name = "here"
[[cell]]
id = "a"
backend = "here"
"""


def _perform(copy: Path) -> None:
    insert_after(
        copy / "backend_registry.py",
        ENTRY,
        '    BackendEntry("here", "stackmatrix.builder.here:HereBackend"),\n',
    )
    (copy / "builder/here.py").write_text(MODULE)


def _stackmatrix(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "stackmatrix", *argv]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_a_new_backend_touches_two_files_and_builds_a_cell(tmp_path: Path) -> None:
    site = tmp_path / "site"
    perform_in_copy(site, _perform, ["backend_registry.py", "builder/here.py"])
    env = {**os.environ, "PYTHONPATH": str(site)}
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)

    assert "here" in " ".join(_stackmatrix(env, "build", "--help").stdout.split())
    out = tmp_path / "run"
    done = _stackmatrix(env, "build", str(spec), "--output", str(out), "--work-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    build = json.loads((out / "cells" / "a" / "build.json").read_text())
    assert build["status"] == "ok", build
    assert build["data"]["environment"]["backend"] == "here"

    # venv's own setting is refused for a cell of the new backend, in its words
    spec.write_text(SPEC + 'inherit = "current"\n')
    refused = _stackmatrix(env, "build", str(spec), "--output", str(tmp_path / "no"))
    assert refused.returncode == 2
    assert "applies to the venv backend only, not 'here'" in refused.stderr
    # and the installed package knows no such backend
    spec.write_text(SPEC)
    plain = _stackmatrix(dict(os.environ), "build", str(spec), "--output", str(tmp_path / "p"))
    assert plain.returncode == 2 and "here" in plain.stderr
