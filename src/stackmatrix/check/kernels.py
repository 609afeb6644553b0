"""Per-kernel arch coverage inside one extension: which kernels have code for a target.

coverage.py judges a file by its best entry: one cubin that runs on the target makes the
file `native`. Each translation unit is compiled with its own arch list, though, so one
kernel of a file can lack the target's code while another has it: sgl-kernel's
`rmsnorm` failed with "no kernel image is available for execution on the device" on
sm_75 while `silu_and_mul` of the same `common_ops` ran (sglang#38515). Here the kernels
of each entry are read: the `.text.<kernel>` sections of an uncompressed cubin (an ELF
image) and the `.entry` lines of uncompressed PTX. A kernel that some entry of the file
holds, and no entry that runs on the target does, is a gap.

Not judged (no finding): a target on which a compressed entry could run (its kernels are
not read: zstd and LZ4 are not decompressed here), and a kernel built only as
arch- or family-specific code (`sm_90a`, `sm_100f`: for one arch on purpose, dispatched
by arch). SM-ARCH-KERNEL-GAP (warn, one per file and target): the check cannot see
whether the server calls the kernel on that target.
"""

from __future__ import annotations

import contextlib
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from stackmatrix.check import coverage
from stackmatrix.check._elffile import ELFFile
from stackmatrix.check._elftypes import ELFError
from stackmatrix.check.fatbin import FatbinEntry
from stackmatrix.findings import Finding, Severity

CODE = "SM-ARCH-KERNEL-GAP"
_SHDR = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_PTX_ENTRY = re.compile(rb"\.entry\s+([A-Za-z_$][\w$]*)")
_MAX_PTX = 256 << 20  # PTX read per entry at most
_SHOWN = 5

Reader = Callable[[int, int], bytes]
KernelMap = dict[FatbinEntry, frozenset[str]]


def cubin_kernels(read: Reader, base: int, size: int) -> frozenset[str]:
    """The kernels of the cubin at `base` (`size` bytes): its `.text.<name>` sections."""
    head = read(base, 64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        raise ValueError("not a little-endian ELF64 cubin")
    (shoff,) = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if shentsize < _SHDR.size or shstrndx >= shnum or shoff + shnum * shentsize > size:
        raise ValueError("section headers outside the cubin")
    table = read(base + shoff, shnum * shentsize)
    headers = [_SHDR.unpack_from(table, i * shentsize) for i in range(shnum)]
    _n, _t, _f, _a, str_off, str_size, *_ = headers[shstrndx]
    if str_off + str_size > size:
        raise ValueError("section names outside the cubin")
    names = read(base + str_off, str_size)
    out = set()
    for h in headers:
        name = names[h[0] : names.find(b"\0", h[0])].decode("utf-8", "replace")
        if name.startswith(".text."):
            out.add(name[len(".text.") :])
    return frozenset(out)


def ptx_kernels(read: Reader, base: int, size: int) -> frozenset[str]:
    text = read(base, min(size, _MAX_PTX))
    return frozenset(m.group(1).decode("utf-8", "replace") for m in _PTX_ENTRY.finditer(text))


def kernel_map(path: Path, entries: Sequence[FatbinEntry]) -> KernelMap:
    """The kernels of each uncompressed GPU entry of `path` (those it could read)."""
    out: KernelMap = {}
    with ELFFile(path) as elf:
        for e in entries:
            if e.compressed or e.kind not in ("cubin", "ptx"):
                continue
            reader = cubin_kernels if e.kind == "cubin" else ptx_kernels
            # an entry it cannot read stays out: no target it runs on is judged
            with contextlib.suppress(ValueError, struct.error, IndexError):
                out[e] = reader(elf.read_at, e.offset, e.size)
    return out


def gaps(entries: Sequence[FatbinEntry], kernels: KernelMap, target: coverage.Target) -> list[str]:
    """The kernels of the file without code for `target`, sorted; none when an entry
    that runs there is not read (compressed) or when no entry runs there at all (that
    is the whole file's SM-ARCH-NONE)."""
    runs = [e for e in entries if e.kind in ("cubin", "ptx") and coverage.entry_runs_on(e, target)]
    if not runs or any(e not in kernels for e in runs):
        return []
    covered = frozenset().union(*(kernels[e] for e in runs))
    plain = frozenset().union(*(k for e, k in kernels.items() if e.variant == ""))
    return sorted(plain - covered)


def readable_name(mangled: str) -> str:
    """`rmsnorm` for `_Z7rmsnormPfi`, `sgl::rmsnorm` for `_ZN3sgl7rmsnormEPfi`; a name
    that is not an Itanium C++ one as it is."""
    if not mangled.startswith("_Z"):
        return mangled
    nested = mangled.startswith("_ZN")
    rest = mangled[3:] if nested else mangled[2:].removeprefix("L")
    parts: list[str] = []
    while (d := re.match(r"\d+", rest)) is not None:
        n = int(d.group())
        parts.append(rest[d.end() : d.end() + n])
        rest = rest[d.end() + n :]
        if not nested:
            break
    return "::".join(parts) or mangled


def kernel_findings(
    files: Iterable[tuple[str, Path, Sequence[FatbinEntry]]],
    per_target: dict[str, dict[str, str]],
    cell: str | None,
) -> list[Finding]:
    """SM-ARCH-KERNEL-GAP for each file and target whose file-level coverage is native or
    PTX while some of its kernels have no code there."""
    out: list[Finding] = []
    for rel, path, entries in files:
        judged = {t: per[rel] for t, per in per_target.items() if per.get(rel) in ("native", "ptx")}
        if not judged or not any(not e.compressed for e in entries):
            continue
        try:
            kernels = kernel_map(path, entries)
        except (OSError, ELFError):
            continue  # the scan read this file a moment ago; a file gone since says nothing
        for target in judged:
            missing = gaps(entries, kernels, coverage.parse_target(target))
            if missing:
                out.append(_finding(rel, target, missing, kernels, cell))
    return out


def _finding(
    rel: str, target: str, missing: list[str], kernels: KernelMap, cell: str | None
) -> Finding:
    every = frozenset().union(*kernels.values())
    # one name per template: its instantiations differ only in their mangled names
    names = list(dict.fromkeys(readable_name(k) for k in missing))
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    shown = ", ".join(names[:_SHOWN]) + more
    ok = list(dict.fromkeys(sorted(readable_name(k) for k in every - set(missing))))
    return Finding(
        code=CODE,
        severity=Severity.WARN,
        cell=cell,
        subject=rel,
        message=(
            f"{rel} has code for {target}, but not for {len(missing)} of its {len(every)} "
            f'kernels read: {shown}; called on {target} they fail with "no kernel image is '
            f'available for execution on the device" while the others ({", ".join(ok[:_SHOWN])}) '
            "run; use a build whose every kernel includes this arch"
        ),
        details={
            "target": target,
            "kernels": missing,
            "readable": names,
            "kernels_read": len(every),
        },
    )
