"""The nvcc an environment's JIT compilers would use, against torch's CUDA.

flashinfer compiles the kernels its cubin package does not ship with nvcc at first
use, as do torch's cpp_extension and sglang's JIT kernels: an nvcc of another CUDA
major than torch's builds code against a runtime that torch does not load, and a
stack without nvcc fails at the first such kernel, on the GPU, long after the build.

nvcc is looked for where those JITs look, in the order they try: `$CUDA_HOME/bin/nvcc`
(then `$CUDA_PATH`), the directories of `$PATH`, `/usr/local/cuda/bin/nvcc`, and NVIDIA's
CUDA wheels in site-packages (`nvidia/cu13/bin`, `nvidia/cuda_nvcc/bin`). For an image,
the variables are the cell's and every path is followed inside the image; a venv's
server runs on this host with this process's environment under the cell's (a venv
server can compile flashinfer's kernels with the host's /usr/local/cuda while the venv's
own files hold no nvcc), so there the variables are both and the paths are the host's. Its
version is read from the binary, which carries the banner that `nvcc --version` prints
("Cuda compilation tools, release 13.0, V13.0.88"), so nothing is executed; a wrapper
script falls back to the toolkit's version.json.

Where flashinfer is installed and `$FLASHINFER_NVCC` is set, flashinfer compiles with
that file and looks nowhere else (flashinfer/jit/cpp_ext.py: its ninja rule's `nvcc`):
it is the nvcc judged, and one that is not there is `SM-NVCC-OVERRIDE-MISSING`.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackmatrix import engine_registry
from stackmatrix.findings import Finding, Severity

__all__ = ["Nvcc", "check", "find_nvcc", "nvcc_findings", "read_version"]

_BANNER = re.compile(rb"Cuda compilation tools, release (\d+\.\d+), V(\d+(?:\.\d+)+)")
_MAX_LINK_HOPS = 40
# distributions whose kernels are JIT-compiled with nvcc at first use
JIT_USERS = engine_registry.jit_packages()
_WHEEL_DIRS = ("nvidia/cu13", "nvidia/cuda_nvcc")
# flashinfer's own override of the nvcc its JIT runs, and the distribution that reads it
OVERRIDE = "FLASHINFER_NVCC"
OVERRIDE_USER = "flashinfer-python"
# the JITs' last resort, for a venv on this host (tests point it elsewhere)
HOST_TOOLKIT = "/usr/local/cuda"


@dataclass(frozen=True, kw_only=True)
class Nvcc:
    path: str  # as the environment sees it
    release: str | None  # "13.0"
    version: str | None  # "13.0.88"
    source: str  # "binary", "version.json" or "unknown"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "release": self.release,
            "version": self.version,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> Nvcc | None:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("path"), str):
            return None
        return cls(
            path=raw["path"],
            release=raw.get("release"),
            version=raw.get("version"),
            source=str(raw.get("source", "unknown")),
        )


def resolve(root: Path, path: str) -> Path | None:
    """`path` of the environment as a host path, every symlink on the way followed
    inside `root` (an image's /usr/local/cuda -> /etc/alternatives/cuda -> ... are
    absolute links, which must not lead to the host's files)."""
    parts = [p for p in path.split("/") if p]
    current = root
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            current = current.parent if current != root else root
            continue
        candidate = current / part
        if candidate.is_symlink():
            hops += 1
            if hops > _MAX_LINK_HOPS:
                return None
            target = str(candidate.readlink())
            parts = [p for p in target.split("/") if p] + parts
            if target.startswith("/"):
                current = root
            continue
        current = candidate
    return current if current.exists() else None


def read_version(binary: Path) -> tuple[str, str] | None:
    """(release, version) from nvcc's own banner in the binary, or None."""
    try:
        with binary.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            m = _BANNER.search(mm)
            # the match's groups read the mapping: decode them before it is closed
            return (m.group(1).decode(), m.group(2).decode()) if m else None
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return None


def _from_version_json(toolkit: Path) -> tuple[str, str] | None:
    try:
        doc = json.loads((toolkit / "version.json").read_text(encoding="utf-8"))
        version = str(doc["cuda_nvcc"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return ".".join(version.split(".")[:2]), version


def _candidates(root: Path, site_packages: Sequence[Path], env: Mapping[str, str]) -> list[str]:
    """Environment paths of nvcc, in the order the JITs try them, each once."""
    host = root == Path("/")
    merged = {**os.environ, **env} if host else env
    out = [merged[v].rstrip("/") + "/bin/nvcc" for v in ("CUDA_HOME", "CUDA_PATH") if merged.get(v)]
    # an image's PATH is not known here (its usual directories are /usr/local/cuda's)
    if host:
        out += [d.rstrip("/") + "/nvcc" for d in merged.get("PATH", "").split(os.pathsep) if d]
    out.append(f"{HOST_TOOLKIT if host else '/usr/local/cuda'}/bin/nvcc")
    for site in site_packages:
        for sub in _WHEEL_DIRS:
            out.append(_env_path(root, site / sub / "bin" / "nvcc"))
    return list(dict.fromkeys(out))


def _env_path(root: Path, host_path: Path) -> str:
    """A host path under the root as the environment sees it."""
    try:
        return "/" + str(host_path.relative_to(root)).lstrip("/")
    except ValueError:
        return str(host_path)


def find_nvcc(
    root: Path, site_packages: Sequence[Path], env: Mapping[str, str]
) -> tuple[Nvcc | None, list[str]]:
    """The first nvcc found (with its version) and every place looked at."""
    looked: list[str] = []
    for path in _candidates(root, site_packages, env):
        looked.append(path)
        found = _at(root, path)
        if found is not None:
            return found, looked
    return None, looked


def override(root: Path, env: Mapping[str, str]) -> str | None:
    """`$FLASHINFER_NVCC` as the environment sees it (for a venv on this host, this
    process's under the cell's, as `_candidates` merges them); None where unset."""
    merged = {**os.environ, **env} if root == Path("/") else env
    return merged.get(OVERRIDE) or None


def _at(root: Path, path: str) -> Nvcc | None:
    """The nvcc at `path` (as the environment sees it), None where no file is there."""
    host = resolve(root, path)
    if host is None or not host.is_file():
        return None
    found, source = read_version(host), "binary"
    if found is None:
        found, source = _from_version_json(host.parent.parent), "version.json"
    if found is None:
        return Nvcc(path=path, release=None, version=None, source="unknown")
    return Nvcc(path=path, release=found[0], version=found[1], source=source)


def _major_minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def nvcc_findings(
    nvcc: Nvcc | None,
    looked: Sequence[str],
    *,
    torch_cuda: str | None,
    jit_users: Iterable[str],
    cell: str | None,
) -> list[Finding]:
    """SM-NVCC-MISSING, SM-NVCC-CUDA-MISMATCH (major), SM-NVCC-CUDA-MINOR; nothing
    for a CPU torch or an nvcc of torch's CUDA release."""
    torch_mm = _major_minor(torch_cuda) if torch_cuda else None
    if torch_mm is None:
        return []
    users = sorted(jit_users)
    if nvcc is None:
        if not users:
            return []
        return [
            Finding(
                code="SM-NVCC-MISSING",
                severity=Severity.WARN,
                cell=cell,
                subject="nvcc",
                message=f"{', '.join(users)} JIT-compile(s) kernels with nvcc at first use, "
                f"and this environment has none (looked at {', '.join(looked)}); kernels "
                f"not shipped prebuilt will fail on the GPU: give it a CUDA {torch_cuda} "
                "toolkit (an nvidia/cuda devel base, or CUDA_HOME pointing at one)",
                details={"looked": list(looked), "torch_cuda": torch_cuda},
            )
        ]
    nvcc_mm = _major_minor(nvcc.release) if nvcc.release else None
    if nvcc_mm is None or nvcc_mm == torch_mm:
        return []
    what = f"nvcc {nvcc.version} (CUDA {nvcc.release}) at {nvcc.path}"
    if nvcc_mm[0] != torch_mm[0]:
        code, severity = "SM-NVCC-CUDA-MISMATCH", Severity.FAIL
        message = (
            f"{what} is of another CUDA major than torch's CUDA {torch_cuda}: kernels "
            "JIT-compiled in this environment are built against a runtime torch does not "
            f"load; use a CUDA {torch_mm[0]}.x toolkit (base image or CUDA_HOME)"
        )
    else:
        code, severity = "SM-NVCC-CUDA-MINOR", Severity.WARN
        message = (
            f"{what} and torch (CUDA {torch_cuda}) differ in the minor version: "
            "JIT-compiled kernels may need a newer driver, or miss an arch the other "
            f"release knows; match the toolkit to CUDA {torch_cuda}"
        )
    details = {**nvcc.to_dict(), "torch_cuda": torch_cuda}
    return [
        Finding(
            code=code,
            severity=severity,
            cell=cell,
            subject=nvcc.path,
            message=message,
            details=details,
        )
    ]


def check(
    root: Path,
    site_packages: Sequence[Path],
    env: Mapping[str, str],
    *,
    torch_cuda: str | None,
    installed: Iterable[str],
    cell: str | None,
) -> tuple[dict[str, Any], list[Finding]]:
    """The `nvcc` entry of the check's data and its findings."""
    names = set(installed)
    users = [u for u in JIT_USERS if u in names]
    named = override(root, env) if OVERRIDE_USER in names else None
    if named is not None:
        return _overridden(root, named, torch_cuda=torch_cuda, users=users, cell=cell)
    nvcc, looked = find_nvcc(root, site_packages, env)
    # a partial toolkit: PyPI's CUDA 12 compiler wheel has ptxas but no nvcc
    ptxas = [p for p in (n.removesuffix("nvcc") + "ptxas" for n in looked) if resolve(root, p)]
    data = {
        "found": nvcc.to_dict() if nvcc else None,
        "looked": looked,
        "ptxas": ptxas,
        "torch_cuda": torch_cuda,
    }
    found = nvcc_findings(nvcc, looked, torch_cuda=torch_cuda, jit_users=users, cell=cell)
    if nvcc is None and ptxas and found:
        f = found[0]
        found = [
            f._replace(
                message=f"{f.message} (only ptxas is there: {', '.join(ptxas)})",
                details={**f.details, "ptxas": ptxas},
            )
        ]
    return data, found


def _overridden(
    root: Path, path: str, *, torch_cuda: str | None, users: Sequence[str], cell: str | None
) -> tuple[dict[str, Any], list[Finding]]:
    """flashinfer's JIT runs `$FLASHINFER_NVCC` and nothing else: judged like any nvcc
    found, and where no file is there, a build that fails at its first kernel."""
    nvcc = _at(root, path)
    data = {
        "found": nvcc.to_dict() if nvcc else None,
        "looked": [path],
        "ptxas": [],
        "torch_cuda": torch_cuda,
        "override": {"variable": OVERRIDE, "path": path},
    }
    if nvcc is not None:
        found = nvcc_findings(nvcc, [path], torch_cuda=torch_cuda, jit_users=users, cell=cell)
        return data, found
    missing = Finding(
        code="SM-NVCC-OVERRIDE-MISSING",
        severity=Severity.WARN,
        cell=cell,
        subject=OVERRIDE,
        message=f"{OVERRIDE} names {path}, and no file is there: flashinfer JIT-compiles "
        "with that nvcc alone, not CUDA_HOME's or PATH's, so every kernel it does not ship "
        f"prebuilt fails at first use, on the GPU; point {OVERRIDE} at "
        f"{f'a CUDA {torch_cuda} nvcc' if torch_cuda else 'an nvcc'}, or unset it",
        details={"path": path, "torch_cuda": torch_cuda},
    )
    return data, [missing]
