"""Locating and reading the compatibility knowledge kept as TOML under compat/."""

from __future__ import annotations

import functools
import os
import tomllib
from pathlib import Path
from typing import Any

from stackmatrix.errors import StackmatrixError

ENV_VAR = "STACKMATRIX_COMPAT_DIR"
_FILES = (
    "loaders.toml", "cuda_driver.toml", "known_bad.toml", "features.toml", "switches.toml",
)  # fmt: skip


def data_dir() -> Path:
    """compat/ at the repository root, or a copy shipped inside the package."""
    override = os.environ.get(ENV_VAR)
    candidates = [Path(override)] if override else []
    here = Path(__file__).resolve()
    candidates += [here.parents[3] / "compat", here.parents[1] / "_compat_data"]
    for cand in candidates:
        if (cand / "loaders.toml").is_file():
            return cand
    tried = ", ".join(str(c) for c in candidates)
    raise StackmatrixError(
        f"compatibility data not found (tried {tried}); set {ENV_VAR} to the repository's "
        "compat/ directory"
    )


@functools.cache
def load(name: str) -> dict[str, Any]:
    """One data file, parsed (cached per process)."""
    if name not in _FILES:
        raise ValueError(f"unknown compat data file {name!r}")
    path = data_dir() / name
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise StackmatrixError(f"cannot read {path}: {exc}") from exc
    if data.get("schema_version") != 1:
        raise StackmatrixError(f"{path}: expected schema_version = 1")
    return data
