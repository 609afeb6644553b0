"""SIGTERM and SIGHUP end a command as Ctrl-C does: cleanup runs, the exit code says
which signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

# `inspect` of a wheel, its unpacking slowed so that the signal arrives mid-way
SLOW_INSPECT = textwrap.dedent(
    """
    import signal, sys, time, zipfile
    from stackmatrix.cli import main

    # as in a terminal session: a test run under nohup would pass SIGHUP on ignored
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

    real = zipfile.ZipFile.extract
    def slow(self, *args, **kwargs):
        out = real(self, *args, **kwargs)
        print("extracting", flush=True)
        time.sleep(60)
        return out
    zipfile.ZipFile.extract = slow
    sys.exit(main(["inspect", sys.argv[1]]))
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_inspect_stopped_by_a_signal_leaves_no_temporary_directory(tmp_path, sig):
    """`timeout inspect x.whl` left /tmp/stackmatrix-whl-* (83 MB) behind."""
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("x-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        zf.writestr("x/ext.so", b"\x7fELF" + b"\0" * 100)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_INSPECT, str(wheel)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "extracting\n"
        assert [p.name[:16] for p in tmp.iterdir()] == ["stackmatrix-whl-"]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, err
    assert f"interrupted ({sig.name})" in err and "--resume" not in err
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "func", "resume"),
    [
        (["inspect", "x.whl"], "cmd_inspect", False),
        (["validate", "s.toml"], "cmd_validate", False),
        (["run", "s.toml"], "cmd_run", True),
    ],
)
def test_the_interrupted_message_suggests_resume_only_where_there_is_one(
    argv: list[str],
    func: str,
    resume: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from stackmatrix import _commands, cli

    def stopped(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli if func == "cmd_inspect" else _commands, func, stopped)
    assert cli.main(argv) == 130
    err = capsys.readouterr().err
    assert "interrupted (" in err and ("re-run with --resume" in err) is resume


def test_an_ignored_sighup_stays_ignored() -> None:
    from stackmatrix._signals import stop_signals

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # nohup keeps working
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_signal_raises_stopped_after_on_stop(tmp_path: Path) -> None:
    from stackmatrix._signals import Stopped, exit_code, stop_signals

    calls: list[str] = []
    with pytest.raises(Stopped) as info, stop_signals(lambda: calls.append("stop")):
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0)  # let the handler run
    assert calls == ["stop"] and exit_code(info.value) == 143
