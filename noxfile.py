"""nox sessions: matrix (the main job), cell (one cell, for CI fan-out), report,
tests, lint. `nox -s matrix -- SPEC --cell ID ...` passes arguments through."""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).parent
DEFAULT_SPEC = "matrix/cpu-smoke.toml"
PYTHON = os.environ.get("STACKMATRIX_NOX_PYTHON", "3.11")


def _spec_and_rest(posargs: list[str]) -> tuple[str, list[str]]:
    if posargs and posargs[0].endswith(".toml"):
        return posargs[0], posargs[1:]
    return DEFAULT_SPEC, posargs


@nox.session(python=PYTHON)
def matrix(session: nox.Session) -> None:
    """Build, check, benchmark and report every cell of a spec (default: the CPU spec)."""
    session.install("-e", ".")
    spec, rest = _spec_and_rest(session.posargs)
    session.run("stackmatrix", "run", spec, *rest)


@nox.session(python=PYTHON)
def cell(session: nox.Session) -> None:
    """One cell into its own results directory: `nox -s cell -- ID [SPEC] [--output DIR]`."""
    if not session.posargs:
        session.error("usage: nox -s cell -- CELL_ID [SPEC.toml] [more stackmatrix run args]")
    cell_id, rest = session.posargs[0], session.posargs[1:]
    spec, rest = _spec_and_rest(rest)
    session.install("-e", ".")
    if "--output" not in rest:
        rest = [*rest, "--output", f"results/{cell_id}"]
    session.run("stackmatrix", "run", spec, "--cell", cell_id, *rest)


@nox.session(python=PYTHON)
def cuda_images(session: nox.Session) -> None:
    """The CUDA images' heavy run, never part of `tests`: the local CUDA bases (Debian + PyPI's
    CUDA wheels), then matrix/cuda-images.toml as docker images, built and checked.
    Costs (~10 GB per image, minutes per build): reports/examples/cuda-images/README.md.
    `nox -s cuda_images -- --cell cu128 --output DIR` passes arguments to `stackmatrix run`."""
    session.install("-e", ".")
    env: dict[str, str] = {}
    # BuildKit is needed (bind and cache mounts; the legacy builder refuses index
    # credentials): Debian's docker.io client does it without buildx, newer ones need it
    if "STACKMATRIX_DOCKER" not in os.environ and Path("/usr/bin/docker").is_file():
        env["STACKMATRIX_DOCKER"] = "/usr/bin/docker"
    session.run("python", "scripts/cuda-base.py", env=env)
    session.run(
        "stackmatrix", "run", "matrix/cuda-images.toml", "--jobs", "1", *session.posargs, env=env
    )


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """Render the report of a results directory: `nox -s report -- DIR`."""
    if not session.posargs:
        session.error("usage: nox -s report -- RESULTS_DIR [--fail-on ...]")
    session.install("-e", ".")
    session.run("stackmatrix", "report", *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite: unit and integration (real uv, engines, compilers, docker)."""
    session.install("-e", ".[test]")
    args = session.posargs or ["tests"]
    session.run("pytest", *args, env={"PYTHONUNBUFFERED": "1"})


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (check + format) and mypy --strict over src, tests and this file."""
    session.install("-e", ".[test]", "ruff", "mypy", "nox", "uv")
    session.run("ruff", "check", "src", "tests", "noxfile.py")
    session.run("ruff", "format", "--check", "src", "tests", "noxfile.py")
    session.run("mypy", "src", "noxfile.py")
    session.run("mypy", "tests")
