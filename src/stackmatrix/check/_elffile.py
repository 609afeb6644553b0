"""A small, fast ELF reader for the facts the checks need.

Reads through ``mmap`` and touches only the headers and tables it needs (section
headers, .dynamic, .dynsym, .dynstr, the GNU version tables, and the bounds of a
named section such as .nv_fatbin), so a 850 MB extension costs a few page faults,
not a read of the file. Standard library only (struct, mmap).
"""

from __future__ import annotations

import functools
import mmap
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import ParamSpec, TypeVar

from stackmatrix.check._elftypes import (
    DT_NEEDED,
    DT_NULL,
    DT_RPATH,
    DT_RUNPATH,
    DT_SONAME,
    ELF_MAGIC,
    SHN_UNDEF,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
    SHT_NOBITS,
    STB_LOCAL,
    STB_WEAK,
    VERSYM_HIDDEN,
    Binding,
    DynamicInfo,
    DynSymbol,
    ELFError,
    SectionInfo,
    VersionNeeds,
)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _corrupt_is_elferror(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Crafted offsets, counts and links in a table (issue 16, defect 13) are an
    ELFError naming the file, never an IndexError or OverflowError of this reader."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except (struct.error, IndexError, OverflowError) as exc:
            path = getattr(args[0], "path", "?")
            raise ELFError(f"{path}: corrupt ELF tables ({type(exc).__name__}: {exc})") from exc

    return wrapper


# .dynsym rows (name, info, other, shndx, ...), its strings, the symbols' version
# indexes, {index: (version, soname)} needed and {index: version} defined
_DynsymTables = tuple[
    list[tuple[int, ...]], str, tuple[int, ...], dict[int, tuple[str, str]], dict[int, str]
]

_BINDINGS = {0: Binding.LOCAL, 1: Binding.GLOBAL, 2: Binding.WEAK, 10: Binding.GLOBAL}


class ELFFile:
    """An open, memory-mapped ELF file. Use as a context manager."""

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

    def __enter__(self) -> ELFFile:
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
            # a crafted size of 0 would read one header forever (issue 16, defect 13)
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
        megabytes, which `inspect` never reads whole (issue 17, item 3)."""
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

    @_corrupt_is_elferror
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

    # --- .dynamic ----------------------------------------------------------------
    @_corrupt_is_elferror
    def dynamic(self) -> DynamicInfo:
        index = self._first_of_type(SHT_DYNAMIC)
        if index is None:
            return DynamicInfo()
        _n, _t, offset, size, link, _i, _e = self.sections[index]
        self._require_section(link)
        fmt = self.endian + ("qQ" if self.is64 else "iI")
        needed: list[str] = []
        soname: str | None = None
        rpath: list[str] = []
        runpath: list[str] = []
        for tag, val in struct.iter_unpack(fmt, self._mm[offset : offset + size]):
            if tag == DT_NULL:
                break
            if tag == DT_NEEDED:
                needed.append(self._string(link, val))
            elif tag == DT_SONAME:
                soname = self._string(link, val)
            elif tag == DT_RPATH:
                rpath.extend(p for p in self._string(link, val).split(":") if p)
            elif tag == DT_RUNPATH:
                runpath.extend(p for p in self._string(link, val).split(":") if p)
        return DynamicInfo(
            needed=tuple(needed), soname=soname, rpath=tuple(rpath), runpath=tuple(runpath)
        )

    # --- versions ----------------------------------------------------------------
    def _version_need_index(self) -> dict[int, tuple[str, str]]:
        """{version index: (version name, soname)} from .gnu.version_r."""
        index = self._first_of_type(SHT_GNU_VERNEED)
        if index is None:
            return {}
        _n, _t, offset, _s, link, count, _e = self.sections[index]
        self._require_section(link)
        out: dict[int, tuple[str, str]] = {}
        pos, e = offset, self.endian
        for _ in range(count):
            _ver, cnt, file_off, aux, nxt = struct.unpack_from(e + "HHIII", self._mm, pos)
            soname = self._string(link, file_off)
            apos = pos + aux
            for _ in range(cnt):
                _h, _f, other, name_off, anext = struct.unpack_from(e + "IHHII", self._mm, apos)
                out[other] = (self._string(link, name_off), soname)
                if anext == 0:
                    break
                apos += anext
            if nxt == 0:
                break
            pos += nxt
        return out

    @_corrupt_is_elferror
    def version_needs(self) -> VersionNeeds:
        grouped: dict[str, list[str]] = {}
        for name, soname in self._version_need_index().values():
            grouped.setdefault(soname, []).append(name)
        return VersionNeeds(by_file={k: tuple(sorted(v)) for k, v in grouped.items()})

    def _version_def_index(self) -> dict[int, str]:
        index = self._first_of_type(SHT_GNU_VERDEF)
        if index is None:
            return {}
        _n, _t, offset, _s, link, count, _e = self.sections[index]
        self._require_section(link)
        out: dict[int, str] = {}
        pos, e = offset, self.endian
        for _ in range(count):
            _v, _fl, ndx, cnt, _h, aux, nxt = struct.unpack_from(e + "HHHHIII", self._mm, pos)
            if cnt:
                (name_off,) = struct.unpack_from(e + "I", self._mm, pos + aux)
                out[ndx] = self._string(link, name_off)
            if nxt == 0:
                break
            pos += nxt
        return out

    @_corrupt_is_elferror
    def version_defs(self) -> tuple[str, ...]:
        """Version names this object defines (e.g. GLIBC_2.34), without its own soname entry."""
        defs = self._version_def_index()
        return tuple(name for ndx, name in sorted(defs.items()) if ndx != 1)

    # --- .dynsym -------------------------------------------------------------------
    def _dynsym_raw(
        self, *, names: bool = True
    ) -> tuple[list[tuple[int, ...]], str, int | None] | None:
        """Rows (name, info, other, shndx, ...) and the decoded string table; with
        names=False rows (info, shndx) and no strings, the same bytes read and checked."""
        index = self._first_of_type(SHT_DYNSYM)
        if index is None:
            return None
        _n, _t, offset, size, link, _i, _e = self.sections[index]
        if names:
            strings = self._strtab(link)
            fmt = "IBBHQQ" if self.is64 else "IIIBBH"
        else:
            strings = ""
            self._require_section(link)
            fmt = "4xBxH16x" if self.is64 else "12xBxH"  # the same row sizes, 24 and 16
        rows = list(struct.iter_unpack(self.endian + fmt, self._mm[offset : offset + size]))
        if names and not self.is64:  # normalise to (name, info, other, shndx)
            rows = [(r[0], r[3], r[4], r[5]) for r in rows]
        return rows, strings, self._first_of_type(SHT_GNU_VERSYM)

    def _versyms(self, index: int | None, count: int) -> tuple[int, ...]:
        if index is None:
            return ()
        offset = self.sections[index][2]
        return struct.unpack_from(f"{self.endian}{count}H", self._mm, offset)

    def _dynsym_tables(self, *, names: bool = True) -> _DynsymTables | None:
        """.dynsym's rows and strings, and the version tables its symbols point into."""
        raw = self._dynsym_raw(names=names)
        if raw is None:
            return None
        rows, strings, versym_index = raw
        versyms = self._versyms(versym_index, len(rows))
        needs = self._version_need_index() if versyms else {}
        defs = self._version_def_index() if versyms else {}
        return rows, strings, versyms, needs, defs

    @_corrupt_is_elferror
    def dynamic_symbols(self) -> list[DynSymbol]:
        """Every dynamic symbol except the null entry and local ones."""
        tables = self._dynsym_tables()
        if tables is None:
            return []
        rows, strings, versyms, needs, defs = tables
        out: list[DynSymbol] = []
        cstr = self._cstr
        for i, row in enumerate(rows):
            name_off, info, shndx = row[0], row[1], row[3]
            bind = info >> 4
            if i == 0 or bind == STB_LOCAL:
                continue
            defined = shndx != SHN_UNDEF
            version = version_file = None
            if versyms:
                v = versyms[i] & ~VERSYM_HIDDEN
                if v > 1:
                    if defined:
                        version = defs.get(v)
                    elif v in needs:
                        version, version_file = needs[v]
            out.append(
                DynSymbol(
                    name=cstr(strings, name_off),
                    defined=defined,
                    binding=_BINDINGS.get(bind, Binding.OTHER),
                    type=info & 0xF,
                    version=version,
                    version_file=version_file,
                )
            )
        return out

    @_corrupt_is_elferror
    def strong_undefined_count(self) -> int:
        """How many of dynamic_symbols() are undefined and not weak, no name decoded.

        `inspect` prints only this count, and decoding ~20,000 names was most of its
        scan. It reads the same tables as dynamic_symbols(), so a corrupt one raises
        the same ELFError."""
        tables = self._dynsym_tables(names=False)
        if tables is None:
            return 0
        rows = tables[0]  # (info, shndx)
        return sum(
            1
            for info, shndx in rows[1:]
            if shndx == SHN_UNDEF and (info >> 4) not in (STB_LOCAL, STB_WEAK)
        )

    @_corrupt_is_elferror
    def defined_symbol_names(self) -> set[str]:
        """Names of exported (defined, non-local) dynamic symbols: the fast path for providers."""
        raw = self._dynsym_raw()
        if raw is None:
            return set()
        rows, strings, _ = raw
        cstr = self._cstr
        return {
            cstr(strings, r[0])
            for r in rows
            if r[3] != SHN_UNDEF and (r[1] >> 4) != STB_LOCAL and r[0]
        }


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == ELF_MAGIC
    except OSError:
        return False
