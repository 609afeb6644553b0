"""Locating and reading the compatibility knowledge kept as TOML under compat/."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import Any

from stackmatrix._datadir import ENV_VAR, compat_dir
from stackmatrix.errors import StackmatrixError

FILES = (  # the check's data files in compat/
    "loaders.toml",
    "cuda_driver.toml",
    "known_bad.toml",
    "features.toml",
    "switches.toml",
    "system_libs.toml",
    "nvcc_arch.toml",
)


def data_dir() -> Path:
    """compat/ at the repository root, or a copy shipped inside the package
    (stackmatrix._datadir: the one rule, shared with the report)."""
    found = compat_dir()
    if not (found / "loaders.toml").is_file():
        raise StackmatrixError(
            f"compatibility data not found in {found}; set {ENV_VAR} to the repository's "
            "compat/ directory"
        )
    return found


@functools.cache
def load(name: str) -> dict[str, Any]:
    """One data file, parsed (cached per process)."""
    if name not in FILES:
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
