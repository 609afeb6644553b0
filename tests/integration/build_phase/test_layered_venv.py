"""A venv layered on an interpreter's packages, installed offline from a wheel directory
made by scripts/kit-wheels.py, and a check that judges the interpreter's real sys.path.
Real uv, no network needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stackmatrix.builder import venv
from stackmatrix.built_environment import Environment
from stackmatrix.check.phase import check_environment
from stackmatrix.spec_model import Cell

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _installed_dist(site: Path, name: str, version: str) -> None:
    """A distribution as an installer leaves it: package + dist-info with a RECORD."""
    pkg = site / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"VERSION = {version!r}\n")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    (info / "INSTALLER").write_text("pip\n")
    files = [
        f"{name}/__init__.py",
        f"{info.name}/METADATA",
        f"{info.name}/WHEEL",
        f"{info.name}/INSTALLER",
        f"{info.name}/RECORD",
        "../../bin/gone",
    ]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def _wheels(tmp_path: Path, name: str, version: str) -> Path:
    site, wheels = tmp_path / "kit-site", tmp_path / "wheels"
    _installed_dist(site, name, version)
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "kit-wheels.py"), str(site), str(wheels)],
        check=True,
    )
    return wheels


def test_layered_offline_cell_sees_its_pins_and_the_inherited_packages(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path, "overlaypkg", "1.2.3")
    assert [w.name for w in wheels.iterdir()] == ["overlaypkg-1.2.3-py3-none-any.whl"]
    cell = Cell(
        id="layered",
        python=PY,
        inherit="current",
        offline=True,
        no_deps=True,
        find_links=(str(wheels),),
        pins=("overlaypkg==1.2.3",),
    )
    log = tmp_path / "build.log"
    outcome = venv.build(
        cell, spec_dir=tmp_path, work_dir=tmp_path / "work", log_path=log, content_hash="f" * 64
    )
    assert outcome.status.value == "ok", outcome.message
    text = log.read_text()
    assert "--offline" in text and "--no-index" in text and "--no-deps" in text
    env = outcome.environment
    assert env is not None
    # the pin and what the interpreter running the tests has (packaging) both import
    out = subprocess.run(
        [*env.python, "-c", "import overlaypkg, packaging; print(overlaypkg.VERSION)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "1.2.3"
    names = {e.name for e in outcome.lock}
    assert {"overlaypkg", "packaging"} <= names
    checked = check_environment(
        env,
        cell_id="layered",
        targets=(),
        cuda=None,
        declared_driver=None,
        log_path=None,
        run_probe=False,
    )
    judged = [Path(p) for p in checked.data["import_path"]]
    assert judged[0] == env.site_packages[0]  # the venv's own packages come first
    assert len(judged) > 1  # and the inherited site-packages are judged too
    inventory = {d["name"] for d in checked.data["inventory"]}
    assert {"overlaypkg", "packaging"} <= inventory


def test_check_judges_what_pythonpath_adds(tmp_path: Path) -> None:
    overlay = tmp_path / "overlay"
    _installed_dist(overlay, "pathpkg", "0.1")
    env = Environment(backend="current", python=(sys.executable,), env={"PYTHONPATH": str(overlay)})
    checked = check_environment(
        env,
        cell_id="c",
        targets=(),
        cuda=None,
        declared_driver=None,
        log_path=None,
        run_probe=False,
    )
    assert str(overlay) in checked.data["import_path"]
    assert "pathpkg" in {d["name"] for d in checked.data["inventory"]}
    without = check_environment(
        Environment(backend="current", python=(sys.executable,)),
        cell_id="c",
        targets=(),
        cuda=None,
        declared_driver=None,
        log_path=None,
        run_probe=False,
    )
    assert "pathpkg" not in {d["name"] for d in without.data["inventory"]}


def test_a_shadowed_distribution_is_judged_once_from_the_first_directory(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _installed_dist(first, "dup", "2.0")
    _installed_dist(second, "dup", "1.0")
    env = Environment(
        backend="current",
        python=(sys.executable,),
        env={"PYTHONPATH": f"{first}:{second}"},
    )
    checked = check_environment(
        env,
        cell_id="c",
        targets=(),
        cuda=None,
        declared_driver=None,
        log_path=None,
        run_probe=False,
    )
    dups = [d for d in checked.data["inventory"] if d["name"] == "dup"]
    assert [d["version"] for d in dups] == ["2.0"]


def test_inherit_refuses_another_python_version(tmp_path: Path) -> None:
    other = "3.10" if PY != "3.10" else "3.11"
    cell = Cell(id="mismatch", python=other, inherit="current")
    outcome = venv.build(
        cell,
        spec_dir=tmp_path,
        work_dir=tmp_path / "work",
        log_path=tmp_path / "build.log",
        content_hash="e" * 64,
    )
    assert outcome.status.value == "failed" and outcome.code == "inherit_failed"
    assert f"python = {other!r}" in outcome.message
