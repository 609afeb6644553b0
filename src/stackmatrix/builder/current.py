"""The `current` backend: the interpreter running stackmatrix, as it is."""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

from stackmatrix import _proc
from stackmatrix.builder.base import BuildOutcome, Environment
from stackmatrix.builder.lock import lockscript_path, parse_lockscript_output
from stackmatrix.builder.resolver_drift import detect_drift
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell


def build(
    cell: Cell, *, spec_dir: Path, work_dir: Path, log_path: Path, content_hash: str
) -> BuildOutcome:
    del spec_dir, work_dir, content_hash  # nothing to build: the stack is preinstalled
    # with the cell's env: PYTHONPATH there changes what this interpreter imports
    run_env = {**os.environ, **dict(cell.env)}
    result = _proc.run([sys.executable, str(lockscript_path())], timeout=120, env=run_env)
    if not result.ok:
        return BuildOutcome.failed(
            "inventory_failed",
            f"listing this interpreter's distributions failed:\n{result.tail(8)}",
        )
    lock = parse_lockscript_output(result.output, cell)
    env = Environment(
        backend="current",
        python=(sys.executable,),
        prefix=Path(sys.prefix),
        site_packages=tuple(Path(p) for p in site.getsitepackages() if Path(p).is_dir()),
        env=dict(cell.env),
    )
    with log_path.open("a", encoding="utf-8") as fh:
        fh.write(f"using the current interpreter {sys.executable} ({len(lock)} distributions)\n")
    return BuildOutcome(
        status=Status.OK,
        environment=env,
        message=f"using the current interpreter {sys.executable}",
        lock=tuple(lock),
        findings=tuple(detect_drift(cell, lock, preinstalled=True)),
        reused=True,
    )
