"""CUDA fat binaries: the GPU code inside an ELF's .nv_fatbin section.

Layout (little endian), as observed on nvcc 12.x/13.0 output and checked against
cuobjdump in tests/integration/check:

* container header, 16 bytes: magic 0xBA55ED50 (u32), version (u16), header size
  (u16), size of the entries that follow (u64). A section holds several containers
  back to back (one per translation unit / device link), sometimes padded.
* entry header, `header_size` bytes (64, 80, 96, 112... seen; always use the field):
  kind u16 (1 PTX, 2 cubin), version u16, header_size u32, payload size u64,
  compressed payload size u32 @16, extension offset u32 @20, format version
  minor/major u16 @24, arch u32 @28 (90 = sm_90), flags u64 @40, decompressed
  size u64 @56.
* flags: 0x1 64-bit, 0x2 debug, 0x10 linux, 0x2000 compressed (older LZ4 form),
  0x8000 compressed (zstd payload in CUDA 13), 0x100000 arch-specific (`sm_90a`),
  0x200000 family-specific (`sm_100f`).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from stackmatrix.check._elffile import ELFFile

FATBIN_MAGIC = 0xBA55ED50
_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
_CONTAINER = struct.Struct("<IHHQ")
# the fields up to arch (32 bytes), then flags @40 and the decompressed size @56
_ENTRY = struct.Struct("<HHIQIIHHI8xQ8xQ")
_MIN_ENTRY_HEADER = 64
_SEARCH_CHUNK = 1 << 12  # bytes read at a time when looking past padding

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_COMPRESSED_LZ4 = 0x2000
FLAG_COMPRESSED = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

Kind = Literal["cubin", "ptx", "other"]
Variant = Literal["", "a", "f"]


class FatbinError(ValueError):
    """A .nv_fatbin section that does not parse."""


class FatbinEntry(NamedTuple):
    kind: Kind
    sm: int  # 90 for sm_90 / compute_90
    variant: Variant
    flags: int
    header_size: int
    size: int  # payload bytes in the file (padded)
    compressed: bool
    compression: str | None  # "zstd", "lz4" or None
    uncompressed_size: int
    raw_kind: int
    offset: int = 0  # of the payload in the file (read by kernels.py)

    @property
    def arch(self) -> str:
        """The arch as nvcc spells it: sm_90a for a cubin, compute_120 for PTX."""
        prefix = "compute" if self.kind == "ptx" else "sm"
        return f"{prefix}_{self.sm}{self.variant}"

    @property
    def cuobjdump_arch(self) -> str:
        """The arch as `cuobjdump --list-elf/--list-ptx` prints it.

        cuobjdump 13.x names a family cubin by its base arch (sm_100f -> sm_100)
        while it keeps the suffix for PTX and for `a` cubins.
        """
        variant = "" if self.kind == "cubin" and self.variant == "f" else self.variant
        return f"sm_{self.sm}{variant}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "arch": self.arch,
            "sm": self.sm,
            "variant": self.variant,
            "flags": self.flags,
            "compressed": self.compressed,
            "compression": self.compression,
            "size": self.size,
            "uncompressed_size": self.uncompressed_size,
        }


# reads `n` bytes at `pos` (fewer at the end of the data)
Reader = Callable[[int, int], bytes]


def parse_fatbin(
    buf: bytes | memoryview | mmap.mmap, start: int = 0, end: int | None = None
) -> list[FatbinEntry]:
    """Every entry of every container in `buf[start:end]`, in file order."""
    end = len(buf) if end is None else end
    return read_fatbin(lambda pos, n: bytes(buf[pos : pos + n]), start, end)


def read_fatbin(read: Reader, start: int, end: int) -> list[FatbinEntry]:
    """parse_fatbin over a reader: only the headers are read. From a file, each header
    is one pread; touching them through a mapping cost a page fault per entry and their
    unmapping, two thirds of `inspect`'s scan of sgl-kernel."""
    entries: list[FatbinEntry] = []
    pos = _next_container(read, start, end)
    while pos is not None:
        magic, _version, header_size, size = _CONTAINER.unpack(read(pos, _CONTAINER.size))
        if magic != FATBIN_MAGIC or header_size < _CONTAINER.size:
            raise FatbinError(f"bad fatbin container header at offset {pos}")
        body, body_end = pos + header_size, pos + header_size + size
        if body_end > end:
            raise FatbinError(f"fatbin container at offset {pos} runs past its section")
        entries.extend(_parse_entries(read, body, body_end))
        pos = _next_container(read, body_end, end)
    return entries


def _next_container(read: Reader, pos: int, end: int) -> int | None:
    """`pos` when a container starts there, else the next one in the padding."""
    if pos + _CONTAINER.size > end:
        return None
    head = read(pos, _CONTAINER.size)
    if len(head) < _CONTAINER.size:
        raise FatbinError(f"fatbin section runs past the end of the file (offset {pos})")
    if head.startswith(_MAGIC_BYTES):
        return pos
    while pos + _CONTAINER.size <= end:
        chunk = read(pos, min(_SEARCH_CHUNK, end - pos))
        found = chunk.find(_MAGIC_BYTES)
        if found >= 0:
            return pos + found
        if len(chunk) < min(_SEARCH_CHUNK, end - pos):
            return None  # the file ends before the section does
        pos += len(chunk) - (len(_MAGIC_BYTES) - 1)  # a magic split across two chunks
    return None


def _parse_entries(read: Reader, pos: int, end: int) -> list[FatbinEntry]:
    out: list[FatbinEntry] = []
    while pos + _MIN_ENTRY_HEADER <= end:
        kind, _ver, header_size, size, csize, _ext, _minor, _major, arch, flags, usize = (
            _ENTRY.unpack(read(pos, _ENTRY.size))
        )
        if header_size < _MIN_ENTRY_HEADER or pos + header_size + size > end:
            raise FatbinError(f"bad fatbin entry header at offset {pos} (size {header_size})")
        out.append(_entry(read, pos, kind, header_size, size, arch, flags, usize, csize))
        pos += header_size + size
    return out


def _entry(
    read: Reader,
    pos: int,
    kind: int,
    header_size: int,
    size: int,
    arch: int,
    flags: int,
    usize: int,
    csize: int,
) -> FatbinEntry:
    compressed = bool(flags & (FLAG_COMPRESSED | FLAG_COMPRESSED_LZ4))
    compression = None
    if compressed:
        head = read(pos + header_size, 4)
        compression = "zstd" if head == _ZSTD_MAGIC else "lz4"
    variant: Variant = ""
    if flags & FLAG_ARCH_SPECIFIC:
        variant = "a"
    elif flags & FLAG_FAMILY:
        variant = "f"
    kinds: dict[int, Kind] = {1: "ptx", 2: "cubin"}
    return FatbinEntry(
        kind=kinds.get(kind, "other"),
        sm=arch,
        variant=variant,
        flags=flags,
        header_size=header_size,
        size=size,
        compressed=compressed,
        compression=compression,
        uncompressed_size=usize if compressed else (csize or size),
        raw_kind=kind,
        offset=pos + header_size,
    )


def elf_fatbin_entries(elf: ELFFile) -> list[FatbinEntry]:
    """The entries of `elf`'s .nv_fatbin section ([] when it has no GPU code)."""
    sec = elf.section(".nv_fatbin")
    if sec is None or sec.size == 0:
        return []
    return read_fatbin(elf.read_at, sec.offset, sec.offset + sec.size)
