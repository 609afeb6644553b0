"""The versions a cell ran are the ones its interpreter imports, shadowing included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from stackmatrix.builder.lock import lockscript_path, parse_lockscript_output
from stackmatrix.check.inventory import read_inventory
from stackmatrix.report.load import CellResults
from stackmatrix.report.versions import cell_versions
from stackmatrix.results import PhaseResult, Status
from stackmatrix.spec_model import Cell

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _installed(site: Path, name: str, version: str) -> None:
    """A distribution as an installer leaves it in a site-packages directory."""
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text(f"__version__ = {version!r}\n")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n{info.name}/METADATA,,\n")


def _phase(phase: str, cid: str, data: dict[str, Any]) -> PhaseResult:
    return PhaseResult(phase=phase, cell=cid, status=Status.OK, inputs_hash="h", data=data)


def _layered(tmp_path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A venv's site-packages in front of a base's, both with transformers: the build's
    lock and the check's inventory, each read the way the phases read them."""
    venv, base = tmp_path / "venv-site", tmp_path / "base-site"
    _installed(venv, "transformers", "5.8.1")
    _installed(base, "transformers", "5.17.0")
    env = os.environ | {"PYTHONPATH": os.pathsep.join((str(venv), str(base)))}
    listed = subprocess.run(
        [sys.executable, str(lockscript_path())],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lock = parse_lockscript_output(listed.stdout, Cell(id="layered", python=PY))
    inventory = read_inventory([venv, base], scan_binaries=False)
    return [e.to_dict() for e in lock], [d.to_dict() for d in inventory.distributions]


def test_a_layered_venv_shows_the_version_it_imports_and_the_one_it_shadows(tmp_path):
    lock, inventory = _layered(tmp_path)
    # the lock names the copy importlib.metadata listed last: the shadowed one
    assert {e["version"] for e in lock if e["name"] == "transformers"} == {"5.17.0"}
    probe = {"imports": {"transformers": {"version": "5.8.1"}}}
    cell = CellResults(
        id="layered",
        path=tmp_path,
        phases={
            "build": _phase("build", "layered", {"lock": lock}),
            "check": _phase("check", "layered", {"inventory": inventory, "probe": probe}),
        },
    )
    versions = cell_versions(cell, ("transformers",))
    assert versions["transformers"] == "5.8.1 (shadows 5.17.0)"


def test_without_the_check_inventory_the_probe_import_decides(tmp_path):
    lock = [
        {"name": "transformers", "version": "5.17.0"},
        {"name": "sglang-kernel", "version": "0.4.4"},
    ]
    probe = {"imports": {"transformers": {"version": "5.8.1"}, "sgl_kernel": {"version": "0.4.4"}}}
    cell = CellResults(
        id="c",
        path=tmp_path,
        phases={
            "build": _phase("build", "c", {"lock": lock}),
            "check": _phase("check", "c", {"probe": probe}),
        },
    )
    versions = cell_versions(cell, ("transformers", "sgl-kernel", "sglang-kernel"))
    assert versions["transformers"] == "5.8.1 (shadows 5.17.0)"
    # sgl_kernel is the import of either name: only the one installed is shown
    assert versions["sglang-kernel"] == "0.4.4" and "sgl-kernel" not in versions


def test_one_copy_of_a_package_is_shown_as_is(tmp_path):
    lock = [{"name": "torch", "version": "2.9.1+cu128"}]
    inventory = [{"name": "torch", "version": "2.9.1+cu128"}]
    cell = CellResults(
        id="c",
        path=tmp_path,
        phases={
            "build": _phase("build", "c", {"lock": lock, "python_version": "3.12.3"}),
            "check": _phase("check", "c", {"inventory": inventory}),
        },
    )
    assert cell_versions(cell, ("torch", "vllm")) == {"python": "3.12.3", "torch": "2.9.1+cu128"}
    lock_only = CellResults(
        id="d", path=tmp_path, phases={"build": _phase("build", "d", {"lock": lock})}
    )
    assert cell_versions(lock_only, ("torch",)) == {"torch": "2.9.1+cu128"}
