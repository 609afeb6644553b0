"""Servers a SIGKILLed run left behind are found and stopped by the next run of those
results, but only a process group provably ours: a forged record names nothing we stop."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackmatrix.bench import leftovers
from stackmatrix.builder.backends import DockerBackend

NONCE = leftovers.new_nonce()


def _sleeper(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True, env=env)
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # our own child, by its own group
    proc.wait()


@pytest.fixture
def server() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in server in its own session with its launch nonce, as `server.launch`
    starts one."""
    yield from _sleeper({**os.environ, leftovers.NONCE_ENV: NONCE})


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """Someone else's process group: in its own session, without our nonce."""
    yield from _sleeper({k: v for k, v in os.environ.items() if k != leftovers.NONCE_ENV})


def _log(tmp_path: Path) -> Path:
    path = tmp_path / "run" / "cells" / "a" / "server-L1.log"
    path.parent.mkdir(parents=True)
    return path


def test_a_recorded_server_still_ours_is_stopped(tmp_path, server):
    record = leftovers.record(_log(tmp_path), server, 18123, "venv", None, NONCE)
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
    record = leftovers.record(_log(tmp_path), server, 18123, "venv", None, NONCE)
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "start_time": data["start_time"] + 1}))
    [line] = leftovers.reap(tmp_path / "run")
    assert "is not ours: pid " in line and "(a reused pid); nothing stopped" in line
    assert server.poll() is None  # not ours by its start time: never signalled


def test_a_server_that_ended_and_a_corrupt_record(tmp_path, server):
    leftovers.record(_log(tmp_path), server, 18123, "venv", None, NONCE)
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
    record = leftovers.record(
        _log(tmp_path), server, 18123, "docker", "stackmatrix-0123456789ab", NONCE
    )
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "boot_id": "another-machine"}))
    [line] = leftovers.reap(tmp_path / "run")
    assert removed == [] and "nothing stopped" in line and server.poll() is None
    leftovers.record(
        _log(tmp_path / "again"), server, 18123, "docker", "stackmatrix-0123456789ab", NONCE
    )
    leftovers.reap(tmp_path / "again" / "run")
    assert removed == ["stackmatrix-0123456789ab"]


def _forged(tmp_path: Path, proc: subprocess.Popen[bytes], **fields: object) -> None:
    """A record anyone could write: the pgid, start time and boot id are all public."""
    path = _log(tmp_path).with_name("server-L1.live.json")
    stat = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    data = {
        "schema_version": 2,
        "pgid": proc.pid,
        "port": 18123,
        "backend": "venv",
        "container": None,
        "start_time": int(stat[19]),
        "boot_id": boot_id,
        "log": "server-L1.log",
        **fields,
    }
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({}, "the record has no launch nonce hash"),
        ({"nonce_sha256": hashlib.sha256(NONCE.encode()).hexdigest()}, "holds no launch nonce"),
        ({"nonce_sha256": "0" * 64}, "holds no launch nonce"),
    ],
)
def test_a_forged_record_stops_no_one_elses_process(tmp_path, stranger, fields, why):
    _forged(tmp_path, stranger, **fields)
    [line] = leftovers.reap(tmp_path / "run")
    assert "is not ours: " in line and why in line and line.endswith("nothing stopped")
    assert stranger.poll() is None  # never signalled
    assert not list((tmp_path / "run" / "cells").glob("*/*.live.json"))


def test_a_forged_record_naming_our_own_server_with_another_nonce(tmp_path, server):
    _forged(tmp_path, server, nonce_sha256=hashlib.sha256(b"guessed").hexdigest())
    [line] = leftovers.reap(tmp_path / "run")
    assert "not ours: its launch nonce does not match the record" in line
    assert server.poll() is None


def test_an_unreadable_environment_is_not_ours(tmp_path, server, monkeypatch):
    leftovers.record(_log(tmp_path), server, 18123, "venv", None, NONCE)
    real = Path.read_bytes

    def denied(self: Path) -> bytes:
        if self.name == "environ":  # another user's process: only its owner and root read it
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", denied)
    [line] = leftovers.reap(tmp_path / "run")
    assert "not ours: its environment is unreadable (Permission denied)" in line
    assert server.poll() is None


def test_the_record_holds_a_hash_of_the_nonce_never_the_nonce(tmp_path, server):
    text = leftovers.record(_log(tmp_path), server, 18123, "venv", None, NONCE).read_text()
    assert NONCE not in text
    assert json.loads(text)["nonce_sha256"] == hashlib.sha256(NONCE.encode()).hexdigest()


def test_the_log_of_a_server_stopped_or_gone_is_redacted(tmp_path, server, stranger):
    """Our teardown redacts a log; a SIGKILLed run's teardown never ran, so the log kept
    what the engine printed (sglang's ServerArgs, api_key included) until the next run."""
    printed = "ServerArgs(model_path='m', api_key='plain-key-7781', tp_size=8)\nready\n"
    log = _log(tmp_path)
    log.write_text(printed)
    leftovers.record(log, server, 18123, "venv", None, NONCE)
    other = tmp_path / "run" / "cells" / "b" / "server-L1.log"
    other.parent.mkdir()
    other.write_text(printed)  # its record names someone else's live group: not touched
    leftovers.record(other, stranger, 18124, "venv", None, NONCE)
    leftovers.reap(tmp_path / "run")
    assert log.read_text() == printed.replace("plain-key-7781", "<redacted>")
    assert other.read_text() == printed  # a live process may still write it
    assert stranger.poll() is None
