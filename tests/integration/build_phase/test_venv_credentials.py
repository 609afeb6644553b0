"""Credentials in a pin URL or an index URL reach uv, and no file we keep: real uv against
a local index that answers only with the right basic-auth
header, so a build that works proves uv had the credentials."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.auth_index import PASSWORD, USER, WHEEL, auth_index, files_holding

from stackmatrix.builder import venv
from stackmatrix.spec_model import Cell

pytestmark = pytest.mark.integration
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture
def index() -> Iterator[str]:
    with auth_index() as where:
        yield where


@pytest.mark.parametrize("where", ["pin_url", "index_url"])
def test_credentials_reach_uv_but_no_kept_file(tmp_path: Path, index: str, where: str) -> None:
    if where == "pin_url":
        pin = f"credpkg @ http://{USER}:{PASSWORD}@{index}/files/{WHEEL}"
        cell = Cell(id="cred", python=PY, pins=(pin,))
    else:
        cell = Cell(
            id="cred",
            python=PY,
            pins=("credpkg==1.0",),
            index_url=f"http://{USER}:{PASSWORD}@{index}/simple",
        )
    work = tmp_path / "work"
    log = tmp_path / "build.log"
    outcome = venv.build(
        cell, spec_dir=tmp_path, work_dir=work, log_path=log, content_hash="c" * 64
    )
    assert outcome.status.value == "ok", outcome.message + log.read_text()
    assert "credpkg" in {e.name for e in outcome.lock}
    env_dir = venv.env_dir_for(work, "c" * 64)
    # what uv read is still there for the user, with the password hidden
    assert "credpkg" in (env_dir / "requirements.in").read_text()
    assert "credpkg" in (env_dir / "lock.txt").read_text()
    assert files_holding(work, PASSWORD.encode()) == []
    assert PASSWORD not in log.read_text()


def test_a_failed_resolve_leaves_no_credentials_either(tmp_path: Path, index: str) -> None:
    missing = "credpkg-9.9-py3-none-any.whl"  # the index answers 404
    cell = Cell(
        id="cred", python=PY, pins=(f"credpkg @ http://{USER}:{PASSWORD}@{index}/files/{missing}",)
    )
    work = tmp_path / "work"
    log = tmp_path / "build.log"
    outcome = venv.build(
        cell, spec_dir=tmp_path, work_dir=work, log_path=log, content_hash="d" * 64
    )
    assert outcome.status.value != "ok"
    assert files_holding(work, PASSWORD.encode()) == []
    assert PASSWORD not in log.read_text()
