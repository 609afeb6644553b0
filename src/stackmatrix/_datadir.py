"""Where the compatibility knowledge kept as data lives: one rule for the check phase
(check/data.py) and the report (report/compat_data.py), which import it from here
(report/ does not import compat/)."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "STACKMATRIX_COMPAT_DIR"


def compat_dir() -> Path:
    """$STACKMATRIX_COMPAT_DIR as given, else compat/ of this source checkout (when it
    holds the data), else the copy an installed wheel carries (stackmatrix/_compat_data).
    Whoever reads a file from it says which one is missing."""
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    here = Path(__file__).resolve()
    checkout = here.parents[2] / "compat"
    return checkout if (checkout / "loaders.toml").is_file() else here.parent / "_compat_data"
