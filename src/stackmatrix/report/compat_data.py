"""Where the compatibility knowledge kept as data lives (the repository's compat/)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from stackmatrix._datadir import ENV_VAR, compat_dir
from stackmatrix.errors import ResultsError

_ENV = ENV_VAR
__all__ = ["compat_dir", "load_toml"]


def load_toml(name: str, directory: Path | None = None) -> dict[str, Any]:
    path = (directory or compat_dir()) / name
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError as exc:
        raise ResultsError(
            f"{path} is missing: the report reads its rules from there; set {_ENV} "
            "to the compat/ directory of a stackmatrix checkout"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ResultsError(f"{path} is not valid TOML: {exc}") from exc
