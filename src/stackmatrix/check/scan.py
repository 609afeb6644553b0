"""Everything the checks read from one ELF extension, in one pass over one mmap."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from stackmatrix.check._elffile import ELFFile
from stackmatrix.check._elftypes import DynamicInfo, DynSymbol, ELFError
from stackmatrix.check.fatbin import FatbinEntry, FatbinError, elf_fatbin_entries
from stackmatrix.findings import Finding, Severity


class ExtensionScan(NamedTuple):
    path: Path
    dynamic: DynamicInfo
    symbols: tuple[DynSymbol, ...]  # () when scanned without names (with_symbols=False)
    undefined_count: int  # undefined, not weak: what `inspect` prints
    version_needs: dict[str, tuple[str, ...]]
    fatbin: tuple[FatbinEntry, ...] = ()

    @property
    def undefined(self) -> tuple[DynSymbol, ...]:
        return tuple(s for s in self.symbols if not s.defined)


def scan_extension(path: Path, *, with_symbols: bool = True) -> ExtensionScan:
    """Needed libraries, dynamic symbols, version needs and fatbin entries of `path`.

    with_symbols=False counts the undefined symbols without decoding their names
    (`inspect` resolves nothing, so names would be read for nothing); it reads the
    same tables, so it accepts and rejects the same files.

    Raises ELFError (naming `path`) or OSError for a file that is not a readable ELF
    object, a bad .nv_fatbin included.
    """
    try:
        with ELFFile(path) as elf:
            dynamic = elf.dynamic()  # first, as before: a file corrupt twice names the same
            symbols, undefined = _symbols(elf, with_symbols)
            return ExtensionScan(
                path=path,
                dynamic=dynamic,
                symbols=symbols,
                undefined_count=undefined,
                version_needs=dict(elf.version_needs().by_file),
                fatbin=tuple(elf_fatbin_entries(elf)),
            )
    except (FatbinError, struct.error, IndexError, OverflowError) as exc:
        raise ELFError(f"{path}: corrupt .nv_fatbin ({type(exc).__name__}: {exc})") from exc


def _symbols(elf: ELFFile, with_names: bool) -> tuple[tuple[DynSymbol, ...], int]:
    if not with_names:
        return (), elf.strong_undefined_count()
    symbols = tuple(elf.dynamic_symbols())
    return symbols, sum(1 for s in symbols if not s.defined and not s.weak)


def unreadable(path: Path, exc: Exception, cell: str | None) -> Finding:
    """SM-ELF-UNREADABLE: `path` could not be scanned (what scan_extension raised)."""
    return Finding(
        code="SM-ELF-UNREADABLE",
        severity=Severity.WARN,
        cell=cell,
        subject=str(path),
        message=f"cannot read {path}: {exc}",
    )
