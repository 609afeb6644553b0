"""A tar stream (`docker export`'s stdout) unpacked under one directory, read once, in
order, without the archive ever being written to disk.

What it guarantees, whatever the archive holds:

- every member lands under `dest`: a name with `..` is refused, a leading `/` is
  dropped (as GNU tar does);
- nothing is written through a symlink: every directory on a member's way is opened
  with O_NOFOLLOW, and files are created with O_EXCL | O_NOFOLLOW (an earlier member
  of the same name is unlinked first, never followed). Symlinks themselves are kept as
  the image has them, absolute ones too: the scan follows them inside the root
  (`check.libs.resolve_in_root`, `check.nvcc.resolve`);
- a hard link may only name a member already unpacked under `dest`, reached without
  symlinks;
- no device node or FIFO is made, and nothing under the top-level `dev/`;
- no setuid, setgid or sticky bit and no group/other write bit; the owner can always
  read, write (and enter) what is unpacked, so it can be removed again; owners are
  not copied (the caller's uid owns everything, like `tar --no-same-owner`);
- bounded: at most `Limits.max_bytes` of file data and `Limits.max_members` members.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

_CHUNK = 1 << 16  # tarfile copies its buffer's rest per header read: small is faster
_SKIPPED_TOP = frozenset({"dev"})  # the container's /dev: device nodes, nothing to scan
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafeArchive(Exception):
    """A member would land outside the destination, or the archive is over its limits."""


@dataclass(frozen=True, kw_only=True)
class Limits:
    max_bytes: int  # file data, summed over the members
    max_members: int = 5_000_000


@dataclass(frozen=True, kw_only=True)
class Unpacked:
    members: int  # read from the archive, skipped ones included
    bytes: int  # of file data written
    skipped: int  # device nodes, FIFOs, dev/ contents, unknown member types


def unpack(stream: IO[bytes], dest: Path, *, limits: Limits) -> Unpacked:
    """Unpack the tar archive read from `stream` into the existing directory `dest`.

    Raises UnsafeArchive, tarfile.TarError (a truncated or malformed stream) or OSError;
    what was unpacked before the error stays for the caller to remove."""
    root_fd = os.open(dest, _DIR_FLAGS)
    try:
        return _Unpacker(root_fd, limits).run(stream)
    finally:
        os.close(root_fd)


def member_parts(name: str) -> tuple[str, ...]:
    """`name` as path parts under the destination; UnsafeArchive for a `..`."""
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise UnsafeArchive(f"the archive member {name!r} points outside the destination")
    return parts


class _Unpacker:
    def __init__(self, root_fd: int, limits: Limits) -> None:
        self.root_fd = root_fd
        self.limits = limits
        self.members = 0
        self.bytes = 0
        self.skipped = 0
        # the directory of the previous member: members come grouped by directory
        self._cached: tuple[tuple[str, ...], int] | None = None

    def run(self, stream: IO[bytes]) -> Unpacked:
        try:
            # tarfile's stream mode reads with `read(size)` and nothing else
            pipe = cast(IO[bytes], _Pipe(stream))
            with tarfile.open(fileobj=pipe, mode="r|", bufsize=_CHUNK) as tar:
                for member in tar:
                    self._one(tar, member)
        finally:
            self._drop_cache()
        return Unpacked(members=self.members, bytes=self.bytes, skipped=self.skipped)

    def _one(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise UnsafeArchive(f"the archive has over {self.limits.max_members} members")
        parts = member_parts(member.name)
        if not parts:
            return  # the root itself ("./")
        if (parts[0] in _SKIPPED_TOP and len(parts) > 1) or not _wanted(member):
            self.skipped += 1
            return
        if member.isreg():
            self.bytes += member.size
            if self.bytes > self.limits.max_bytes:
                raise UnsafeArchive(
                    f"the archive holds over {self.limits.max_bytes} bytes of files "
                    f"(at {member.name!r})"
                )
        parent = self._dir(parts[:-1], member.name)
        name = parts[-1]
        if member.isdir():
            _make_dir(parent, name, member)
        elif member.isreg():
            _make_file(parent, name, member, tar)
        elif member.issym():
            _replace_non_dir(parent, name, member.name)
            os.symlink(member.linkname, name, dir_fd=parent)
            os.utime(name, (member.mtime, member.mtime), dir_fd=parent, follow_symlinks=False)
        else:  # a hard link: to a member unpacked earlier, never through a symlink
            self._make_hardlink(parent, name, member)

    def _make_hardlink(self, parent: int, name: str, member: tarfile.TarInfo) -> None:
        target = member_parts(member.linkname)
        if not target:
            raise UnsafeArchive(f"the hard link {member.name!r} has no target")
        _replace_non_dir(parent, name, member.name)
        source = _open_dir(self.root_fd, target[:-1], member.linkname, create=False)
        try:
            os.link(target[-1], name, src_dir_fd=source, dst_dir_fd=parent, follow_symlinks=False)
        finally:
            os.close(source)

    def _dir(self, parts: tuple[str, ...], member_name: str) -> int:
        if self._cached is not None and self._cached[0] == parts:
            return self._cached[1]
        fd = _open_dir(self.root_fd, parts, member_name, create=True)
        self._drop_cache()
        self._cached = (parts, fd)
        return fd

    def _drop_cache(self) -> None:
        if self._cached is not None:
            os.close(self._cached[1])
            self._cached = None


class _Pipe:
    """What has arrived, up to `size`: tarfile asks for a whole buffer, and a pipe's
    `read(size)` would wait for all of it (a member the archive ends with, or a bad
    one, would then be seen only when the writer writes more or exits)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._read = getattr(stream, "read1", stream.read)

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._read(size)
        return data


def _wanted(member: tarfile.TarInfo) -> bool:
    # devices and FIFOs are skipped; so is any type tarfile can't name (isdev covers
    # character, block and FIFO members)
    return not member.isdev() and (
        member.isdir() or member.isreg() or member.issym() or member.islnk()
    )


def _open_dir(root_fd: int, parts: tuple[str, ...], member_name: str, *, create: bool) -> int:
    """The directory `parts` under the root, opened without following any symlink
    (missing ones are made when `create`, as tar does for a member whose directory
    comes later or not at all)."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise UnsafeArchive(
                        f"the archive member {member_name!r} goes through {part!r}, which is "
                        "a symlink or not a directory; refusing to follow it"
                    ) from exc
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make_dir(parent: int, name: str, member: tarfile.TarInfo) -> None:
    with contextlib.suppress(FileExistsError):  # _open_dir refuses a non-directory below
        os.mkdir(name, 0o700, dir_fd=parent)
    fd = _open_dir(parent, (name,), member.name, create=False)
    try:
        os.fchmod(fd, _safe_mode(member.mode) | stat.S_IRWXU)
    finally:
        os.close(fd)


def _make_file(parent: int, name: str, member: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
    _replace_non_dir(parent, name, member.name)
    source = tar.extractfile(member)
    assert source is not None  # a regular member always has data
    fd = os.open(name, _FILE_FLAGS, 0o600, dir_fd=parent)
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(source, out, _CHUNK)
        out.flush()
        os.fchmod(fd, _safe_mode(member.mode) | stat.S_IRUSR | stat.S_IWUSR)
        os.utime(fd, (member.mtime, member.mtime))


def _replace_non_dir(parent: int, name: str, member_name: str) -> None:
    """Unlink an earlier member called `name` (a later one wins, as with tar); the
    unlink removes a symlink itself, never what it points to."""
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise UnsafeArchive(f"the archive member {member_name!r} would replace a directory")
    os.unlink(name, dir_fd=parent)


def _safe_mode(mode: int) -> int:
    """Permission bits without setuid/setgid/sticky and without group/other write."""
    return mode & 0o755
