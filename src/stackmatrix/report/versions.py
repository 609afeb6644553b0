"""The versions a cell ran: for each package, the one its server's interpreter imports.

A venv layered on a base interpreter (spec `inherit`) puts its own site-packages before
the base's (builder/venv.py `_inherit` writes a .pth, and the directories a .pth adds come
after the venv's own), so one name can be installed twice. Python imports the first on
sys.path. The check's inventory keeps that one (check/inventory.py reads the
interpreter's real sys.path in order, first wins); the build's lock keeps whichever
`importlib.metadata.distributions()` yielded last (builder/lock.py), the shadowed copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stackmatrix.records.decode import objs
from stackmatrix.report.load import CellResults

# Distributions whose import name is not their name with "-" as "_"
# (check/_probe_script.py reports imports by module).
_IMPORT_NAMES = {
    "sgl-kernel": "sgl_kernel",
    "sglang-kernel": "sgl_kernel",
    "flashinfer-python": "flashinfer",
}


def cell_versions(cell: CellResults, packages: Sequence[str]) -> dict[str, str]:
    """Python, each of `packages` the cell has, the probe's CUDA libraries, the engine."""
    build, bench, probe = cell.build, cell.bench, cell.check.probe or {}
    out: dict[str, str] = {}
    if build.python_version:
        out["python"] = build.python_version
    locked = _first_by_name(build.lock or ())
    imported = _first_by_name(objs(cell.check.extra.get("inventory")))
    for name in packages:
        shown = _shown(imported.get(name), _probe_version(probe, name), locked.get(name))
        if shown is not None:
            out[name] = shown
    out |= {k: str(probe[k]) for k in ("cuda", "cudnn", "nccl") if probe.get(k)}
    if bench.engine_version:
        out["engine"] = f"{bench.engine or ''} {bench.engine_version}".strip()
    return out


def _first_by_name(entries: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """name -> version of the first entry of each name: the one sys.path order imports."""
    out: dict[str, str] = {}
    for entry in entries:
        if entry.get("name") and entry.get("version"):
            out.setdefault(canonicalize_name(str(entry["name"])), str(entry["version"]))
    return out


def _probe_version(probe: Mapping[str, Any], name: str) -> str | None:
    """The `__version__` of the module the probe imported in the cell's interpreter."""
    module = _IMPORT_NAMES.get(name, name.replace("-", "_"))
    found = probe.get("torch") if module == "torch" else (probe.get("imports") or {}).get(module)
    version = found.get("version") if isinstance(found, dict) else None
    return str(version) if version else None


def _shown(imported: str | None, probed: str | None, locked: str | None) -> str | None:
    """The imported version, and the lock's where the import shadows it.

    Only a package the lock or the inventory names is shown: the probe's module
    sgl_kernel is the import of two distribution names."""
    if imported is None and locked is None:
        return None
    runs = imported or probed or locked
    if runs is None or locked is None or _same(runs, locked):
        return runs
    return f"{runs} (shadows {locked})"


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b
