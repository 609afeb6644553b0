"""An image's filesystem exported to a host directory, so the static compat scan sees
the image's own system libraries (not the host's). Cached by image id."""

from __future__ import annotations

import logging
import shutil
import tarfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from stackmatrix import _proc
from stackmatrix.builder import _docker_cli, _untar

log = logging.getLogger(__name__)

EXPORT_TIMEOUT_S = 3600.0
CREATE_TIMEOUT_S = 600.0
_PREFIX = "rootfs-"
_DONE = ".stackmatrix-export-complete"
_SLACK_BYTES = 1 << 30
_DEFAULT_MAX_BYTES = 1 << 40  # the image's size unknown: 1 TiB


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
    containers) under `work_dir`; exported once per image id.

    `docker export` streams straight into the unpacking (`_untar`: nothing outside the
    root, no device nodes, bounded), so no tar file is ever written: the peak disk use
    is the unpacked tree alone. A failure or Ctrl-C removes the partial tree and
    leaves no `docker export` running."""
    dest = rootfs_dir(work_dir, image_id)
    if (dest / _DONE).is_file():
        return dest
    _prune_others(work_dir, keep=dest)
    tmp = dest.with_name(dest.name + ".partial")
    for stale in (tmp, dest):  # an interrupted earlier export of this image
        if stale.exists():
            shutil.rmtree(stale)
    tmp.mkdir(parents=True)
    try:
        unpacked = _stream_into(docker, container, tmp, _limits(docker, image_id), log_path)
        (tmp / _DONE).write_text(image_id + "\n")
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info(
        "exported %s: %d members, %.2f GB of files, %d skipped (devices, dev/)",
        image_id[:19],
        unpacked.members,
        unpacked.bytes / 1e9,
        unpacked.skipped,
    )
    return dest


def _stream_into(
    docker: str, container: str, dest: Path, limits: _untar.Limits, log_path: Path
) -> _untar.Unpacked:
    child: _proc.Reading | None = None
    try:
        with _proc.reading(
            [docker, "export", container], log_path=log_path, timeout=EXPORT_TIMEOUT_S
        ) as child:
            unpacked = _untar.unpack(child.stdout, dest, limits=limits)
    except (tarfile.TarError, _untar.UnsafeArchive, OSError) as exc:
        raise ExportError(_why(child, exc)) from exc
    assert child.result is not None
    if not child.result.ok:
        raise ExportError(_why(child, None))
    return unpacked


def _why(child: _proc.Reading | None, exc: BaseException | None) -> str:
    """The export's failure when it failed (a truncated stream follows from it),
    otherwise the unpacking's."""
    res = child.result if child is not None else None
    if res is not None and res.timed_out:
        return f"docker export timed out after {EXPORT_TIMEOUT_S:.0f}s"
    if res is not None and (res.returncode > 0 or exc is None):
        return f"docker export failed (exit {res.returncode}): {res.tail(5)}"
    return f"unpacking the exported image failed: {exc}"


def _limits(docker: str, image_id: str) -> _untar.Limits:
    """Room for the image's files twice over (its size counts each layer's files;
    the export has each path once, plus what the inventory container wrote)."""
    image = _docker_cli.image_info(docker, image_id)
    size = image.size if image else 0
    return _untar.Limits(max_bytes=2 * size + _SLACK_BYTES if size else _DEFAULT_MAX_BYTES)


def _prune_others(work_dir: Path, *, keep: Path) -> None:
    """Older exports of this cell's earlier images: only ever ours, under work_dir."""
    if not work_dir.is_dir():
        return
    for p in work_dir.iterdir():
        if p.name.startswith(_PREFIX) and p != keep and p.is_dir():
            log.info("removing the stale image export %s", p)
            shutil.rmtree(p, ignore_errors=True)
