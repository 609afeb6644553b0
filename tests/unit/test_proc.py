from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stackmatrix import _proc


def test_run_captures_output_and_logs(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    result = _proc.run([sys.executable, "-c", "print('hi'); raise SystemExit(3)"], log_path=log)
    assert result.returncode == 3 and not result.ok and "hi" in result.output
    assert "[exit 3]" in log.read_text()


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time;"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid));"
        "time.sleep(60)"
    )
    result = _proc.run([sys.executable, "-c", code], timeout=2)
    assert result.timed_out and not result.ok
    grandchild = int(pidfile.read_text())
    # the grandchild was in the group we started, so it is gone too (or a zombie)
    assert _dead(grandchild)


def _dead(pid: int) -> bool:
    import time

    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def test_argv_is_never_a_shell_string(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    argv = [sys.executable, "-c", "import sys; print(sys.argv[1])", f"; touch {marker}"]
    result = _proc.run(argv)
    assert result.ok and f"; touch {marker}" in result.output
    assert not marker.exists()


def test_no_new_child_after_an_interrupt(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    monkeypatch.setattr(_proc, "_INTERRUPTED", _proc.threading.Event())
    _proc.terminate_all()
    result = _proc.run([sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    assert not result.ok and "interrupted" in result.output
    assert not marker.exists()
