"""FlashInfer's JIT cache: modules compiled by another CUDA major than the cell's.

FlashInfer compiles a kernel module at first use and keeps it under
`$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/[<version>/]<archs>/cached_ops/<name>/`.
The directory names the flashinfer version (in newer releases) and the GPU archs, not
the CUDA that compiled it, so a module that one toolkit built is loaded as it is by a
process of another CUDA major: a sampler compiled by a host's CUDA 13 nvcc, linked
against libcudart.so.13, then failed in CUDA 12.9 workers with
cudaErrorInsufficientDriver (flashinfer #5145). The check reads each cached module's
DT_NEEDED, as the loader will, and compares its CUDA major with the cell's.

Which cache a cell's server uses is decided as at launch (builder/jitcache.py): the
cell's FLASHINFER_WORKSPACE_BASE, else this process's, else a venv's own `jit-cache`,
else the home directory (a `current` cell's). A docker cell keeps its cache in a volume
the exported root does not show: only a cache its env points into the image is read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from stackmatrix.builder import jitcache
from stackmatrix.builder.backends import get_backend
from stackmatrix.built_environment import Environment
from stackmatrix.check import libs
from stackmatrix.check._elffile import ELFFile
from stackmatrix.check._elftypes import ELFError
from stackmatrix.check.cudamajor import declared_major
from stackmatrix.check.inventory import Distribution, Inventory
from stackmatrix.findings import Finding, Severity

CODE = "SM-JIT-CACHE-CUDA"
SHOWN = 20
_MAX_FILES = 20000  # a cache is hundreds of modules; a runaway tree is not read to its end
# flashinfer/jit/env.py `_get_workspace_dir_name`: `FLASHINFER_CACHE_DIR / flashinfer_version
# / arch` in newer releases, `FLASHINFER_CACHE_DIR / arch` (or `... / "flashinfer" / arch`)
# in older ones
_VERSIONED = re.compile(r"/\s*\w*version\w*\s*/\s*arch\b")
_UNVERSIONED = re.compile(r"(?:FLASHINFER_CACHE_DIR|[\"']flashinfer[\"'])\s*/\s*arch\b")


def cache_dir(environment: Environment) -> Path | None:
    """The `.cache/flashinfer` directory the cell's server would use, as a host path."""
    var = jitcache.FLASHINFER
    if environment.root != Path("/"):
        chosen = environment.env.get(var)
        return libs.in_root(environment.root, chosen) / ".cache/flashinfer" if chosen else None
    # the cache the backend gives its server (a venv's own; `current` runs as is)
    own = _server_env(environment)
    base = environment.env.get(var) or os.environ.get(var) or own.get(var) or str(Path.home())
    return Path(base) / ".cache" / "flashinfer"


def _server_env(environment: Environment) -> dict[str, str]:
    try:
        backend = get_backend(environment.backend)
    except ValueError:  # an environment no backend built (`stackmatrix inspect`)
        return {}
    return backend.server_env(environment)


def _public(version: str) -> str:
    try:
        return Version(version).public
    except InvalidVersion:
        return version


def versioned_layout(flashinfer: Distribution) -> bool | None:
    """Whether this flashinfer keys its cache by its version (`<version>/<archs>/`, newer
    releases) or not (`<archs>/`, older ones), read from its jit/env.py; None when that
    file says neither."""
    env_py = flashinfer.site_packages / "flashinfer" / "jit" / "env.py"
    try:
        text = env_py.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if _VERSIONED.search(text):
        return True
    return False if _UNVERSIONED.search(text) else None


def _modules(cache: Path, flashinfer: Distribution) -> Iterator[Path]:
    """The compiled modules under `cache` that this flashinfer would load: those of its
    own version's directory, or of the unversioned ones for a release that keys its cache
    by the GPU archs alone (both when its layout is unknown, another version's never)."""
    if not cache.is_dir():
        return
    mine = _public(flashinfer.version)
    versioned = versioned_layout(flashinfer)
    for count, path in enumerate(sorted(cache.rglob("*.so"))):
        if count >= _MAX_FILES:
            return
        parts = path.relative_to(cache).parts
        if "cached_ops" not in parts or not path.is_file() or path.is_symlink():
            continue
        head = parts[0]
        is_version = head[:1].isdigit() and "." in head  # "0.6.4", never "80_90a_100a"
        if is_version and _public(head) != mine:
            continue
        if versioned is not None and is_version != versioned:
            continue
        yield path


def _cuda_sonames(path: Path) -> dict[int, list[str]]:
    try:
        with ELFFile(path) as elf:
            needed = elf.dynamic().needed
    except (OSError, ELFError):
        return {}
    out: dict[int, list[str]] = {}
    for name in needed:
        m = libs.cuda_major_of_soname(name)
        if m is not None:
            out.setdefault(m, []).append(name)
    return out


def jit_cache_findings(
    environment: Environment, inventory: Inventory, cuda: str | None, cell: str | None
) -> tuple[dict[str, Any], list[Finding]]:
    """(what was read, SM-JIT-CACHE-CUDA when cached modules need another CUDA major)."""
    flashinfer = inventory.get("flashinfer-python")
    torch = inventory.get("torch")
    major = declared_major(cuda) or (torch.cuda_major if torch is not None else None)
    cache = cache_dir(environment)
    data: dict[str, Any] = {"cache": str(cache) if cache else None, "modules": 0}
    if flashinfer is None or major is None or cache is None:
        return data, []
    other: dict[str, list[str]] = {}
    count = 0
    for path in _modules(cache, flashinfer):
        count += 1
        by_major = _cuda_sonames(path)
        names = [n for m, v in sorted(by_major.items()) if m != major for n in v]
        if names:
            other[path.relative_to(cache).as_posix()] = names
    data["modules"] = count
    data["other_cuda"] = sorted(other)
    if not other:
        return data, []
    return data, [_finding(cache, other, major, cuda, cell)]


def _finding(
    cache: Path, other: dict[str, list[str]], major: int, cuda: str | None, cell: str | None
) -> Finding:
    first = sorted(other)[0]
    where = f"CUDA {cuda}" if cuda else f"CUDA {major} (torch's)"
    return Finding(
        code=CODE,
        severity=Severity.FAIL,
        cell=cell,
        subject=str(cache),
        message=(
            f"FlashInfer's JIT cache {cache} holds {len(other)} compiled module(s) of another "
            f"CUDA major (e.g. {first} needs {', '.join(other[first])}) and this cell is "
            f"{where}: flashinfer reuses a cached module whatever CUDA built it, and its "
            "kernels fail at run time (flashinfer #5145). Delete those modules, or give the "
            "cell a cache of its own (FLASHINFER_WORKSPACE_BASE in its env)"
        ),
        details={
            "cache": str(cache),
            "expected_major": major,
            "modules": {k: other[k] for k in sorted(other)[:SHOWN]},
            "count": len(other),
        },
    )
