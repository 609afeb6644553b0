"""Atomic writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stackmatrix import _atomic


def test_results_files_get_the_mode_of_the_logs_beside_them(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        _atomic.write_json(tmp_path / "bench.json", {"schema_version": 1})
        with (tmp_path / "server-L1.log").open("a") as fh:
            fh.write("log\n")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"bench.json": 0o644, "server-L1.log": 0o644}


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.json"
    _atomic.write_json(path, {"a": 1})

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        _atomic.write_json(path, {"a": 2})
    assert _atomic.read_json(path) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
