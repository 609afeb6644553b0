"""The mapped ELF file the reader (`_elffile.ELFFile`) is built on: its header, its
section table, its string tables and reads at an offset, through ``mmap``.
Standard library only (struct, mmap).
"""

from __future__ import annotations

import functools
import mmap
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import ParamSpec, Self, TypeVar

from stackmatrix.check._elftypes import ELF_MAGIC, SHT_NOBITS, ELFError, SectionInfo

_P = ParamSpec("_P")
_R = TypeVar("_R")


def corrupt_is_elferror(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Crafted offsets, counts and links in a table are an ELFError naming the file,
    never an IndexError or OverflowError of this reader."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except (struct.error, IndexError, OverflowError) as exc:
            path = getattr(args[0], "path", "?")
            raise ELFError(f"{path}: corrupt ELF tables ({type(exc).__name__}: {exc})") from exc

    return wrapper


class ELFSections:
    """An open, memory-mapped ELF file: its header, section table and string tables.
    Use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = path.open("rb")
        try:
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError as exc:  # an empty file cannot be mapped
            self._fh.close()
            raise ELFError(f"{path}: empty file, not ELF") from exc
        try:
            self._parse_header()
            self.sections = self._read_sections()
        except (struct.error, IndexError, OverflowError) as exc:
            self.close()
            raise ELFError(f"{path}: truncated or corrupt ELF headers") from exc
        except ELFError:
            self.close()
            raise
        self._strtab_cache: dict[int, str] = {}

    # --- lifecycle -------------------------------------------------------------
    def close(self) -> None:
        self._mm.close()
        self._fh.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- headers ---------------------------------------------------------------
    def _parse_header(self) -> None:
        mm = self._mm
        if len(mm) < 52 or mm[:4] != ELF_MAGIC:
            raise ELFError(f"{self.path}: not an ELF file")
        elf_class, data = mm[4], mm[5]
        if elf_class not in (1, 2) or data not in (1, 2):
            raise ELFError(f"{self.path}: unknown ELF class/encoding {elf_class}/{data}")
        self.is64 = elf_class == 2
        self.endian = "<" if data == 1 else ">"
        fmt = self.endian + ("HHIQQQIHHHHHH" if self.is64 else "HHIIIIIHHHHHH")
        (
            self.e_type,
            self.e_machine,
            _version,
            _entry,
            _phoff,
            self._shoff,
            self.e_flags,
            _ehsize,
            _phentsize,
            _phnum,
            self._shentsize,
            self._shnum,
            self._shstrndx,
        ) = struct.unpack_from(fmt, mm, 16)

    def _section_header(self, index: int) -> tuple[int, int, int, int, int, int, int]:
        """(name, type, offset, size, link, info, entsize) of section `index`."""
        off = self._shoff + index * self._shentsize
        if self.is64:
            name, typ, _fl, _addr, offset, size, link, info, _al, ent = struct.unpack_from(
                self.endian + "IIQQQQIIQQ", self._mm, off
            )
        else:
            name, typ, _fl, _addr, offset, size, link, info, _al, ent = struct.unpack_from(
                self.endian + "IIIIIIIIII", self._mm, off
            )
        return name, typ, offset, size, link, info, ent

    def _read_sections(self) -> list[tuple[int, int, int, int, int, int, int]]:
        if self._shoff == 0:
            return []
        if self._shentsize < (64 if self.is64 else 40):
            # a crafted size of 0 would read one header forever
            raise ELFError(f"{self.path}: section header size {self._shentsize} is too small")
        shnum, shstrndx = self._shnum, self._shstrndx
        if shnum == 0 or shstrndx == 0xFFFF:
            # More than 0xff00 sections: the real values live in section 0 (ELF gABI).
            first = self._section_header(0)
            shnum = shnum or first[3]
            shstrndx = first[4] if shstrndx == 0xFFFF else shstrndx
        if self._shoff + shnum * self._shentsize > len(self._mm):
            raise ELFError(f"{self.path}: {shnum} section headers run past the end of the file")
        self._shstrndx = shstrndx
        return [self._section_header(i) for i in range(shnum)]

    # --- strings -----------------------------------------------------------------
    def _strtab(self, index: int) -> str:
        """The whole string table of section `index`, decoded once (latin-1 keeps offsets)."""
        cached = self._strtab_cache.get(index)
        if cached is None:
            _n, typ, offset, size, *_ = self.sections[index]
            cached = "" if typ == SHT_NOBITS else self._mm[offset : offset + size].decode("latin-1")
            self._strtab_cache[index] = cached
        return cached

    @staticmethod
    def _cstr(table: str, offset: int) -> str:
        end = table.find("\0", offset)
        return table[offset:] if end < 0 else table[offset:end]

    def _require_section(self, index: int) -> None:
        """A link to a section that is not there makes the table corrupt (IndexError, an
        ELFError to the caller) whether or not a string is read through it: the readers
        that read one string at a time reject what the whole-table readers reject."""
        _ = self.sections[index]  # the IndexError _strtab(index) would raise, word for word

    def _string(self, index: int, offset: int) -> str:
        """_cstr(_strtab(index), offset), without decoding the whole table when it is not
        decoded yet: .dynamic and the version tables name a few strings of a .dynstr of
        megabytes, which `inspect` never reads whole."""
        cached = self._strtab_cache.get(index)
        if cached is not None:
            return self._cstr(cached, offset)
        _n, typ, start, size, *_ = self.sections[index]
        stop = min(start + size, len(self._mm))
        if typ == SHT_NOBITS or offset >= stop - start:
            return ""
        end = self._mm.find(b"\0", start + offset, stop)
        return self._mm[start + offset : stop if end < 0 else end].decode("latin-1")

    # --- sections ----------------------------------------------------------------
    def iter_sections(self) -> Iterator[SectionInfo]:
        if not self.sections:
            return
        names = self._strtab(self._shstrndx)
        for name, typ, offset, size, *_ in self.sections:
            yield SectionInfo(name=self._cstr(names, name), type=typ, offset=offset, size=size)

    @corrupt_is_elferror
    def section(self, name: str) -> SectionInfo | None:
        for sec in self.iter_sections():
            if sec.name == name:
                return sec
        return None

    @property
    def buffer(self) -> mmap.mmap:
        return self._mm

    def read_at(self, offset: int, size: int) -> bytes:
        """`size` bytes at `offset` (fewer at the end of the file), read past the mapping:
        for a few bytes in each of many pages of a large section (fatbin headers)."""
        if offset < 0 or size < 0:
            raise ELFError(f"{self.path}: negative offset or size in its tables")
        if offset >= len(self._mm):
            return b""  # past the end, as a slice of the mapping (pread's off_t is signed)
        return os.pread(self._fh.fileno(), size, offset)

    def _first_of_type(self, typ: int) -> int | None:
        for i, sec in enumerate(self.sections):
            if sec[1] == typ:
                return i
        return None
