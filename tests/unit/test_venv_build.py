"""The venv backend's own directory handling, without running uv."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackmatrix.builder import _uv, venv
from stackmatrix.results import Status
from stackmatrix.spec_model import Cell


def test_an_env_dir_that_is_a_link_fails_the_build_and_keeps_its_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """shutil.rmtree refused the link with an internal error; following it would have
    reused or deleted someone else's directory."""
    monkeypatch.setattr(_uv, "uv_binary", lambda: "/nonexistent/uv")
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    env_dir = venv.env_dir_for(tmp_path / "work", "0" * 64)
    env_dir.parent.mkdir(parents=True)
    env_dir.symlink_to(target)
    outcome = venv.build(
        Cell(id="a"),
        spec_dir=tmp_path,
        work_dir=tmp_path / "work",
        log_path=tmp_path / "build.log",
        content_hash="0" * 64,
    )
    assert outcome.status is Status.FAILED and outcome.code == "env_dir_link"
    assert "symbolic link" in outcome.message and str(env_dir) in outcome.message
    assert env_dir.is_symlink() and (target / "keep.txt").read_text() == "mine"
