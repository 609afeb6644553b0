"""The cell's declared CUDA against the CUDA major of the builds its indexes resolved.

A cell that says `cuda = "12.9"` is meant to run CUDA 12 builds, and its indexes are
chosen for that. A resolver can still pick a build for another CUDA major: when a
CUDA-specific channel's newest build is a pre-release and the default index has a final
release built for the next CUDA major, PEP 440 ordering prefers the final release, and
every extension of the wheel installed needs `libcudart.so.13` (vLLM #42338, a cu129
nightly channel against a CUDA 13 release on PyPI). When the CUDA 13 runtime wheel comes
along with it, no library is missing and nothing else in one process disagrees before
torch is loaded, so the mismatch is only visible against what the cell declared.

SM-CUDA-CELL-MISMATCH, one per extension (its subject, so that relevance.py can mark it
latent) and one for torch. Extensions a package loads only for another CUDA major
(loaders.toml [[cuda_variant]]) are left out; optional ones (loaders.toml [[optional]])
cost only their feature (info).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from stackmatrix.check import coverage, libs
from stackmatrix.check.extension import optional
from stackmatrix.check.inventory import Inventory
from stackmatrix.findings import Finding, Severity

CODE = "SM-CUDA-CELL-MISMATCH"


def declared_major(cuda: str | None) -> int | None:
    """12 for "12.9"; None when the cell declares no CUDA (or not a version)."""
    head = (cuda or "").strip().split(".", 1)[0]
    return int(head) if head.isdigit() else None


def cell_cuda_findings(
    extensions: Iterable[Mapping[str, Any]],
    inventory: Inventory,
    cuda: str | None,
    cell: str | None,
) -> list[Finding]:
    """What was installed for another CUDA major than the cell's `cuda`."""
    major = declared_major(cuda)
    if major is None:
        return []
    torch = inventory.get("torch")
    loaded_major = torch.cuda_major if torch is not None and torch.cuda_major else major
    variants = coverage.cuda_variant_rules()
    optional_rules = coverage.optional_rules()
    out: list[Finding] = []
    if torch is not None and torch.cuda_major is not None and torch.cuda_major != major:
        out.append(_torch_finding(torch.version, torch.cuda_major, str(cuda), cell))
    for ext in extensions:
        rel = str(ext.get("relpath", ""))
        if not rel or coverage.unused_cuda_variant(rel, variants, loaded_major):
            continue
        other = _other_major_libs(ext.get("needed", []), major)
        if not other:
            continue
        found = [_ext_finding(ext, inventory, other, str(cuda), cell)]
        feature = coverage.optional_feature(rel, optional_rules)
        out += optional(found, feature) if feature else found
    return out


def _other_major_libs(needed: Iterable[Any], major: int) -> dict[int, list[str]]:
    by_major: dict[int, list[str]] = {}
    for name in needed:
        m = libs.cuda_major_of_soname(str(name))
        if m is not None and m != major:
            by_major.setdefault(m, []).append(str(name))
    return by_major


def _ext_finding(
    ext: Mapping[str, Any],
    inventory: Inventory,
    other: Mapping[int, list[str]],
    cuda: str,
    cell: str | None,
) -> Finding:
    rel = str(ext["relpath"])
    package = ext.get("package")
    dist = inventory.get(str(package)) if package else None
    wheel = f"{dist.name} {dist.version}" if dist is not None else rel
    majors = sorted(other)
    names = [n for m in majors for n in other[m]]
    built_for = " and ".join(f"CUDA {m}" for m in majors)
    return Finding(
        code=CODE,
        severity=Severity.FAIL,
        cell=cell,
        subject=rel,
        message=(
            f"{wheel} is a {built_for} build: {rel} needs {', '.join(names)}, and the cell "
            f"declares CUDA {cuda}. Its indexes resolved a build for another CUDA major (a "
            "final release elsewhere outranks a pre-release of the channel meant); pin the "
            f"CUDA {declared_major(cuda)} build, e.g. with its local label (+cu"
            f"{cuda.replace('.', '')}), or change the cell's cuda"
        ),
        details={
            "cell_cuda": cuda,
            "extension": rel,
            "libraries": names,
            "majors": majors,
            "distribution": dist.name if dist is not None else None,
            "version": dist.version if dist is not None else None,
        },
    )


def _torch_finding(version: str, torch_major: int, cuda: str, cell: str | None) -> Finding:
    return Finding(
        code=CODE,
        severity=Severity.FAIL,
        cell=cell,
        subject="torch",
        message=(
            f"torch {version} is a CUDA {torch_major} build and the cell declares CUDA {cuda}; "
            f"install torch from the index for CUDA {cuda} (uv's torch_backend, or a "
            "+cuXYZ pin) or change the cell's cuda"
        ),
        details={
            "cell_cuda": cuda,
            "distribution": "torch",
            "version": version,
            "majors": [torch_major],
        },
    )
