"""Resolve DT_NEEDED the way the dynamic loader would, inside an environment's root.

Search order per needed name (ld.so(8)): DT_RPATH of the object when it has no
DT_RUNPATH, LD_LIBRARY_PATH, DT_RUNPATH, then the system directories. Between the
last two sits what a Python process has already loaded: `import torch` loads
torch/lib and preloads the CUDA libraries of the nvidia-* wheels
(site-packages/nvidia/*/lib, nvidia/cu13/lib) before any extension is imported, and
the loader reuses an already-loaded library whose soname matches.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from stackmatrix import _log
from stackmatrix.check._elffile import ELFFile
from stackmatrix.check._elftypes import DynamicInfo, ELFError
from stackmatrix.findings import Finding, Severity

log = _log.Logger(__name__)

_MULTIARCH = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}
_MAX_LINK_HOPS = 40
# sonames whose major number is the CUDA major they belong to (cufft, cusparse...
# number theirs independently, so they are left out)
_CUDA_SONAME = re.compile(r"^lib(?:cudart|cublas|cublasLt|nvrtc|nvJitLink|cupti)\.so\.(\d+)$")
DRIVER_LIBS = frozenset({"libcuda.so.1", "libnvidia-ml.so.1"})
# libraries that wheels of the stack provide (torch, nvidia-*, their vendored copies);
# what else a needed closure lacks is another wheel's or the system's (missinglibs.py)
_STACK_LIB = re.compile(
    r"^lib(?:c10|torch|shm|cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse|cudnn|nccl|"
    r"nvrtc|nvJitLink|cupti|nvToolsExt|cufile|nvshmem|cusparseLt|mscclpp)"
)


def is_stack_lib(soname: str) -> bool:
    """A library that the wheels of the CUDA/torch stack provide."""
    return _STACK_LIB.match(soname) is not None


def cuda_major_of_soname(soname: str) -> int | None:
    m = _CUDA_SONAME.match(soname)
    return int(m.group(1)) if m else None


class SearchContext(NamedTuple):
    root: Path
    process_dirs: tuple[Path, ...] = ()  # libraries a Python process has loaded already
    system_dirs: tuple[Path, ...] = ()
    ld_library_path: tuple[Path, ...] = ()


class Closure(NamedTuple):
    """The needed closure of one object."""

    resolved: dict[str, Path]  # soname -> host path
    missing: dict[str, Path]  # soname -> first object needing it
    # missing soname -> the RPATH/RUNPATH directories (host paths) its first needer
    # named for it: where a wheel expected its own library
    looked_in: Mapping[str, tuple[Path, ...]] = {}


def in_root(root: Path, path: str | Path) -> Path:
    """A path of the environment's filesystem as a host path."""
    text = str(path)
    return Path(text) if root == Path("/") else root / text.lstrip("/")


def resolve_in_root(root: Path, path: Path) -> Path | None:
    """Follow symlinks as the environment would see them; None if it doesn't exist."""
    if root == Path("/"):
        return path if path.exists() else None
    current = path
    for _ in range(_MAX_LINK_HOPS):
        if current.is_symlink():
            target = str(current.readlink())
            current = in_root(root, target) if target.startswith("/") else current.parent / target
            continue
        return current if current.exists() else None
    return None


def system_dirs(root: Path) -> tuple[Path, ...]:
    """ld.so.conf directories of `root`, then the default and multiarch paths."""
    dirs: list[Path] = []
    _read_ld_conf(root, in_root(root, "/etc/ld.so.conf"), dirs, depth=0)
    # platform.machine() is os.uname().machine; the platform module slows `inspect`'s start
    triple = _MULTIARCH.get(os.uname().machine, "")
    defaults = [f"/lib/{triple}", f"/usr/lib/{triple}"] if triple else []
    defaults += ["/lib64", "/usr/lib64", "/lib", "/usr/lib"]
    dirs.extend(in_root(root, d) for d in defaults)
    return tuple(dict.fromkeys(d for d in dirs if d.is_dir()))


def _read_ld_conf(root: Path, conf: Path, out: list[Path], depth: int) -> None:
    if depth > 8 or not conf.is_file():
        return
    for raw in conf.read_text(errors="replace").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include "):
            pattern = line.split(None, 1)[1]
            base = in_root(root, pattern) if pattern.startswith("/") else conf.parent / pattern
            inc = sorted(base.parent.glob(base.name))
            for sub in inc:
                _read_ld_conf(root, Path(sub), out, depth + 1)
        elif line.startswith("/"):
            out.append(in_root(root, line))


def process_dirs(site_packages: Sequence[Path]) -> tuple[Path, ...]:
    """Directories whose libraries `import torch` has loaded before any extension."""
    dirs: list[Path] = []
    for sp in site_packages:
        if (sp / "torch" / "lib").is_dir():
            dirs.append(sp / "torch" / "lib")
        nvidia = sp / "nvidia"
        if nvidia.is_dir():
            dirs.extend(sorted(p for p in nvidia.glob("*/lib") if p.is_dir()))
    return tuple(dirs)


def search_context(
    root: Path, site_packages: Sequence[Path], env: Mapping[str, str] | None = None
) -> SearchContext:
    llp = (env or {}).get("LD_LIBRARY_PATH", "")
    return SearchContext(
        root=root,
        process_dirs=process_dirs(site_packages),
        system_dirs=system_dirs(root),
        ld_library_path=tuple(in_root(root, p) for p in llp.split(":") if p),
    )


class LibInfo(NamedTuple):
    path: Path
    machine: int
    is64: bool
    dynamic: DynamicInfo


class LibraryIndex:
    """Caches what was read of each library so a closure is walked once per process."""

    def __init__(self) -> None:
        self._info: dict[Path, LibInfo | None] = {}
        self._defined: dict[Path, frozenset[str]] = {}
        self._verdefs: dict[Path, tuple[str, ...]] = {}

    def info(self, path: Path) -> LibInfo | None:
        if path not in self._info:
            self._info[path] = self._read(path)
        return self._info[path]

    @staticmethod
    def _read(path: Path) -> LibInfo | None:
        try:
            with ELFFile(path) as elf:
                return LibInfo(
                    path=path, machine=elf.e_machine, is64=elf.is64, dynamic=elf.dynamic()
                )
        except (OSError, ELFError) as exc:
            log.debug("skipping %s: %s", path, exc)
            return None

    def defined(self, path: Path) -> frozenset[str]:
        if path not in self._defined:
            try:
                with ELFFile(path) as elf:
                    self._defined[path] = frozenset(elf.defined_symbol_names())
            except (OSError, ELFError):
                self._defined[path] = frozenset()
        return self._defined[path]

    def version_defs(self, path: Path) -> tuple[str, ...]:
        if path not in self._verdefs:
            try:
                with ELFFile(path) as elf:
                    self._verdefs[path] = elf.version_defs()
            except (OSError, ELFError):
                self._verdefs[path] = ()
        return self._verdefs[path]


def _expand_origin(entry: str, origin: Path) -> str:
    return entry.replace("${ORIGIN}", str(origin)).replace("$ORIGIN", str(origin))


def _elf_dirs(entries: Sequence[str], origin: Path, ctx: SearchContext) -> list[Path]:
    """RPATH/RUNPATH entries as host paths: they are paths of the environment, except
    those made from $ORIGIN, which are host paths already."""
    return [
        Path(_expand_origin(p, origin))
        if "ORIGIN}" in p or "$ORIGIN" in p
        else in_root(ctx.root, p)
        for p in entries
    ]


def _candidate_dirs(
    obj: LibInfo, ctx: SearchContext, inherited_rpath: Sequence[Path]
) -> list[Path]:
    """Host paths, in the loader's order; the context's directories are host paths
    already (search_context mapped them into the root)."""
    origin = obj.path.parent
    dyn = obj.dynamic
    dirs: list[Path] = []
    if not dyn.runpath:
        dirs += _elf_dirs(dyn.rpath, origin, ctx)
        dirs += list(inherited_rpath)
    dirs += list(ctx.ld_library_path)
    dirs += _elf_dirs(dyn.runpath, origin, ctx)
    dirs += list(ctx.process_dirs)
    dirs += list(ctx.system_dirs)
    return dirs


def _fix_root(path: Path, ctx: SearchContext, origin: Path) -> Path:
    """RPATH entries are paths of the environment, except those made from $ORIGIN."""
    if ctx.root == Path("/") or str(path).startswith(str(origin)):
        return path
    return in_root(ctx.root, path)


def resolve_one(
    name: str,
    obj: LibInfo,
    ctx: SearchContext,
    index: LibraryIndex,
    inherited_rpath: Sequence[Path] = (),
) -> Path | None:
    """Where `obj`'s DT_NEEDED `name` would be found, or None."""
    if "/" in name:
        direct = resolve_in_root(ctx.root, _fix_root(Path(name), ctx, obj.path.parent))
        return direct
    for d in _candidate_dirs(obj, ctx, inherited_rpath):
        found = resolve_in_root(ctx.root, d / name)
        if found is None:
            continue
        info = index.info(found)
        # the loader skips files of another class or machine and keeps searching
        if info is not None and info.machine == obj.machine and info.is64 == obj.is64:
            return found
    return None


def needed_closure(path: Path, ctx: SearchContext, index: LibraryIndex) -> Closure:
    """Resolve `path`'s DT_NEEDED libraries and theirs, breadth first."""
    root_info = index.info(path)
    if root_info is None:
        return Closure(resolved={}, missing={})
    resolved: dict[str, Path] = {}
    missing: dict[str, Path] = {}
    looked_in: dict[str, tuple[Path, ...]] = {}
    queue: list[tuple[LibInfo, tuple[Path, ...]]] = [(root_info, ())]
    while queue:
        obj, inherited = queue.pop(0)
        # DT_RPATH (not RUNPATH) of a loading object also applies to what it loads
        own = (
            () if obj.dynamic.runpath else tuple(_elf_dirs(obj.dynamic.rpath, obj.path.parent, ctx))
        )
        for name in obj.dynamic.needed:
            if name in resolved or name in missing:
                continue
            found = resolve_one(name, obj, ctx, index, inherited)
            if found is None:
                missing[name] = obj.path
                looked_in[name] = _elf_search_dirs(obj, ctx, inherited)
                continue
            resolved[name] = found
            info = index.info(found)
            if info is not None:
                queue.append((info, inherited + own))
    return Closure(resolved=resolved, missing=missing, looked_in=looked_in)


def _elf_search_dirs(
    obj: LibInfo, ctx: SearchContext, inherited: Sequence[Path]
) -> tuple[Path, ...]:
    dyn, origin = obj.dynamic, obj.path.parent
    rpath = () if dyn.runpath else (*_elf_dirs(dyn.rpath, origin, ctx), *inherited)
    return (*rpath, *_elf_dirs(dyn.runpath, origin, ctx))


# --- findings -------------------------------------------------------------------------


def cuda_mixed_findings(by_major: Mapping[int, list[str]], cell: str | None) -> list[Finding]:
    """SM-CUDA-MIXED when what one process loads (torch, then each extension, by
    CUDA major) spans more than one CUDA major."""
    majors = sorted(by_major)
    if len(majors) < 2:
        return []
    parts = "; ".join(f"CUDA {m}: {', '.join(v[:4])}" for m, v in sorted(by_major.items()))
    return [
        Finding(
            code="SM-CUDA-MIXED",
            severity=Severity.FAIL,
            cell=cell,
            subject="cuda",
            message=f"one process would load {len(majors)} CUDA majors ({parts}); pick builds of "
            "every package for one CUDA major",
            details={"majors": {str(k): v for k, v in by_major.items()}},
        )
    ]
