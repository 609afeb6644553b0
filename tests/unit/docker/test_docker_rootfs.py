"""export_rootfs with a fake docker client: `docker export` streams into the unpacking,
no tar file is written, and a failure or Ctrl-C leaves no partial tree and no child.
tests/integration/docker/test_docker_export.py does the same with a real engine."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackmatrix import _proc
from stackmatrix.builder import _docker_rootfs, _untar

IMAGE_ID = "sha256:" + "ab" * 32

_FAKE_DOCKER = """\
import io, os, sys, tarfile, time
here = os.path.dirname(os.path.abspath(__file__))
mode = open(os.path.join(here, "mode")).read().strip()
if sys.argv[1:3] == ["image", "inspect"]:
    sys.stdout.write('[{"Id": "%s", "Size": 4096}]' % sys.argv[3])
    sys.exit(0)
assert sys.argv[1] == "export", sys.argv
open(os.path.join(here, "pid"), "w").write(str(os.getpid()))
if mode == "fail":
    sys.stderr.write("Error: No such container: %s\\n" % sys.argv[2])
    sys.exit(1)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as tar:
    def add(name, data=b"", kind=tarfile.REGTYPE):
        info = tarfile.TarInfo(name)
        info.type, info.size = kind, len(data)
        tar.addfile(info, io.BytesIO(data))
    add("etc/debian_version", b"12.8\\n")
    add("dev/console", kind=tarfile.CHRTYPE)
    if mode == "hostile":
        add("../escaped", b"pwned")
    if mode in ("slow", "too-big"):
        add("usr/lib/big", b"x" * (8 << 20))
data = buf.getvalue()
out = sys.stdout.buffer
if mode == "slow":  # part of the stream, then nothing for two minutes
    out.write(data[: 1 << 20])
    out.flush()
    time.sleep(120)
out.write(data)
out.flush()
if mode == "hostile":
    time.sleep(120)  # still "exporting" when the bad member is found
"""


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Path]:
    """The fake client's directory (it reads `mode`, writes `pid`); a fake still
    running at the end is killed (ours: its pid file names it)."""
    d = tmp_path / "fake"
    d.mkdir()
    script = d / "docker"
    script.write_text(f"#!{sys.executable}\n{_FAKE_DOCKER}")
    script.chmod(0o755)
    yield d
    pidfile = d / "pid"
    if pidfile.is_file() and _alive(int(pidfile.read_text()), script):
        os.kill(int(pidfile.read_text()), 9)


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_proc, "_INTERRUPTED", threading.Event())
    monkeypatch.setattr(_proc, "_RUNNING", set())


def _alive(pid: int, script: Path) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return (
            stat not in ("Z", "X")
            and str(script).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        )
    except FileNotFoundError:
        return False


def _export(fake: Path, work: Path, mode: str) -> Path:
    (fake / "mode").write_text(mode)
    return _docker_rootfs.export_rootfs(
        str(fake / "docker"), "c1", IMAGE_ID, work_dir=work, log_path=work / "build.log"
    )


def _left(work: Path) -> list[str]:
    return sorted(p.name for p in work.iterdir() if p.name != "build.log")


def test_the_export_streams_into_the_root_without_a_tar_file(fake: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    root = _export(fake, work, "ok")
    assert root == _docker_rootfs.rootfs_dir(work, IMAGE_ID)
    assert (root / "etc/debian_version").read_text() == "12.8\n"
    assert not (root / "dev/console").exists()
    assert _left(work) == [root.name]  # no tar file, no partial tree
    assert "$ " + str(fake / "docker") + " export c1" in (work / "build.log").read_text()
    # exported once per image id: a second call does not run docker export
    (fake / "pid").unlink()
    assert _export(fake, work, "fail") == root and not (fake / "pid").exists()


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("fail", r"docker export failed \(exit 1\): Error: No such container: c1"),
        ("hostile", "points outside the destination"),
        # the fake image says 4096 bytes: without the slack, 8192 bytes of files at most
        ("too-big", "over 8192 bytes of files"),
    ],
)
def test_a_failed_export_leaves_nothing(
    fake: Path, tmp_path: Path, mode: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_docker_rootfs, "_SLACK_BYTES", 0)
    work = tmp_path / "work"
    with pytest.raises(_docker_rootfs.ExportError, match=message):
        _export(fake, work, mode)
    assert _left(work) == []
    assert not (tmp_path / "escaped").exists() and not (work / "escaped").exists()
    assert not _alive(int((fake / "pid").read_text()), fake / "docker")
    assert not _proc._RUNNING


def test_ctrl_c_during_the_export_leaves_nothing(
    fake: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(stream: object, dest: Path, *, limits: _untar.Limits) -> _untar.Unpacked:
        assert hasattr(stream, "read")
        stream.read(4096)
        raise KeyboardInterrupt

    monkeypatch.setattr(_untar, "unpack", interrupted)
    work = tmp_path / "work"
    with pytest.raises(KeyboardInterrupt):
        _export(fake, work, "slow")
    assert _left(work) == [] and not _alive(int((fake / "pid").read_text()), fake / "docker")


def test_terminate_all_during_the_export_stops_it(fake: Path, tmp_path: Path) -> None:
    # the SIGINT handler's way: the export's child is killed from another thread
    work = tmp_path / "work"
    errors: list[BaseException] = []

    def export() -> None:
        try:
            _export(fake, work, "slow")
        except BaseException as exc:  # the test reads it below
            errors.append(exc)

    worker = threading.Thread(target=export)
    worker.start()
    deadline = time.monotonic() + 30
    while not (fake / "pid").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    started = time.monotonic()
    _proc.terminate_all()
    worker.join(timeout=30)
    assert not worker.is_alive() and time.monotonic() - started < 15
    assert len(errors) == 1 and isinstance(errors[0], _docker_rootfs.ExportError)
    assert _left(work) == [] and not _alive(int((fake / "pid").read_text()), fake / "docker")
