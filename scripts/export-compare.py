"""Disk and time of an image's export, the old way against the streamed one.

usage: python scripts/export-compare.py IMAGE WORK_DIR

One container of IMAGE is exported twice, back to back: (1) as the docker backend did
until commit a54274c, `docker export -o FILE` then `tar -x` of that file, and (2) with
the backend's streamed export (`_docker_rootfs.export_rootfs`). For each it prints the
seconds, the peak extra disk (free space of WORK_DIR's filesystem, sampled every 0.2 s)
and what was kept at the end; both trees are removed after. Needs about 2 x the image's
size free. Uses $STACKMATRIX_DOCKER or `docker`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from stackmatrix.builder import _docker_rootfs  # noqa: E402  (the checkout's own package)


def measured(fn: Callable[[], None], where: Path) -> tuple[float, float, float]:
    """(seconds, peak extra GB, kept GB) of `fn`."""
    start_free = shutil.disk_usage(where).free
    low = [start_free]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            low[0] = min(low[0], shutil.disk_usage(where).free)
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    began = time.monotonic()
    try:
        fn()
    finally:
        stop.set()
        sampler.join()
    kept = start_free - shutil.disk_usage(where).free
    return time.monotonic() - began, (start_free - low[0]) / 1e9, kept / 1e9


def main(image: str, work: Path) -> None:
    docker = os.environ.get("STACKMATRIX_DOCKER") or "docker"
    work.mkdir(parents=True, exist_ok=True)
    image_id = subprocess.run(
        [docker, "image", "inspect", "-f", "{{.Id}}", image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    log = work / "export.log"
    owner = "stackmatrix.owner=stackmatrix-export-compare"
    with _docker_rootfs.created_container(
        docker, image, ["true"], log_path=log, owner=owner
    ) as container:

        def tar_file() -> None:
            tar, root = work / "old.tar", work / "old-root"
            root.mkdir()
            subprocess.run([docker, "export", "-o", str(tar), container], check=True)
            subprocess.run(
                [
                    "tar",
                    "-x",
                    "-f",
                    str(tar),
                    "-C",
                    str(root),
                    "--no-same-owner",
                    "--exclude=dev/*",
                ],
                check=True,
            )
            tar.unlink()

        def streamed() -> None:
            _docker_rootfs.export_rootfs(
                docker, container, image_id, work_dir=work / "new", log_path=log
            )

        for name, fn in (("docker export -o FILE, tar -x", tar_file), ("streamed", streamed)):
            try:
                secs, peak, kept = measured(fn, work)
            finally:
                shutil.rmtree(work / "old-root", ignore_errors=True)
                shutil.rmtree(work / "new", ignore_errors=True)
                (work / "old.tar").unlink(missing_ok=True)
            print(f"{name}: {secs:.1f} s, peak extra disk {peak:.2f} GB, kept {kept:.2f} GB")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], Path(sys.argv[2]))
