"""The import path the check judges."""

from __future__ import annotations

import sys
from pathlib import Path

from stackmatrix.built_environment import Environment
from stackmatrix.check.importpath import import_path, select


def test_a_directory_without_its_interpreter_keeps_its_declared_site(tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    env = Environment(
        backend="venv", python=(str(tmp_path / "venv" / "bin" / "python"),), site_packages=(site,)
    )
    assert import_path(env) == (site,)


def test_select_keeps_site_dirs_and_overlays_not_the_stdlib(tmp_path: Path) -> None:
    std = tmp_path / "lib" / "python3.12"
    site = std / "site-packages"
    dynload = std / "lib-dynload"
    overlay = tmp_path / "overlay"
    for d in (site, dynload, overlay):
        d.mkdir(parents=True)
    got = select(
        [
            "",
            str(std),
            str(dynload),
            str(site),
            str(overlay),
            "rel/path",
            str(tmp_path / "missing"),
            str(site),
        ],
        [str(std)],
    )
    assert got == [site, overlay]


def test_the_running_interpreter_reports_its_own_path() -> None:
    env = Environment(backend="current", python=(sys.executable,))
    found = import_path(env)
    assert any(p.name in ("site-packages", "dist-packages") for p in found)
