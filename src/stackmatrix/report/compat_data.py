"""Where the compatibility knowledge kept as data lives (the repository's compat/)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from stackmatrix.errors import ResultsError

_ENV = "STACKMATRIX_COMPAT_DIR"


def compat_dir() -> Path:
    """$STACKMATRIX_COMPAT_DIR, else compat/ of this source checkout, else the copy
    that an installed wheel carries (stackmatrix/_compat_data)."""
    override = os.environ.get(_ENV)
    if override:
        return Path(override)
    here = Path(__file__).resolve()
    checkout = here.parents[3] / "compat"
    return checkout if checkout.is_dir() else here.parents[1] / "_compat_data"


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
