"""The nvcc the JITs compile with, against the cell's target archs.

nvcc.py finds the nvcc a JIT uses (CUDA_HOME, then PATH, before torch's CUDA) and judges
it against torch's CUDA; a stack can pass that and still fail on the GPU, because the
JIT compiles for the GPU it runs on and an older nvcc cannot target it: flashinfer
refuses SM 12.x with an nvcc older than 12.9 ("SM 12.x requires CUDA >= 12.9", then
"FlashInfer requires GPUs with sm75 or higher" at the first kernel: vllm#50705), and
no nvcc targets an arch newer than itself. compat/nvcc_arch.toml holds the oldest nvcc
per arch and the JITs' own gates (SM-NVCC-ARCH-TOO-OLD).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from stackmatrix.check import data as _data
from stackmatrix.check.coverage import Target, parse_target
from stackmatrix.check.nvcc import JIT_USERS, Nvcc
from stackmatrix.findings import Finding, Severity

__all__ = ["ArchMinimum", "JitGate", "Need", "arch_findings", "need_of", "rules"]


class ArchMinimum(NamedTuple):
    """The oldest nvcc that compiles for `target`'s compute capability."""

    target: Target
    minimum: str
    source: str


class JitGate(NamedTuple):
    """A JIT package that refuses the archs of one major below an nvcc release."""

    package: str
    major: int
    minimum: str
    message: str
    then: str
    versions: str | None
    source: str

    def applies(self, target: Target, installed: Mapping[str, str]) -> bool:
        version = installed.get(self.package)
        if version is None or target.major != self.major:
            return False
        if not self.versions:
            return True
        try:
            return Version(version) in SpecifierSet(self.versions)
        except (InvalidVersion, InvalidSpecifier):
            return True  # an unreadable version: judged, as without a limit


class Need(NamedTuple):
    """What a target needs of nvcc, and why: the arch itself or a JIT's gate."""

    minimum: str
    source: str
    gate: JitGate | None


def rules(raw: Mapping[str, Any] | None = None) -> tuple[list[ArchMinimum], list[JitGate]]:
    data = raw if raw is not None else _data.load("nvcc_arch.toml")
    archs = [_arch(a) for a in data.get("arch", [])]
    gates = [_gate(g) for g in data.get("jit_gate", [])]
    return archs, gates


def _arch(raw: Mapping[str, Any]) -> ArchMinimum:
    return ArchMinimum(
        target=parse_target(str(raw["target"])),
        minimum=str(raw["minimum"]),
        source=str(raw.get("source", "")),
    )


def _gate(raw: Mapping[str, Any]) -> JitGate:
    versions = raw.get("versions")
    return JitGate(
        package=str(raw["package"]),
        major=int(raw["major"]),
        minimum=str(raw["minimum"]),
        message=str(raw.get("message", "")),
        then=str(raw.get("then", "")),
        versions=str(versions) if versions else None,
        source=str(raw.get("source", "")),
    )


def _release(text: str) -> tuple[int, int] | None:
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def need_of(
    target: Target,
    installed: Mapping[str, str],
    archs: Sequence[ArchMinimum],
    gates: Sequence[JitGate],
) -> Need | None:
    """The highest nvcc release that `target` needs, None when no rule names it."""
    needs = [Need(a.minimum, a.source, None) for a in archs if a.target.sm == target.sm]
    needs += [Need(g.minimum, g.source, g) for g in gates if g.applies(target, installed)]
    known = [(r, n) for n in needs if (r := _release(n.minimum)) is not None]
    if not known:
        return None
    # on a tie, a JIT's gate explains more than the arch alone (its words are what fails)
    return max(known, key=lambda rn: (rn[0], rn[1].gate is not None))[1]


def arch_findings(
    found: Nvcc | None,
    targets: Sequence[str],
    installed: Mapping[str, str],
    cell: str | None,
    table: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], list[Finding]]:
    """`data["nvcc"]["targets"]` (each target's minimum) and SM-NVCC-ARCH-TOO-OLD for
    each target the found nvcc is too old for, where a JIT user is installed."""
    archs, gates = rules(table)
    needs: dict[str, Need] = {}
    for text in targets:
        try:
            target = parse_target(text)
        except ValueError:
            continue  # the spec's validation says so; nothing to judge here
        need = need_of(target, installed, archs, gates)
        if need is not None:
            needs[target.name] = need
    data = {t: {"minimum": n.minimum, "source": n.source} for t, n in needs.items()}
    users = [u for u in JIT_USERS if u in installed]
    have = _release(found.release) if found is not None and found.release else None
    if found is None or have is None or not users:
        return data, []
    out = []
    for name, need in needs.items():
        minimum = _release(need.minimum)
        if minimum is not None and have < minimum:
            out.append(_finding(found, name, need, users, cell))
    return data, out


def _finding(
    found: Nvcc, target: str, need: Need, users: Sequence[str], cell: str | None
) -> Finding:
    what = f"nvcc {found.version} (CUDA {found.release}) at {found.path}"
    if need.gate is not None:
        said = f'"{need.gate.message}"' + (f', then "{need.gate.then}"' if need.gate.then else "")
        why = f"{need.gate.package} refuses {target} below CUDA {need.minimum}: it says {said}"
        public = need.gate.message
    else:
        why = f"nvcc first targets {target} in CUDA {need.minimum}"
        public = None
    message = (
        f"{what}, the one {', '.join(users)} JIT-compile(s) with (CUDA_HOME, then PATH, "
        f"before torch's CUDA), is older than target {target} needs: {why}; kernels not "
        f"shipped prebuilt fail at first use on that GPU. Point CUDA_HOME (or PATH) at a "
        f"CUDA >= {need.minimum} toolkit"
    )
    details = {
        **found.to_dict(),
        "target": target,
        "minimum": need.minimum,
        "source": need.source,
        "public_message": public,
        "jit_users": list(users),
    }
    return Finding(
        code="SM-NVCC-ARCH-TOO-OLD",
        severity=Severity.FAIL,
        cell=cell,
        subject=found.path,
        message=message,
        details=details,
    )
