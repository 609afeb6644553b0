"""A small, fast ELF reader for the facts the checks need.

Reads through ``mmap`` and touches only the headers and tables it needs (section
headers, .dynamic, .dynsym, .dynstr, the GNU version tables, and the bounds of a
named section such as .nv_fatbin), so a 850 MB extension costs a few page faults,
not a read of the file. Standard library only (struct, mmap). The file, its sections
and its strings are `_elfsections.ELFSections`; here the tables read through them.
"""

from __future__ import annotations

import struct
from pathlib import Path

from stackmatrix.check._elfsections import ELFSections, corrupt_is_elferror
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
    STB_LOCAL,
    STB_WEAK,
    VERSYM_HIDDEN,
    Binding,
    DynamicInfo,
    DynSymbol,
    VersionNeeds,
)

# .dynsym rows (name, info, other, shndx, ...), its strings, the symbols' version
# indexes, {index: (version, soname)} needed and {index: version} defined
_DynsymTables = tuple[
    list[tuple[int, ...]], str, tuple[int, ...], dict[int, tuple[str, str]], dict[int, str]
]

_BINDINGS = {0: Binding.LOCAL, 1: Binding.GLOBAL, 2: Binding.WEAK, 10: Binding.GLOBAL}


class ELFFile(ELFSections):
    """An open, memory-mapped ELF file and its dynamic tables. Use as a context manager."""

    # --- .dynamic ----------------------------------------------------------------
    @corrupt_is_elferror
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

    @corrupt_is_elferror
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

    @corrupt_is_elferror
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

    @corrupt_is_elferror
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

    @corrupt_is_elferror
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

    @corrupt_is_elferror
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
