"""A real CPU `transformers serve` environment and a tiny model, built once and cached.

Both are rebuilt when missing (never skipped): the venv with uv under
~/.cache/stackmatrix/test-envs/, the model next to it, keyed by what defines them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tests.support.cpuenv import cache_root, ensure_cpu_serving_env

from stackmatrix.bench.tinymodel import make_tiny_model, script_text


@pytest.fixture(scope="session")
def cpu_python() -> Path:
    return ensure_cpu_serving_env()


@pytest.fixture(scope="session")
def tiny_model(cpu_python: Path) -> Path:
    key = hashlib.sha256((script_text() + str(cpu_python)).encode()).hexdigest()[:16]
    return make_tiny_model(cache_root().parent / "tiny-models" / key, python=[str(cpu_python)])
