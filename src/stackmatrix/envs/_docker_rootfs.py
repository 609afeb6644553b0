"""An image's filesystem exported to a host directory, so the static compat scan sees
the image's own system libraries (not the host's). Cached by image id."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from stackmatrix import _proc

log = logging.getLogger(__name__)

EXPORT_TIMEOUT_S = 3600.0
CREATE_TIMEOUT_S = 600.0
_PREFIX = "rootfs-"
_DONE = ".stackmatrix-export-complete"


class ExportError(Exception):
    """The image's filesystem could not be exported."""


def rootfs_dir(work_dir: Path, image_id: str) -> Path:
    return work_dir / f"{_PREFIX}{image_id.removeprefix('sha256:')[:12]}"


@contextmanager
def created_container(
    docker: str, image: str, argv: Sequence[str], *, log_path: Path, owner: str
) -> Iterator[str]:
    """A stopped container of `image` (no network) that is removed when the block exits.

    One container serves both the inventory (started once, attached) and the export,
    because creating a container copies the whole image on the vfs storage driver."""
    created = _proc.run(
        [docker, "create", "-i", "--network=none", "--label", owner, image, *argv],
        log_path=log_path,
        timeout=CREATE_TIMEOUT_S,
    )
    if not created.ok:
        raise ExportError(f"docker create {image} failed: {created.tail(5)}")
    container = created.output.strip().splitlines()[-1]
    try:
        yield container
    finally:
        _proc.run([docker, "rm", "-f", container], log_path=log_path, timeout=CREATE_TIMEOUT_S)


def start_attached(
    docker: str, container: str, stdin_data: bytes, timeout: float
) -> _proc.ProcResult:
    return _proc.run(
        [docker, "start", "-a", "-i", container], stdin_data=stdin_data, timeout=timeout
    )


def export_rootfs(
    docker: str, container: str, image_id: str, *, work_dir: Path, log_path: Path
) -> Path:
    """The exported filesystem of `image_id` (taken from `container`, one of its
    containers) under `work_dir`; exported once per image id."""
    dest = rootfs_dir(work_dir, image_id)
    if (dest / _DONE).is_file():
        return dest
    _prune_others(work_dir, keep=dest)
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    tar = work_dir / f"{dest.name}.tar"
    try:
        res = _proc.run(
            [docker, "export", "-o", str(tar), container],
            log_path=log_path,
            timeout=EXPORT_TIMEOUT_S,
        )
        if not res.ok:
            raise ExportError(f"docker export failed: {res.tail(5)}")
        # no device nodes or owners: the scan reads files, and this works unprivileged too
        res = _proc.run(
            ["tar", "-x", "-f", str(tar), "-C", str(tmp), "--no-same-owner", "--exclude=dev/*"],
            log_path=log_path,
            timeout=EXPORT_TIMEOUT_S,
        )
        if not res.ok:
            raise ExportError(f"unpacking the exported image failed: {res.tail(5)}")
    finally:
        tar.unlink(missing_ok=True)
    (tmp / _DONE).write_text(image_id + "\n")
    tmp.rename(dest)
    return dest


def _prune_others(work_dir: Path, *, keep: Path) -> None:
    """Older exports of this cell's earlier images: only ever ours, under work_dir."""
    if not work_dir.is_dir():
        return
    for p in work_dir.iterdir():
        if p.name.startswith(_PREFIX) and p != keep and p.is_dir():
            log.info("removing the stale image export %s", p)
            shutil.rmtree(p, ignore_errors=True)
