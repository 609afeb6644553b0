"""`stackmatrix inspect` on hostile and careless input:
a finding or the documented exit code naming the user's file, never a traceback, and
never "compatible" for something that holds nothing to judge."""

from __future__ import annotations

import os
import struct
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stackmatrix.check._elffile import ELFFile
from stackmatrix.check._elftypes import ELFError
from stackmatrix.check.fatbin import FatbinEntry, FatbinError, parse_fatbin, read_fatbin
from stackmatrix.check.phase import inspect_path
from stackmatrix.check.scan import ExtensionScan, scan_extension
from stackmatrix.cli import main

TARGETS = ["sm_90"]
_SH = struct.Struct("<IIQQQQIIQQ")


def _fatbin(arch: int = 90) -> bytes:
    payload = b"x" * 16
    entry = struct.pack(
        "<HHIQIIHHIIIQQQ", 2, 0x101, 64, len(payload), 0, 0, 8, 1, arch, 0, 0, 0x11, 0, len(payload)
    )
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry + payload)) + entry + payload


def elf(fatbin: bytes | None = None) -> bytes:
    """A small ELF64 shared object: DT_NEEDED libc.so.6, one undefined symbol `foo`
    (versioned GLIBC_2.2.5 through .gnu.version_r), and a .nv_fatbin with sm_90."""
    shstr = b"\0.shstrtab\0.dynstr\0.dynamic\0.dynsym\0.nv_fatbin\0.gnu.version\0.gnu.version_r\0"
    dynstr = b"\0libc.so.6\0foo\0GLIBC_2.2.5\0"
    dynamic = struct.pack("<qQqQ", 1, 1, 0, 0)
    dynsym = b"\0" * 24 + struct.pack("<IBBHQQ", 11, 0x12, 0, 0, 0, 0)
    versym = struct.pack("<HH", 0, 2)
    verneed = struct.pack("<HHIII", 1, 1, 1, 16, 0) + struct.pack("<IHHII", 0, 0, 2, 15, 0)
    fat = _fatbin() if fatbin is None else fatbin
    blobs = [shstr, dynstr, dynamic, dynsym, fat, versym, verneed]
    offsets, body = [], b""
    for blob in blobs:
        offsets.append(64 + len(body))
        body += blob + b"\0" * (-len(blob) % 8)
    shoff = 64 + len(body)
    # (name offset in shstr, type, link, info, entsize) per section after the null one
    meta = [
        (1, 3, 0, 0, 0),
        (11, 3, 0, 0, 0),
        (19, 6, 2, 0, 16),
        (28, 11, 2, 1, 24),
        (36, 1, 0, 0, 0),
        (47, 0x6FFFFFFF, 4, 0, 2),
        (60, 0x6FFFFFFE, 2, 1, 0),
    ]
    headers = b"\0" * _SH.size + b"".join(
        _SH.pack(n, t, 0, 0, off, len(blob), link, info, 8, ent)
        for (n, t, link, info, ent), off, blob in zip(meta, offsets, blobs, strict=True)
    )
    head = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    head += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 8, 1)
    return head + body + headers


def test_the_sample_elf_reads() -> None:
    # guards the fuzzing below: its mutations start from a file the reader understands
    path = Path(tempfile.gettempdir()) / f"sm-sample-{os.getpid()}.so"
    path.write_bytes(elf())
    try:
        scan = scan_extension(path)
        counted = scan_extension(path, with_symbols=False)
    finally:
        path.unlink()
    assert scan.dynamic.needed == ("libc.so.6",)
    assert [s.name for s in scan.undefined] == ["foo"]
    assert scan.undefined_count == counted.undefined_count == 1 and counted.symbols == ()
    assert scan.version_needs == {"libc.so.6": ("GLIBC_2.2.5",)}
    assert [e.arch for e in scan.fatbin] == ["sm_90"]


_FOO = elf().index(struct.pack("<IBBH", 11, 0x12, 0, 0))  # foo's .dynsym row


# undefined global, weak, local, GNU unique (counted as global); a defined global
_BINDINGS = [(0x12, 0, 1), (0x22, 0, 0), (0x02, 0, 0), (0xA2, 0, 1), (0x12, 7, 0)]


@pytest.mark.parametrize(("info", "shndx", "count"), _BINDINGS)
def test_the_count_without_names_is_the_undefined_strong_symbols(
    info: int, shndx: int, count: int, tmp_path: Path
) -> None:
    data = bytearray(elf())
    struct.pack_into("<BBH", data, _FOO + 4, info, 0, shndx)
    path = tmp_path / "ext.so"
    path.write_bytes(bytes(data))
    named = scan_extension(path)
    assert scan_extension(path, with_symbols=False).undefined_count == count
    assert named.undefined_count == count == sum(1 for s in named.undefined if not s.weak)


def run_inspect(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["inspect", str(path), "--target", "sm_90"])
    out = capsys.readouterr()
    return rc, out.out + out.err


def _crafted(offset: int, fmt: str, value: int) -> bytes:
    data = bytearray(elf())
    struct.pack_into(fmt, data, offset, value)
    return bytes(data)


_SHOFF = struct.unpack_from("<Q", elf(), 40)[0]
HOSTILE_SO = {
    "empty": b"",
    "truncated": elf()[:40],
    "not-elf": b"just some text, not an ELF object\n",
    "shoff-past-end": _crafted(40, "<Q", 2**63),
    "shentsize-zero": _crafted(58, "<H", 0),
    "shstrndx-out-of-range": _crafted(62, "<H", 0x7000),
    "dynamic-link-out-of-range": _crafted(_SHOFF + 3 * 64 + 40, "<I", 999),
    "versym-offset-huge": _crafted(_SHOFF + 6 * 64 + 24, "<Q", 2**63 + 5),
    "bad-fatbin": elf(fatbin=struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 10**6) + b"\0" * 64),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_SO))
def test_a_hostile_single_so_is_nothing_judged_naming_the_file(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"{name}.so"
    path.write_bytes(HOSTILE_SO[name])
    rc, out = run_inspect(path, capsys)
    assert rc == 6, out
    assert "SM-ELF-UNREADABLE" in out and str(path) in out
    assert "Traceback" not in out and "verdict: nothing-judged" in out


def test_one_crafted_file_does_not_abort_a_directory_scan(tmp_path: Path) -> None:
    for name, data in HOSTILE_SO.items():
        (tmp_path / f"{name}.so").write_bytes(data)
    (tmp_path / "good.so").write_bytes(elf())
    outcome = inspect_path(tmp_path, targets=TARGETS)
    assert [e["relpath"] for e in outcome.data["extensions"]] == ["good.so"]
    unreadable = {f.subject for f in outcome.findings if f.code == "SM-ELF-UNREADABLE"}
    skipped = ("empty", "not-elf")  # not ELF: not an extension at all
    assert unreadable == {str(tmp_path / f"{n}.so") for n in HOSTILE_SO if n not in skipped}
    assert outcome.verdict == "warnings"


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


WHEEL_META = {
    "x-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\n",
    "x-1.0.dist-info/METADATA": b"Name: x\nVersion: 1.0\n",
}


@pytest.mark.parametrize("kind", ["garbage", "empty", "not-a-wheel", "corrupt-member"])
def test_a_bad_wheel_is_nothing_judged(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x-1.0-py3-none-any.whl"
    if kind == "garbage":
        path.write_bytes(b"PK\x03\x04 not really a zip" * 10)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "not-a-wheel":
        _zip(path, {"x/ext.so": elf(), "README": b"hi"})
    else:
        _zip(path, {**WHEEL_META, "x/ext.so": elf()})
        data = bytearray(path.read_bytes())
        at = data.index(b"\x7fELF")
        data[at : at + 8] = b"XXXXXXXX"  # the member no longer matches its CRC
        path.write_bytes(bytes(data))
    rc, out = run_inspect(path, capsys)
    assert rc == 6, out
    assert "SM-WHEEL-UNREADABLE" in out and str(path) in out
    assert "Traceback" not in out and "compatible" not in out


def test_a_wheel_is_inspected_and_named_in_its_paths(tmp_path: Path) -> None:
    path = _zip(tmp_path / "x-1.0-py3-none-any.whl", {**WHEEL_META, "x/ext.so": elf()})
    outcome = inspect_path(path, targets=TARGETS)
    assert outcome.verdict == "compatible"
    assert [e["path"] for e in outcome.data["extensions"]] == [f"{path}!x/ext.so"]


def test_a_pure_python_wheel_is_judged(tmp_path: Path) -> None:
    path = _zip(tmp_path / "x-1.0-py3-none-any.whl", {**WHEEL_META, "x/__init__.py": b""})
    assert inspect_path(path, targets=TARGETS).verdict == "compatible"


def test_a_directory_named_like_a_wheel_is_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.whl"
    path.mkdir()
    (path / "ext.so").write_bytes(elf())
    rc, out = run_inspect(path, capsys)
    assert rc == 0 and "verdict: compatible" in out
    path.joinpath("ext.so").unlink()
    rc, out = run_inspect(path, capsys)
    assert rc == 6 and "SM-NOTHING-JUDGED" in out and "no ELF extension" in out


def test_a_fifo_and_a_device_are_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe.whl"
    os.mkfifo(fifo)  # opening it would block forever
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a device")):
        rc, out = run_inspect(path, capsys)
        assert rc == 6, out
        assert f"{path} is {kind}" in out and "SM-NOTHING-JUDGED" in out
        assert "verdict: nothing-judged" in out


def test_nothing_judged_in_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    rc = main(["inspect", str(tmp_path), "--json"])
    out = capsys.readouterr().out
    assert rc == 6 and json.loads(out)["verdict"] == "nothing-judged"


# --- property: any mutation of an ELF's headers and tables ---------------------------------

_HEADER_FIELDS = st.sampled_from(
    [(f, o) for o in range(16, 64, 2) for f in ("<H",)] + [("<Q", 24), ("<Q", 32), ("<Q", 40)]
)
_BIG = st.one_of(
    st.integers(0, 300), st.sampled_from([2**16 - 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1])
)


_MUTATIONS = (
    st.lists(st.tuples(st.integers(0, 8 * 64 - 1), _BIG), max_size=6),
    st.lists(st.tuples(_HEADER_FIELDS, st.integers(0, 2**16 - 1)), max_size=2),
    st.lists(st.tuples(st.integers(64, _SHOFF - 1), st.integers(0, 255)), max_size=8),
    st.integers(0, 4000),
)


def _mutated(
    section_fields: list[tuple[int, int]],
    header_fields: list[tuple[tuple[str, int], int]],
    body_bytes: list[tuple[int, int]],
    cut: int,
) -> Path:
    """The sample ELF with section headers (offsets, sizes, links, counts), ELF header
    fields and table bytes set to anything, written to a file of this process."""
    data = bytearray(elf())
    for at, value in section_fields:
        at -= at % 8  # 8-byte aligned inside the section headers
        struct.pack_into("<Q", data, _SHOFF + at, value % 2**64)
    for (fmt, at), value in header_fields:
        struct.pack_into(fmt, data, at, value)
    for at, value in body_bytes:
        data[at] = value
    if cut:
        del data[-cut:]
    path = Path(tempfile.gettempdir()) / f"sm-fuzz-{os.getpid()}.so"
    path.write_bytes(bytes(data))
    return path


@settings(max_examples=300, deadline=2000)
@given(*_MUTATIONS)
def test_any_mutated_elf_is_a_scan_or_an_elferror(
    section_fields: list[tuple[int, int]],
    header_fields: list[tuple[tuple[str, int], int]],
    body_bytes: list[tuple[int, int]],
    cut: int,
) -> None:
    """Any mutation: a scan, or an ELFError naming the file, within 2 s."""
    path = _mutated(section_fields, header_fields, body_bytes, cut)
    try:
        full, counted = _scan_or_error(path, True), _scan_or_error(path, False)
    finally:
        path.unlink()
    # `inspect` counts symbols without their names: the same files, the same errors
    if isinstance(full, ExtensionScan):
        assert counted == full._replace(symbols=())
    else:
        assert counted == full


@settings(max_examples=300, deadline=2000)
@given(*_MUTATIONS, st.lists(_BIG, min_size=1, max_size=4))
def test_reading_in_place_reads_what_the_mapping_holds(
    section_fields: list[tuple[int, int]],
    header_fields: list[tuple[tuple[str, int], int]],
    body_bytes: list[tuple[int, int]],
    cut: int,
    offsets: list[int],
) -> None:
    """`inspect` reads a string of a table without decoding the table, and fatbin headers
    with pread rather than through the mapping: on any mutated file
    both give what the whole-table and mapped readings give, or fail the same way."""
    path = _mutated(section_fields, header_fields, body_bytes, cut)
    try:
        try:
            elf_file = ELFFile(path)
        except ELFError:
            return  # headers no reader gets past: the other test covers them
        with elf_file as f:
            for index in range(len(f.sections)):
                for offset in offsets:
                    assert f._string(index, offset) == f._cstr(f._strtab(index), offset)
                f._strtab_cache.clear()
            try:
                sec = f.section(".nv_fatbin")
            except ELFError:
                return  # its section names are unreadable: no section is found by name
            if sec is not None:
                start, end = sec.offset, sec.offset + sec.size
                assert _entries_or_error(lambda: read_fatbin(f.read_at, start, end)) == (
                    _entries_or_error(lambda: parse_fatbin(f.buffer, start, end))
                )
    finally:
        path.unlink()


def _entries_or_error(read: Callable[[], list[FatbinEntry]]) -> list[FatbinEntry] | str:
    try:
        return read()
    except (FatbinError, struct.error, OverflowError, ValueError) as exc:
        return type(exc).__name__


def _scan_or_error(path: Path, with_symbols: bool) -> ExtensionScan | str:
    try:
        return scan_extension(path, with_symbols=with_symbols)
    except ELFError as exc:
        assert str(path) in str(exc)
        return str(exc)


@settings(max_examples=100, deadline=2000)
@given(st.binary(max_size=600), st.integers(0, 600), st.binary(max_size=40))
def test_any_wheel_bytes_are_a_verdict_or_nothing_judged(
    tail: bytes, at: int, patch: bytes
) -> None:
    """A real small wheel with bytes overwritten or appended: an outcome, never an
    exception, and never "compatible" without having read something."""
    tmp = Path(tempfile.gettempdir()) / f"sm-fuzz-{os.getpid()}"
    tmp.mkdir(exist_ok=True)
    path = _zip(tmp / "x-1.0-py3-none-any.whl", {**WHEEL_META, "x/ext.so": elf()})
    data = bytearray(path.read_bytes())
    data[at : at + len(patch)] = patch
    path.write_bytes(bytes(data) + tail)
    try:
        outcome = inspect_path(path, targets=TARGETS)
    finally:
        path.unlink()
    if outcome.verdict != "nothing-judged":
        assert outcome.data["extensions"] or outcome.data["inventory"]


def test_a_zip_bomb_wheel_is_not_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 611 KB wheel unpacked a 600 MB .so: 64 MiB of zeros
    deflate to 64 KB, a ratio no real extension has."""
    path = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in WHEEL_META.items():
            zf.writestr(name, data)
        zf.writestr("x/big.so", b"\0" * (64 << 20))
    assert path.stat().st_size < 1 << 20
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    tempfile.tempdir = None  # read TMPDIR again
    try:
        rc, out = run_inspect(path, capsys)
    finally:
        tempfile.tempdir = None
    assert rc == 6 and "SM-WHEEL-UNREADABLE" in out
    assert "x/big.so would unpack 67108864 bytes from" in out and "zip bomb" in out
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing unpacked, nothing left


def _inspect_in(
    tmp_path: Path, path: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch
) -> tuple[int, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    mp.setenv("TMPDIR", str(tmp))
    tempfile.tempdir = None  # read TMPDIR again
    try:
        rc, out = run_inspect(path, capsys)
    finally:
        tempfile.tempdir = None
    assert list(tmp.iterdir()) == []  # nothing unpacked, nothing left
    return rc, out


def test_a_wheel_over_the_total_unpack_bound_is_not_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Members each under the ratio check's size still add up: the total is bounded."""
    from stackmatrix.check import _wheel

    monkeypatch.setattr(_wheel, "MAX_UNPACK_TOTAL", 1 << 20)
    path = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in WHEEL_META.items():
            zf.writestr(name, data)
        for k in range(4):
            zf.writestr(f"x/part{k}.so", b"\0" * (512 << 10))
    rc, out = _inspect_in(tmp_path, path, capsys, monkeypatch)
    assert rc == 6 and "SM-WHEEL-UNREADABLE" in out
    assert "a wheel may unpack to" in out


def test_a_wheel_with_too_many_members_is_not_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stackmatrix.check import _wheel

    monkeypatch.setattr(_wheel, "MAX_MEMBERS", 10)
    members = {**WHEEL_META, **{f"x/m{k}.so": b"" for k in range(20)}}
    path = _zip(tmp_path / "x-1.0-py3-none-any.whl", members)
    rc, out = _inspect_in(tmp_path, path, capsys, monkeypatch)
    assert rc == 6 and "SM-WHEEL-UNREADABLE" in out
    assert "over the 10 a wheel may have" in out
