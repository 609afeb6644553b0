"""Fault injection: SIGTERM, SIGHUP and SIGKILL of stackmatrix mid-bench, then a
resume. The server is the fake engine, started as an engine is."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stackmatrix.bench import leftovers

pytestmark = pytest.mark.integration

FAKE = Path(__file__).with_name("fake_engine.py")
RUNNER = Path(__file__).parents[2] / "support" / "bench_run.py"
START_TIMEOUT_S = 60.0


def _start(run: Path, workers: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(RUNNER), str(run), str(FAKE), str(workers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _server_measuring(run: Path) -> int:
    """The recorded process group of the running server, once it has measured a round
    (of two: the signal comes mid-measurement)."""
    record, deadline = (
        run / "cells" / "a" / "server-L1.live.json",
        time.monotonic() + START_TIMEOUT_S,
    )
    while time.monotonic() < deadline:
        if record.exists() and list(record.parent.glob("requests-L1-R1.jsonl")):
            return int(json.loads(record.read_text())["pgid"])
        time.sleep(0.05)
    raise AssertionError(f"no server measuring after {START_TIMEOUT_S} s")


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _finish(proc: subprocess.Popen[str]) -> str:
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return out


def _resume(run: Path) -> str:
    proc = _start(run)
    out = _finish(proc)
    assert proc.returncode == 0, out
    assert "status ok" in out
    launches = json.loads((run / "cells" / "a" / "bench.json").read_text())["data"]["launches"]
    assert [ln["index"] for ln in launches] == [1]
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_mid_bench_stops_the_server_and_resume_completes(tmp_path, sig):
    run = tmp_path / "run"
    proc = _start(run)
    pgid = _server_measuring(run)
    os.kill(proc.pid, sig)  # stackmatrix alone: the server is in its own session
    out = _finish(proc)
    assert proc.returncode == 128 + sig, out
    assert not _alive(pgid), "the server outlived stackmatrix"
    bench = json.loads((run / "cells" / "a" / "bench.json").read_text())
    # as build's and check's (results.PhaseRun): the same status, code and advice
    assert (bench["status"], bench["code"]) == ("interrupted", "interrupted")
    assert "re-run" in bench["message"]
    assert not (run / "cells" / "a" / "server-L1.live.json").exists()
    _resume(run)


def test_after_sigkill_the_server_dies_with_it_and_the_next_run_completes(tmp_path):
    run = tmp_path / "run"
    proc = _start(run)
    pgid = _server_measuring(run)
    record = json.loads((run / "cells" / "a" / "server-L1.live.json").read_text())
    # the nonce that proves a leftover ours is in the server's environment, only its hash
    # in the record (tests/unit/bench/test_bench_leftovers.py: what reap does with it)
    nonce = _environ(pgid)[leftovers.NONCE_ENV]
    assert nonce not in json.dumps(record)
    assert record["nonce_sha256"] == hashlib.sha256(nonce.encode()).hexdigest()
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    try:
        deadline = time.monotonic() + 5
        while _running(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(pgid), "the server outlived a SIGKILLed stackmatrix"
        out = _resume(run)
        assert f"(process group {pgid}, port " in out and "is gone; nothing stopped" in out
    finally:
        if _running(pgid):
            os.killpg(pgid, signal.SIGKILL)


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(entry.partition("=")[::2] for entry in raw.split("\0") if entry)


def _running(pid: int) -> bool:
    """Alive and not a zombie (the parent-death signal's orphan waits for its reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_a_stop_signal_mid_round_stops_the_clients_worker_processes(tmp_path):
    """With `client_workers = 2` the signal comes while the parent waits on its workers:
    they are stopped with it, none is left in stackmatrix's process group."""
    run = tmp_path / "run"
    proc = _start(run, workers=2)
    pgid = _server_measuring(run)
    os.kill(proc.pid, signal.SIGTERM)
    out = _finish(proc)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert not _alive(pgid), "the server outlived stackmatrix"
    deadline = time.monotonic() + 10  # multiprocessing's helper exits when it sees EOF
    while _alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(proc.pid), "a client worker outlived stackmatrix"
    assert json.loads((run / "cells" / "a" / "bench.json").read_text())["status"] == "interrupted"
