"""A real `docker export` streamed into the unpacking: the image's tree, no
tar file on disk, and after a failure or Ctrl-C neither a partial tree nor a running
`docker export`."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from stackmatrix import _proc
from stackmatrix.builder import _docker_cli, _docker_rootfs, _untar

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def _export(engine: _docker_cli.ContainerEngine, image: str, work: Path) -> Path:
    image_info = _docker_cli.inspect_image(engine.docker, image)
    assert image_info is not None
    with _docker_rootfs.created_container(
        engine.docker,
        image,
        ["true"],
        log_path=work / "build.log",
        owner="stackmatrix.owner=stackmatrix-test",
    ) as container:
        return _docker_rootfs.export_rootfs(
            engine.docker,
            container,
            str(image_info["Id"]),
            work_dir=work,
            log_path=work / "build.log",
        )


def test_the_export_streams_the_image_tree(
    engine: _docker_cli.ContainerEngine, base_image: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    root = _export(engine, base_image, work)
    assert (root / "etc/debian_version").read_text().startswith("12.")
    assert (root / "usr/bin/python3").exists()
    # merged /usr: the image's own symlinks, kept as they are
    assert (root / "lib").is_symlink() and (root / "lib").readlink() == Path("usr/lib")
    assert (root / "dev").is_dir() and not any((root / "dev").iterdir())
    assert sorted(p.name for p in work.iterdir()) == ["build.log", root.name]  # no tar file
    assert "[exit 0]" in (work / "build.log").read_text()


def test_ctrl_c_during_a_real_export_leaves_nothing(
    engine: _docker_cli.ContainerEngine,
    base_image: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_proc, "_INTERRUPTED", threading.Event())
    monkeypatch.setattr(_proc, "_RUNNING", set())
    started: list[subprocess.Popen[bytes]] = []
    popen = _proc._popen

    def recorded(argv: tuple[str, ...], **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = popen(argv, **kwargs)
        if "export" in argv:
            started.append(proc)
        return proc

    def interrupted(stream: IO[bytes], dest: Path, *, limits: _untar.Limits) -> _untar.Unpacked:
        assert len(stream.read(1 << 20)) == 1 << 20  # the export is under way
        (dest / "half-written").write_text("x")
        raise KeyboardInterrupt

    monkeypatch.setattr(_proc, "_popen", recorded)
    monkeypatch.setattr(_untar, "unpack", interrupted)
    work = tmp_path / "work"
    with pytest.raises(KeyboardInterrupt):
        _export(engine, base_image, work)
    assert sorted(p.name for p in work.iterdir()) == ["build.log"]
    assert len(started) == 1 and started[0].poll() is not None and not _proc._RUNNING
