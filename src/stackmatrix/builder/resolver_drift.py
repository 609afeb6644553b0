"""Resolver drift: what the resolver did that the spec did not ask for."""

from __future__ import annotations

import re
from collections.abc import Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stackmatrix.builder.base import LockEntry
from stackmatrix.findings import Finding, Severity
from stackmatrix.spec_model import Cell

# Packages whose silent arrival changes the stack (ABI, CUDA major, kernels).
HEAVY = re.compile(
    r"^(torch|torchvision|torchaudio|triton|xformers|flashinfer.*|sgl-kernel|sglang-kernel|"
    r"vllm|deep-gemm|nvidia-.*|cuda-.*|cupy-.*|tensorrt.*|jax|jaxlib)$"
)


def detect_drift(
    cell: Cell, lock: Sequence[LockEntry], *, preinstalled: bool = False
) -> list[Finding]:
    """What the environment holds that the pins did not ask for.

    `preinstalled`: nothing was resolved (the `current` backend): the pins are checked
    against what is there, and the unpinned heavy packages are one info finding that
    names them, not one warning each about a resolver that never ran.
    """
    by_name = {e.name: e for e in lock}
    findings: list[Finding] = []
    asked: set[str] = set()
    for pin in cell.pins:
        req = Requirement(pin)
        name = canonicalize_name(req.name)
        asked.add(name)
        entry = by_name.get(name)
        if entry is None:
            findings.append(_missing(cell, pin, name))
            continue
        findings.extend(_version_drift(cell, req, pin, entry, preinstalled))
    if preinstalled:
        findings.extend(_preinstalled_unpinned(cell, lock, asked))
    else:
        findings.extend(_heavy_unpinned(cell, lock, asked))
    return findings


def _missing(cell: Cell, pin: str, name: str) -> Finding:
    return Finding(
        code="SM-DRIFT-MISSING",
        severity=Severity.FAIL,
        cell=cell.id,
        subject=name,
        message=f"{pin!r} was asked for but {name} is not installed in the environment; "
        "check the build log for a failed or skipped install",
    )


def _version_drift(
    cell: Cell, req: Requirement, pin: str, entry: LockEntry, preinstalled: bool
) -> list[Finding]:
    try:
        got = Version(entry.version)
    except InvalidVersion:
        return []
    exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
    if not exact:
        if req.specifier:
            return [_info_range(cell, pin, entry)]
        return []
    want = exact[0].split("+", 1)
    want_local = want[1] if len(want) > 1 else None
    if want_local is None and got.local is not None:
        return [
            Finding(
                code="SM-DRIFT-LOCAL-TAG",
                severity=Severity.WARN,
                cell=cell.id,
                subject=entry.name,
                message=f"asked for {pin!r}, {_who(preinstalled)} {entry.name} "
                f"{entry.version} (local tag +{got.local}) from {entry.source}; pin "
                f"'{entry.name}=={entry.version}' or fix the index order if that is "
                "not the build you meant",
                details={"asked": pin, "resolved": entry.version, "source": entry.source},
            )
        ]
    return []


def _info_range(cell: Cell, pin: str, entry: LockEntry) -> Finding:
    return Finding(
        code="SM-DRIFT-RANGE",
        severity=Severity.INFO,
        cell=cell.id,
        subject=entry.name,
        message=f"{pin!r} is a range; the resolver chose {entry.name} {entry.version}. "
        "Pin it exactly to make the cell reproducible",
        details={"asked": pin, "resolved": entry.version},
    )


def _who(preinstalled: bool) -> str:
    return "the environment has" if preinstalled else "the resolver installed"


def _preinstalled_unpinned(cell: Cell, lock: Sequence[LockEntry], asked: set[str]) -> list[Finding]:
    heavy = {e.name: e.version for e in lock if e.name not in asked and HEAVY.match(e.name)}
    if not heavy:
        return []
    named = ", ".join(f"{n} {v}" for n, v in list(heavy.items())[:6])
    more = f" and {len(heavy) - 6} more" if len(heavy) > 6 else ""
    return [
        Finding(
            code="SM-DRIFT-UNPINNED-PREINSTALLED",
            severity=Severity.INFO,
            cell=cell.id,
            subject="environment",
            message=f"this preinstalled environment has {len(heavy)} package(s) that define "
            f"the stack's ABI or CUDA build and that no pin names ({named}{more}); their "
            "versions are in the lock; pin them in the cell to have them checked",
            details={"unpinned": heavy},
        )
    ]


def _heavy_unpinned(cell: Cell, lock: Sequence[LockEntry], asked: set[str]) -> list[Finding]:
    out = []
    for entry in lock:
        if entry.name in asked or not HEAVY.match(entry.name):
            continue
        out.append(
            Finding(
                code="SM-DRIFT-UNPINNED-HEAVY",
                severity=Severity.WARN,
                cell=cell.id,
                subject=entry.name,
                message=f"the resolver added {entry.name} {entry.version} (from "
                f"{entry.source}) although no pin names it; it defines the stack's ABI or "
                f"CUDA build, so pin it (e.g. '{entry.name}=={entry.version}')",
                details={"resolved": entry.version, "source": entry.source},
            )
        )
    return out
