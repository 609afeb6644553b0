"""Unpacking a wheel for `inspect`: only what the checks read, bounded.

Apart from inspection.py so that inspecting a directory or a .so does not import
zipfile, zlib and shutil.
"""

from __future__ import annotations

import shutil
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

# what a corrupt or crafted zip raises on open or extraction
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    NotImplementedError,
    RuntimeError,
    EOFError,
    OSError,
    ValueError,
)


def extract_wheel(wheel: Path, dest: Path) -> str | None:
    """Only what the checks read: ELF objects and the .dist-info metadata.

    Returns why it is not a readable wheel (None when it is): not a zip, a corrupt
    member, or a zip without a `*.dist-info/WHEEL`.
    """
    try:
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
            if not any(_is_wheel_file(i.filename) for i in infos):
                return f"{wheel} is a zip without a *.dist-info/WHEEL: not a wheel; nothing judged"
            wanted = [i for i in infos if _wanted(i)]
            too_big = _count_bound(infos) or _unpack_bound(wanted, dest)
            if too_big is not None:
                return f"{wheel}: {too_big}; not unpacked"
            for info in wanted:
                zf.extract(info, dest)
    except _ZIP_ERRORS as exc:
        return f"{wheel} is not a readable wheel ({type(exc).__name__}: {exc})"
    return None


# A member may claim no more than this many times its compressed size (real .so files
# compress 2-5x; a 611 KB wheel once unpacked a 600 MB .so).
MAX_UNPACK_RATIO = 100
_RATIO_FROM = 16 << 20  # members smaller than this are never a problem


# Whatever each member's ratio, a wheel unpacks no more than this in all: members just
# under _RATIO_FROM each (1.6 MB of wheel once unpacked 1.5 GB) pass the ratio check one by
# one. The largest real wheels (torch with CUDA) unpack to a few GiB.
MAX_UNPACK_TOTAL = 8 << 30
MAX_MEMBERS = 200_000  # torch has about 20,000 files


def _count_bound(infos: Sequence[zipfile.ZipInfo]) -> str | None:
    if len(infos) > MAX_MEMBERS:
        return f"it has {len(infos)} members, over the {MAX_MEMBERS} a wheel may have"
    return None


def _unpack_bound(infos: Sequence[zipfile.ZipInfo], dest: Path) -> str | None:
    """Why unpacking `infos` is refused: a zip-bomb ratio, a total over MAX_UNPACK_TOTAL,
    or more than the free space.

    zipfile stops each member at its declared size, so the declared sizes bound what
    extraction writes."""
    for info in infos:
        if info.file_size > _RATIO_FROM and info.file_size > MAX_UNPACK_RATIO * max(
            info.compress_size, 1
        ):
            return (
                f"{info.filename} would unpack {info.file_size} bytes from "
                f"{info.compress_size} (over {MAX_UNPACK_RATIO}x: a zip bomb?)"
            )
    total = sum(i.file_size for i in infos)
    if total > MAX_UNPACK_TOTAL:
        return (
            f"its extensions and metadata unpack to {total} bytes, over the "
            f"{MAX_UNPACK_TOTAL >> 30} GiB a wheel may unpack to (a zip bomb?)"
        )
    free = shutil.disk_usage(dest).free
    if total > free:
        return f"its extensions unpack to {total} bytes, more than the {free} free in {dest}"
    return None


def _is_wheel_file(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "WHEEL"


def _wanted(info: zipfile.ZipInfo) -> bool:
    name = info.filename
    if info.is_dir() or ".." in Path(name).parts or name.startswith("/"):
        return False
    return name.endswith(".so") or ".so." in name or ".dist-info/" in name
