"""torch's own GPU code against the targets: the fatbin of `torch/lib/libtorch_cuda*.so`.

The extension scan leaves `torch/lib/` out (libraries, not extension modules), so a
target that torch itself was not compiled for went unseen: a cu130 torch carries no
sm_70 code, and on a V100 every torch kernel fails at run time with "no kernel image is
available for execution on the device" (unsloth#5876). `torch.cuda.get_arch_list()`
says nothing without a GPU; the fatbin says it everywhere, judged by the same rules as
any extension (coverage.py: same major, 'a' and 'f' variants, PTX forward).

SM-TORCH-ARCH-NONE (fail) for a target no file of torch's covers; SM-TORCH-ARCH-PTX-ONLY
(warn) where only PTX does (the driver JIT-compiles every kernel at first use).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from stackmatrix.check import coverage
from stackmatrix.check._elffile import ELFFile
from stackmatrix.check._elftypes import ELFError
from stackmatrix.check.fatbin import FatbinEntry, FatbinError, elf_fatbin_entries
from stackmatrix.check.inventory import Inventory
from stackmatrix.findings import Finding, Severity

log = logging.getLogger(__name__)

_GLOB = "torch/lib/libtorch_cuda*.so"


def torch_gpu_files(inventory: Inventory) -> list[tuple[str, Path]]:
    """(relpath, path) of torch's CUDA libraries; none for a CPU build or no torch."""
    torch = inventory.get("torch")
    if torch is None:
        return []
    sp = torch.site_packages
    return [(p.relative_to(sp).as_posix(), p) for p in sorted(sp.glob(_GLOB)) if p.is_file()]


def torch_arch_check(
    inventory: Inventory, targets: Sequence[str], cell: str | None
) -> tuple[dict[str, Any] | None, list[Finding]]:
    """The check's `torch_arch` data (None without torch's CUDA libraries) and findings."""
    files = _entries(torch_gpu_files(inventory))
    if not files:
        return None, []
    every = [e for entries in files.values() for e in entries]
    judged = {t: _judge(files, t) for t in targets}
    data = {"files": sorted(files), **coverage.arch_lists(every), "targets": judged}
    torch = inventory.get("torch")
    version = torch.version if torch is not None else "?"
    out = [_finding(version, t, cov, data, cell) for t, cov in judged.items()]
    return data, [f for f in out if f is not None]


def _entries(files: list[tuple[str, Path]]) -> dict[str, tuple[FatbinEntry, ...]]:
    out: dict[str, tuple[FatbinEntry, ...]] = {}
    for rel, path in files:
        try:
            with ELFFile(path) as elf:
                out[rel] = tuple(elf_fatbin_entries(elf))
        except (ELFError, FatbinError, OSError, ValueError) as exc:
            log.warning("cannot read the fatbin of %s: %s", path, exc)
    return out


def _judge(files: dict[str, tuple[FatbinEntry, ...]], target: str) -> str:
    try:
        parsed = coverage.parse_target(target)
    except ValueError:
        return "n/a"
    return coverage.worst(coverage.judge(entries, parsed) for entries in files.values())


def _finding(
    version: str, target: str, cov: str, data: dict[str, Any], cell: str | None
) -> Finding | None:
    has = f"cubins: {' '.join(data['cubins']) or '-'}; PTX: {' '.join(data['ptx']) or '-'}"
    files = ", ".join(data["files"])
    if cov == "none":
        code, severity = "SM-TORCH-ARCH-NONE", Severity.FAIL
        message = (
            f"torch {version} has no code for {target} in {files} ({has}): every torch "
            'kernel fails there at run time with "no kernel image is available for '
            f'execution on the device"; install a torch build whose arch list includes {target}'
        )
    elif cov == "ptx":
        code, severity = "SM-TORCH-ARCH-PTX-ONLY", Severity.WARN
        message = (
            f"torch {version} has only PTX for {target} in {files} ({has}): the driver "
            "JIT-compiles every torch kernel at first use (a slow start, and a driver at "
            "least as new as torch's CUDA)"
        )
    else:
        return None
    details = {
        "target": target,
        "coverage": cov,
        "files": data["files"],
        "cubins": data["cubins"],
        "ptx": data["ptx"],
    }
    return Finding(
        code=code,
        severity=severity,
        cell=cell,
        subject="torch",
        message=message,
        details=details,
    )
