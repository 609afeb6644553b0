"""Servers a SIGKILLed run left behind are found and stopped by the next run of those
results, but only a process group provably ours (issue 16, defect 8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackmatrix.bench import leftovers
from stackmatrix.build.backends import DockerBackend


@pytest.fixture
def server() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in server in its own session, as `_proc.start` starts one."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _log(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "cells" / "a" / "server-L1.log"
    path.parent.mkdir(parents=True)
    return path


def test_a_recorded_server_still_ours_is_stopped(tmp_path, server):
    record = leftovers.record(_log(tmp_path), server, 18123, "venv", None)
    assert record.name == "server-L1.live.json"
    assert json.loads(record.read_text())["pgid"] == server.pid
    [line] = leftovers.reap(tmp_path / "run")
    assert line == (
        f"a: server of an earlier run (process group {server.pid}, port 18123, "
        "server-L1.log) was still running; stopped"
    )
    server.wait(timeout=5)  # (the reaper may have collected it: a child of this test)
    assert not Path(f"/proc/{server.pid}").exists()
    assert not record.exists()
    assert leftovers.reap(tmp_path / "run") == []


def test_a_reused_pid_is_left_alone(tmp_path, server):
    record = leftovers.record(_log(tmp_path), server, 18123, "venv", None)
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "start_time": data["start_time"] + 1}))
    [line] = leftovers.reap(tmp_path / "run")
    assert "is gone (or its pid now belongs to another process); nothing stopped" in line
    assert server.poll() is None  # not ours by its start time: never signalled


def test_a_server_that_ended_and_a_corrupt_record(tmp_path, server):
    leftovers.record(_log(tmp_path), server, 18123, "venv", None)
    os.killpg(server.pid, signal.SIGKILL)
    server.wait()
    other = tmp_path / "run" / "cells" / "b" / "server-L2.live.json"
    other.parent.mkdir()
    other.write_text("{not json")
    lines = leftovers.reap(tmp_path / "run")
    assert "is gone" in lines[0] and lines[1].startswith("b: unreadable record")
    assert list((tmp_path / "run" / "cells").glob("*/*.live.json")) == []


def test_a_container_is_removed_only_on_the_machine_that_recorded_it(tmp_path, server, monkeypatch):
    removed: list[str] = []
    monkeypatch.setattr(DockerBackend, "cleanup", lambda self, handle: removed.append(handle))
    record = leftovers.record(_log(tmp_path), server, 18123, "docker", "stackmatrix-0123456789ab")
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "boot_id": "another-machine"}))
    [line] = leftovers.reap(tmp_path / "run")
    assert removed == [] and "nothing stopped" in line and server.poll() is None
    leftovers.record(_log(tmp_path / "again"), server, 18123, "docker", "stackmatrix-0123456789ab")
    leftovers.reap(tmp_path / "again" / "run")
    assert removed == ["stackmatrix-0123456789ab"]
