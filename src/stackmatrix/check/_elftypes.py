"""The facts the ELF reader (`_elffile`) returns, and the constants of the ELF format it
reads them by: the section, dynamic-tag and symbol numbers of the System V ABI."""

from __future__ import annotations

import enum
from typing import NamedTuple

ELF_MAGIC = b"\x7fELF"

SHT_DYNAMIC = 6
SHT_DYNSYM = 11
SHT_NOBITS = 8
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF

DT_NULL = 0
DT_NEEDED = 1
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29

STB_LOCAL = 0
STB_WEAK = 2
SHN_UNDEF = 0
VERSYM_HIDDEN = 0x8000


class ELFError(ValueError):
    """The file is not an ELF file this reader understands (or is truncated)."""


class Binding(enum.StrEnum):
    LOCAL = "local"
    GLOBAL = "global"
    WEAK = "weak"
    OTHER = "other"


class DynSymbol(NamedTuple):
    name: str
    defined: bool
    binding: Binding
    type: int  # STT_* (0 notype, 1 object, 2 func, 10 gnu ifunc...)
    version: str | None = None  # "GLIBC_2.34" for a versioned reference/definition
    version_file: str | None = None  # the soname a version need names (undefined only)

    @property
    def weak(self) -> bool:
        return self.binding is Binding.WEAK


class SectionInfo(NamedTuple):
    name: str
    type: int
    offset: int
    size: int


class DynamicInfo(NamedTuple):
    needed: tuple[str, ...] = ()
    soname: str | None = None
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()


class VersionNeeds(NamedTuple):
    """{soname: (version names)} from .gnu.version_r."""

    by_file: dict[str, tuple[str, ...]]
