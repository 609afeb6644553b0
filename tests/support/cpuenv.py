"""A cached CPU environment that can run `transformers serve` (tests, benchmarks).

Built with uv from PyPI (torch's CPU wheel may come from local find-links) under
~/.cache/stackmatrix/test-envs/<hash of the requirements>, rebuilt when missing.
It never depends on the cache existing: a missing or broken one is built again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from stackmatrix import _proc
from stackmatrix.errors import StackmatrixError, ToolMissingError

log = logging.getLogger(__name__)

# transformers 5.17 has `transformers serve` with streamed /v1/completions and usage;
# its CLI imports `requests`, which the [serving] extra does not bring.
REQUIREMENTS: tuple[str, ...] = (
    "torch==2.13.0+cpu",
    "transformers[serving]==5.17.0",
    "requests",
)
FIND_LINKS: tuple[str, ...] = ("/opt/wheels",)
PYTHON = "3.11"
READY_MARKER = ".stackmatrix-env-ready"


class EnvBuildError(StackmatrixError):
    """uv could not build the CPU serving environment."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stackmatrix" / "test-envs"


def env_key(requirements: Sequence[str], python: str, find_links: Sequence[str]) -> str:
    text = "\n".join([python, *requirements, "--", *find_links])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def ensure_cpu_serving_env(
    *,
    requirements: Sequence[str] = REQUIREMENTS,
    python: str = PYTHON,
    find_links: Sequence[str] = FIND_LINKS,
    root: Path | None = None,
    timeout_s: float = 1800.0,
) -> Path:
    """The interpreter of a venv that has `requirements`; built once, then reused."""
    uv = shutil.which("uv")
    if uv is None:
        raise ToolMissingError("uv is not installed; install it (pip install uv) and retry")
    root = root or cache_root()
    dest = root / env_key(requirements, python, find_links)
    interpreter = dest / "bin" / "python"
    if (dest / READY_MARKER).is_file() and interpreter.exists():
        return interpreter
    shutil.rmtree(dest, ignore_errors=True)
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    _uv([uv, "venv", "--python", python, str(dest)], env, timeout_s)
    links = [x for link in find_links if Path(link).exists() for x in ("--find-links", link)]
    _uv(
        [uv, "pip", "install", "--python", str(interpreter), *links, *requirements],
        env,
        timeout_s,
    )
    (dest / READY_MARKER).write_text("\n".join(requirements) + "\n")
    log.info("CPU serving environment ready at %s", dest)
    return interpreter


def _uv(argv: Sequence[str], env: dict[str, str], timeout_s: float) -> None:
    result = _proc.run(argv, env=env, timeout=timeout_s)
    if not result.ok:
        raise EnvBuildError(
            f"{' '.join(argv[:3])} failed (exit {result.returncode}):\n{result.tail(20)}"
        )


if __name__ == "__main__":  # pragma: no cover - convenience for humans
    print(ensure_cpu_serving_env())
    sys.exit(0)
