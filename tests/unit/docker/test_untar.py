"""The streamed unpacking of `docker export` (builder/_untar.py): what lands where, and what
a hostile archive cannot do."""

from __future__ import annotations

import io
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from stackmatrix.builder import _untar

BIG = _untar.Limits(max_bytes=1 << 30)
Add = Callable[[tarfile.TarFile], None]


def _stream(*adds: Add) -> io.BytesIO:
    """A tar read once, front to back, like a pipe (it can't seek)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for add in adds:
            add(tar)
    return _OneWay(buf.getvalue())


class _OneWay(io.BytesIO):
    def seekable(self) -> bool:
        return False

    def seek(self, *args: object) -> int:
        raise io.UnsupportedOperation("a pipe")


def file(name: str, data: bytes = b"x", mode: int = 0o644, mtime: int = 1_700_000_000) -> Add:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), mode, mtime
        tar.addfile(info, io.BytesIO(data))

    return add


def entry(name: str, kind: bytes, linkname: str = "", mode: int = 0o755) -> Add:
    def add(tar: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.mode = kind, linkname, mode
        tar.addfile(info)

    return add


def directory(name: str, mode: int = 0o755) -> Add:
    return entry(name, tarfile.DIRTYPE, mode=mode)


def symlink(name: str, target: str) -> Add:
    return entry(name, tarfile.SYMTYPE, target, 0o777)


def hardlink(name: str, target: str) -> Add:
    return entry(name, tarfile.LNKTYPE, target, 0o644)


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    d = tmp_path / "root"
    d.mkdir()
    return d


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A host file that no archive may touch."""
    o = tmp_path / "outside"
    o.mkdir()
    (o / "victim").write_text("host\n")
    return o


def test_an_image_tree_unpacks_as_the_image_has_it(dest: Path) -> None:
    got = _untar.unpack(
        _stream(
            directory("usr"),
            directory("usr/lib"),
            file("usr/lib/libc.so.6", b"\x7fELF", 0o755),
            symlink("lib", "usr/lib"),
            directory("usr/local/cuda-13.0/bin"),
            symlink("usr/local/cuda", "/usr/local/cuda-13.0"),  # absolute, kept as is
            hardlink("usr/lib/libc-2.36.so", "usr/lib/libc.so.6"),
            file("etc/debian_version", b"12.8\n"),  # its directory comes nowhere
            directory("proc", 0o555),
        ),
        dest,
        limits=BIG,
    )
    assert (got.members, got.bytes, got.skipped) == (9, 9, 0)
    assert (dest / "usr/lib/libc.so.6").read_bytes() == b"\x7fELF"
    assert (dest / "lib").readlink() == Path("usr/lib")
    assert (dest / "usr/local/cuda").readlink() == Path("/usr/local/cuda-13.0")
    libc = (dest / "usr/lib/libc.so.6").stat()
    assert (dest / "usr/lib/libc-2.36.so").stat().st_ino == libc.st_ino
    assert (dest / "etc/debian_version").read_text() == "12.8\n"
    assert stat.S_IMODE((dest / "usr/lib/libc.so.6").stat().st_mode) == 0o755
    assert (dest / "usr/lib/libc.so.6").stat().st_mtime == 1_700_000_000
    # the owner can always remove what was unpacked
    assert stat.S_IMODE((dest / "proc").stat().st_mode) == 0o755


@pytest.mark.parametrize("name", ["../victim", "usr/../../victim", "/../victim"])
def test_a_name_with_dotdot_is_refused(dest: Path, outside: Path, name: str) -> None:
    with pytest.raises(_untar.UnsafeArchive, match="outside the destination"):
        _untar.unpack(_stream(file(name, b"pwned")), dest, limits=BIG)
    assert (outside / "victim").read_text() == "host\n"


def test_a_leading_slash_lands_inside(dest: Path) -> None:
    _untar.unpack(_stream(file("/etc/motd", b"hi")), dest, limits=BIG)
    assert (dest / "etc/motd").read_bytes() == b"hi"


@pytest.mark.parametrize("target", ["OUTSIDE", "../outside", "../../outside"])
def test_nothing_is_written_through_a_symlinked_directory(
    dest: Path, outside: Path, target: str
) -> None:
    target = str(outside) if target == "OUTSIDE" else target
    archive = _stream(symlink("etc", target), file("etc/victim", b"pwned"))
    with pytest.raises(_untar.UnsafeArchive, match="symlink or not a directory"):
        _untar.unpack(archive, dest, limits=BIG)
    assert (outside / "victim").read_text() == "host\n"


def test_a_file_replaces_a_symlink_of_its_name_without_following_it(
    dest: Path, outside: Path
) -> None:
    archive = _stream(symlink("victim", str(outside / "victim")), file("victim", b"mine"))
    _untar.unpack(archive, dest, limits=BIG)
    assert (outside / "victim").read_text() == "host\n"
    assert not (dest / "victim").is_symlink() and (dest / "victim").read_bytes() == b"mine"


def test_a_hard_link_can_only_name_a_member_inside(dest: Path, outside: Path) -> None:
    with pytest.raises(_untar.UnsafeArchive, match="outside the destination"):
        _untar.unpack(_stream(hardlink("x", "../outside/victim")), dest, limits=BIG)
    # an absolute target is a member's name too: here one that doesn't exist
    with pytest.raises(FileNotFoundError):
        _untar.unpack(_stream(hardlink("y", str(outside / "victim"))), dest, limits=BIG)
    # nor reach a file through a symlinked directory
    archive = _stream(symlink("out", str(outside)), hardlink("z", "out/victim"))
    with pytest.raises(_untar.UnsafeArchive, match="symlink or not a directory"):
        _untar.unpack(archive, dest, limits=BIG)
    assert (outside / "victim").stat().st_nlink == 1


def test_devices_fifos_and_dev_are_skipped(dest: Path) -> None:
    got = _untar.unpack(
        _stream(
            directory("dev"),
            entry("dev/console", tarfile.CHRTYPE),
            file("dev/shm/leftover"),
            entry("usr/null", tarfile.CHRTYPE),
            entry("usr/sda", tarfile.BLKTYPE),
            entry("usr/fifo", tarfile.FIFOTYPE),
            file("usr/share/dev/kept"),  # only the top-level dev/ is skipped
        ),
        dest,
        limits=BIG,
    )
    assert got.skipped == 5
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == [
        "dev",
        "usr",
        "usr/share",
        "usr/share/dev",
        "usr/share/dev/kept",
    ]


def test_setuid_and_group_write_bits_are_dropped(dest: Path) -> None:
    _untar.unpack(
        _stream(file("bin/su", mode=0o4755), directory("tmp", 0o1777), file("g", mode=0o2664)),
        dest,
        limits=BIG,
    )
    assert stat.S_IMODE((dest / "bin/su").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "tmp").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "g").stat().st_mode) == 0o644


def test_limits_bound_the_bytes_and_the_members(dest: Path) -> None:
    archive = _stream(file("a", b"x" * 600), file("b", b"x" * 600))
    with pytest.raises(_untar.UnsafeArchive, match="over 1000 bytes"):
        _untar.unpack(archive, dest, limits=_untar.Limits(max_bytes=1000))
    assert not (dest / "b").exists()  # refused before it was written
    many = _stream(*(file(f"f{i}") for i in range(5)))
    with pytest.raises(_untar.UnsafeArchive, match="over 3 members"):
        _untar.unpack(many, dest, limits=_untar.Limits(max_bytes=1 << 20, max_members=3))


def test_a_truncated_stream_is_an_error(dest: Path) -> None:
    data = _stream(file("big", b"x" * 100_000)).getvalue()
    with pytest.raises(tarfile.TarError):
        _untar.unpack(_OneWay(data[:50_000]), dest, limits=BIG)


def test_a_member_cannot_replace_a_directory(dest: Path) -> None:
    with pytest.raises(_untar.UnsafeArchive, match="would replace a directory"):
        _untar.unpack(_stream(directory("etc"), symlink("etc", "/")), dest, limits=BIG)
