from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.support.ctrl_c import INTERRUPTED_EXIT, ctrl_c_during_stream

from stackmatrix import _proc
from stackmatrix.bench import server
from stackmatrix.builder import _docker_cli

TOKEN = "hf_" + "0123456789abcdef" * 2  # the shape of a Hugging Face token
SECRET_ARGS = ("--hf-token", TOKEN, f"--api-key={TOKEN}")


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """terminate_all here stops only this test's children and interrupts no other test."""
    monkeypatch.setattr(_proc, "_INTERRUPTED", threading.Event())
    monkeypatch.setattr(_proc, "_RUNNING", set())


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


@pytest.mark.usefixtures("fresh_registry")
def test_no_new_child_after_an_interrupt(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    argv = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    _proc.terminate_all()
    for result in (_proc.run(argv), _proc.stream(argv, log_path=tmp_path / "s.log", timeout=60)):
        assert not result.ok and "interrupted" in result.output
    with pytest.raises(_proc.Interrupted):
        _proc.start(argv, log_path=tmp_path / "server.log")
    assert not marker.exists()


def _sleeper(pidfile: Path) -> list[str]:
    """A child that records its pid, says it started, and would run for two minutes."""
    code = (
        f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
        "print('started', flush=True); time.sleep(120)"
    )
    return [sys.executable, "-c", code]


def _said_started(log: Path) -> bool:
    # a line of its own: the log's first line, the argv, holds the word too
    return log.is_file() and "started" in log.read_text().splitlines()


@pytest.fixture
def sleeper_pidfile(tmp_path: Path) -> Iterator[Path]:
    """Where a sleeper writes its pid; a sleeper still alive at the end is killed (ours:
    the pid is checked against the pid file's path in its command line)."""
    pidfile = tmp_path / "child.pid"
    yield pidfile
    if not pidfile.is_file():
        return
    pid = int(pidfile.read_text())
    try:
        if str(pidfile).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)
    except (FileNotFoundError, ProcessLookupError):
        pass


def test_ctrl_c_stops_a_streamed_child_within_seconds(
    tmp_path: Path, sleeper_pidfile: Path
) -> None:
    # a build streamed from a worker thread ran on to its end after Ctrl-C
    log = tmp_path / "build.log"

    stopped = ctrl_c_during_stream(
        _sleeper(sleeper_pidfile), log, started=lambda: _said_started(log)
    )
    assert stopped.returncode == INTERRUPTED_EXIT, stopped.output
    assert stopped.seconds < 10, f"stackmatrix took {stopped.seconds:.1f} s to stop"
    assert _dead(int(sleeper_pidfile.read_text()))


@pytest.mark.usefixtures("fresh_registry")
def test_terminate_all_stops_a_streamed_child(tmp_path: Path, sleeper_pidfile: Path) -> None:
    log = tmp_path / "stream.log"
    results: list[_proc.ProcResult] = []
    worker = threading.Thread(
        target=lambda: results.append(
            _proc.stream(_sleeper(sleeper_pidfile), log_path=log, timeout=600)
        )
    )
    worker.start()
    _wait_for(lambda: _said_started(log))
    _proc.terminate_all()  # what the SIGINT handler does
    worker.join(timeout=10)
    assert not worker.is_alive() and results and not results[0].ok
    assert _dead(int(sleeper_pidfile.read_text()))


@pytest.mark.usefixtures("fresh_registry")
def test_ctrl_c_stops_a_server(tmp_path: Path, sleeper_pidfile: Path) -> None:
    proc = server._start(_sleeper(sleeper_pidfile), {}, tmp_path / "server.log")
    try:
        _wait_for(sleeper_pidfile.is_file)
        _proc.terminate_all()
        proc.wait(timeout=10)
    finally:
        _proc.kill_group(proc, grace_s=1.0)
    assert _dead(int(sleeper_pidfile.read_text()))


def test_stream_hands_each_line_to_the_callback_as_it_comes(tmp_path: Path) -> None:
    seen: list[str] = []
    code = "import time\nfor i in range(3):\n    print(f'line {i}', flush=True); time.sleep(0.2)"
    res = _proc.stream(
        [sys.executable, "-c", code], log_path=tmp_path / "s.log", timeout=60, on_line=seen.append
    )
    assert res.ok and seen == ["line 0", "line 1", "line 2"]
    assert "line 2" in res.output and "[exit 0]" in (tmp_path / "s.log").read_text()


def test_stream_timeout_kills_the_child(tmp_path: Path, sleeper_pidfile: Path) -> None:
    res = _proc.stream(_sleeper(sleeper_pidfile), log_path=tmp_path / "s.log", timeout=2)
    assert res.timed_out and not res.ok and "started" in res.output
    assert _dead(int(sleeper_pidfile.read_text()))


def test_streamed_argv_is_redacted_in_the_log_and_in_logging(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "build.log"
    with caplog.at_level(logging.DEBUG):
        res = _docker_cli.run_streaming(
            [sys.executable, "-c", "pass", *SECRET_ARGS], log_path=log, timeout=60
        )
    assert res.ok
    text = log.read_text()
    assert TOKEN not in text and "--hf-token <redacted> --api-key=<redacted>" in text
    assert TOKEN not in caplog.text


@pytest.mark.parametrize("how", ["run", "start"])
def test_every_way_to_start_a_child_logs_its_argv_redacted(
    how: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "x.log"
    argv = [sys.executable, "-c", "pass", *SECRET_ARGS]
    with caplog.at_level(logging.DEBUG):
        if how == "run":
            _proc.run(argv, log_path=log)
        else:
            _proc.stop(_proc.start(argv, log_path=log))
    assert "<redacted>" in log.read_text() and TOKEN not in log.read_text()
    assert "<redacted>" in caplog.text and TOKEN not in caplog.text


def _wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def _writer(pidfile: Path, *, then_sleep: bool) -> list[str]:
    """Writes 3 MiB to stdout and a line to stderr, then exits 4 or sleeps two minutes."""
    code = (
        f"import os, sys, time; open({str(pidfile)!r}, 'w').write(str(os.getpid()));"
        "sys.stderr.write('to stderr\\n'); sys.stderr.flush();"
        "sys.stdout.buffer.write(b'x' * (3 << 20)); sys.stdout.flush();"
        + ("time.sleep(120)" if then_sleep else "sys.exit(4)")
    )
    return [sys.executable, "-c", code]


@pytest.mark.usefixtures("fresh_registry")
def test_reading_streams_stdout_and_logs_stderr(tmp_path: Path, sleeper_pidfile: Path) -> None:
    log = tmp_path / "export.log"
    with _proc.reading(_writer(sleeper_pidfile, then_sleep=False), log_path=log, timeout=60) as r:
        head = r.stdout.read(1 << 20)  # the block needs only a part: the rest is drained
    assert head == b"x" * (1 << 20)
    assert r.result is not None and r.result.returncode == 4 and not r.result.timed_out
    assert r.result.output == "to stderr\n"  # stderr only: the stdout was the stream
    assert "to stderr\n[exit 4]" in log.read_text()
    assert not _proc._RUNNING


@pytest.mark.usefixtures("fresh_registry")
def test_reading_kills_the_child_when_the_block_fails(
    tmp_path: Path, sleeper_pidfile: Path
) -> None:
    log = tmp_path / "export.log"
    with (
        pytest.raises(KeyboardInterrupt),
        _proc.reading(_writer(sleeper_pidfile, then_sleep=True), log_path=log, timeout=600) as r,
    ):
        r.stdout.read(1 << 20)
        raise KeyboardInterrupt  # Ctrl-C while the stream is read
    assert _dead(int(sleeper_pidfile.read_text()))
    assert r.result is not None and not r.result.ok and not _proc._RUNNING


@pytest.mark.usefixtures("fresh_registry")
def test_reading_times_out(tmp_path: Path, sleeper_pidfile: Path) -> None:
    started = time.monotonic()
    with _proc.reading(
        _writer(sleeper_pidfile, then_sleep=True), log_path=tmp_path / "x.log", timeout=2
    ) as r:
        data = r.stdout.read()  # ends when the timeout kills the writer
    assert len(data) == 3 << 20 and time.monotonic() - started < 30
    assert r.result is not None and r.result.timed_out and not r.result.ok
    assert _dead(int(sleeper_pidfile.read_text()))


@pytest.mark.usefixtures("fresh_registry")
def test_reading_starts_nothing_after_an_interrupt(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    _proc.terminate_all()
    with (
        pytest.raises(_proc.Interrupted),
        _proc.reading(
            [sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
            log_path=tmp_path / "x.log",
            timeout=60,
        ),
    ):
        pass
    assert not marker.exists()


def test_a_child_dies_with_a_sigkilled_parent(tmp_path: Path, sleeper_pidfile: Path) -> None:
    # the kernel's parent-death signal: nothing of stackmatrix runs to stop it
    code = (
        "import sys, time; from pathlib import Path; from stackmatrix import _proc; "
        "_proc.start(sys.argv[2:], log_path=Path(sys.argv[1]).with_suffix('.log')); "
        "time.sleep(120)"
    )
    src = str(Path(_proc.__file__).parents[1])
    helper = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "server"), *_sleeper(sleeper_pidfile)],
        env={**os.environ, "PYTHONPATH": src},
        start_new_session=True,
    )
    try:
        _wait_for(lambda: sleeper_pidfile.is_file() and sleeper_pidfile.read_text() != "")
        child = int(sleeper_pidfile.read_text())
        os.kill(helper.pid, signal.SIGKILL)
        helper.wait(timeout=10)
        assert _dead(child), "the child outlived its SIGKILLed parent"
    finally:
        if helper.poll() is None:
            os.killpg(helper.pid, signal.SIGKILL)
            helper.wait()
