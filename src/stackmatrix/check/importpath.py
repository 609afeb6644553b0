"""What the server will import: the cell interpreter's real sys.path, not one site-packages.

A cell's packages can reach its interpreter in several ways besides its own
site-packages: PYTHONPATH in the cell's env, `.pth` files, a venv layered on the
image with --system-site-packages, the user site. The check judges the directories
that interpreter really searches, in its order, so a package shadowed by an earlier
directory is not the one judged.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from stackmatrix import _proc
from stackmatrix.built_environment import Environment

log = logging.getLogger(__name__)

_SCRIPT = (
    "import json, sys, sysconfig\n"
    "p = sysconfig.get_paths()\n"
    "print(json.dumps({'path': sys.path, 'stdlib': [p['stdlib'], p['platstdlib']]}))\n"
)
_SITE_NAMES = ("site-packages", "dist-packages")


def import_path(environment: Environment) -> tuple[Path, ...]:
    """The directories the environment's interpreter imports from, site dirs last resort.

    Only for environments whose files are this host's (root "/"); an image's paths are
    read from its exported root by the docker backend, which lists them itself.
    """
    declared = tuple(environment.site_packages)
    if environment.root != Path("/"):
        return declared
    interpreter = environment.python[0] if environment.python else ""
    if not interpreter or (Path(interpreter).is_absolute() and not Path(interpreter).is_file()):
        return declared  # a directory inspected without its interpreter (a copied venv)
    try:
        result = _proc.run(
            [*environment.python, "-c", _SCRIPT],
            timeout=60.0,
            env={**os.environ, **environment.env},
        )
    except OSError as exc:
        log.warning("could not run %s to read its sys.path: %s", interpreter, exc)
        return declared
    if not result.ok:
        log.warning("could not read the interpreter's sys.path: %s", result.tail(3))
        return declared
    try:
        raw = json.loads(result.output.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return declared
    found = select(raw.get("path") or [], raw.get("stdlib") or [])
    return tuple(dict.fromkeys([*found, *declared]))


def select(entries: Sequence[str], stdlib: Sequence[str]) -> list[Path]:
    """sys.path entries worth scanning: existing directories outside the standard library."""
    std = [Path(s) for s in stdlib if s]
    out: list[Path] = []
    for entry in entries:
        if not entry or not Path(entry).is_absolute():
            continue  # the working directory of `-c`
        path = Path(entry)
        if not path.is_dir():
            continue  # zip archives, missing entries
        if path.name not in _SITE_NAMES and any(path.is_relative_to(s) for s in std):
            continue  # the standard library and lib-dynload
        out.append(path)
    return list(dict.fromkeys(out))
