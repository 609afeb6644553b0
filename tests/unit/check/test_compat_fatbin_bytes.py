"""The parser on hand-assembled containers: padding, header sizes, flags, bad input.
(The real layout is checked against cuobjdump in tests/integration/check.)"""

from __future__ import annotations

import struct

import pytest

from stackmatrix.check.fatbin import FatbinError, parse_fatbin


def _entry(kind: int, arch: int, flags: int, payload: bytes, header_size: int = 64) -> bytes:
    head = struct.pack(
        "<HHIQIIHHIIIQQQ",
        kind,
        0x101,
        header_size,
        len(payload),
        0,
        0,
        8,
        1,
        arch,
        0,
        0,
        flags,
        0,
        len(payload),
    )
    return head + b"\0" * (header_size - len(head)) + payload


def _container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def test_entries_flags_and_variable_header_sizes() -> None:
    data = (
        _container(
            _entry(2, 90, 0x100011, b"x" * 24),
            _entry(2, 100, 0x1200011, b"y" * 8, header_size=112),
            _entry(1, 120, 0x8011, b"\x28\xb5\x2f\xfd" + b"z" * 12, header_size=80),
        )
        + b"\0" * 8
        + _container(_entry(2, 80, 0x11, b"w" * 8))
    )
    entries = parse_fatbin(data)
    assert [e.arch for e in entries] == ["sm_90a", "sm_100f", "compute_120", "sm_80"]
    assert [e.cuobjdump_arch for e in entries] == ["sm_90a", "sm_100", "sm_120", "sm_80"]
    assert entries[2].compressed and entries[2].compression == "zstd"
    assert not entries[0].compressed
    assert [e.header_size for e in entries] == [64, 112, 80, 64]


def test_lz4_flag() -> None:
    [e] = parse_fatbin(_container(_entry(2, 75, 0x2011, b"\x00" * 16)))
    assert e.compressed and e.compression == "lz4"


def test_truncated_entry_is_an_error() -> None:
    data = _container(_entry(2, 90, 0x11, b"x" * 24))
    broken = data[:-8]
    broken = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(broken) - 16) + broken[16:]
    with pytest.raises(FatbinError):
        parse_fatbin(broken)


def test_no_container_means_no_entries() -> None:
    assert parse_fatbin(b"\0" * 64) == []


@pytest.mark.parametrize("pad", [8, 4092, 4093, 4095, 4096, 4097, 3 * 4096 + 5])
def test_padding_of_any_length_between_containers(pad: int) -> None:
    """The padding is searched a page at a time: a magic split across two reads is found."""
    first = _container(_entry(2, 90, 0x11, b"x" * 24))
    second = _container(_entry(2, 80, 0x11, b"w" * 8))
    entries = parse_fatbin(first + b"\0" * pad + second + b"\0" * 5)
    assert [e.arch for e in entries] == ["sm_90", "sm_80"]


def test_a_section_past_the_end_of_the_data_is_an_error() -> None:
    """A truncated file whose .nv_fatbin lies past its end is corrupt, not "no GPU code"."""
    with pytest.raises(FatbinError, match="past the end"):
        parse_fatbin(b"\0" * 8, 0, 64)
    with pytest.raises(FatbinError, match="past the end"):
        parse_fatbin(b"", 1 << 40, (1 << 40) + 64)
