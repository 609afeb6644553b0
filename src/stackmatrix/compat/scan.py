"""Everything the checks read from one ELF extension, in one pass over one mmap."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from stackmatrix.compat._elffile import DynamicInfo, DynSymbol, ELFError, ELFFile
from stackmatrix.compat.fatbin import FatbinEntry, FatbinError, elf_fatbin_entries
from stackmatrix.findings import Finding, Severity


@dataclass(frozen=True, kw_only=True)
class ExtensionScan:
    path: Path
    dynamic: DynamicInfo
    symbols: tuple[DynSymbol, ...]
    version_needs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fatbin: tuple[FatbinEntry, ...] = ()

    @property
    def undefined(self) -> tuple[DynSymbol, ...]:
        return tuple(s for s in self.symbols if not s.defined)


def scan_extension(path: Path) -> ExtensionScan:
    """Needed libraries, dynamic symbols, version needs and fatbin entries of `path`.

    Raises ELFError (naming `path`) or OSError for a file that is not a readable ELF
    object, a bad .nv_fatbin included (issue 16, defect 13).
    """
    try:
        with ELFFile(path) as elf:
            return ExtensionScan(
                path=path,
                dynamic=elf.dynamic(),
                symbols=tuple(elf.dynamic_symbols()),
                version_needs=dict(elf.version_needs().by_file),
                fatbin=tuple(elf_fatbin_entries(elf)),
            )
    except (FatbinError, struct.error, IndexError, OverflowError) as exc:
        raise ELFError(f"{path}: corrupt .nv_fatbin ({type(exc).__name__}: {exc})") from exc


def unreadable(path: Path, exc: Exception, cell: str | None) -> Finding:
    """SM-ELF-UNREADABLE: `path` could not be scanned (what scan_extension raised)."""
    return Finding(
        code="SM-ELF-UNREADABLE",
        severity=Severity.WARN,
        cell=cell,
        subject=str(path),
        message=f"cannot read {path}: {exc}",
    )
