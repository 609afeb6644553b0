"""`stackmatrix inspect` imports only what it needs (issue 17, item 3: start-up time).

Start-up was most of inspect's run on real extensions (the scan of sgl-kernel's four
takes ~20 ms, the process took ~190 ms): these modules are for other commands, for a
wheel, or for a *.dist-info, and must not creep back into a directory's inspection.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NOT_FOR_A_DIRECTORY = (
    "packaging",  # dist-info requirements and versions (inventory.py)
    "email",  # METADATA (inventory.py)
    "csv",  # RECORD (inventory.py)
    "zipfile",  # a wheel (_wheel.py)
    "tempfile",  # a wheel's unpacking
    "subprocess",  # c++filt, the probe, the backends (_proc.py)
    "platform",
    "stackmatrix._proc",
    "stackmatrix._secrets",
    "stackmatrix.spec_model",  # the other commands' parser choices: spec_names.py
    "stackmatrix.spec",
    "stackmatrix.pipeline",
    "stackmatrix.report",
    "stackmatrix.bench",
    "stackmatrix.build",
    "stackmatrix.check.environment",
    "stackmatrix.check.scancache",
    "stackmatrix.check.probe",
)

_RUN = """
import contextlib, io, sys
from stackmatrix.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["inspect", sys.argv[1], "--json"])
print(rc, " ".join(sys.modules))
"""


def _an_extension() -> str:
    """A real ELF extension of this interpreter's (builds differ in which are built in)."""
    for name in ("_json", "_csv", "_struct", "_bisect", "math", "select", "_ctypes"):
        path = getattr(importlib.import_module(name), "__file__", None)
        if path and path.endswith(".so"):
            return str(path)
    raise AssertionError("this interpreter has no extension module in a file")


def test_inspecting_a_directory_imports_none_of_the_rest(tmp_path: Path) -> None:
    shutil.copy(_an_extension(), tmp_path / "ext.so")  # a real ELF extension
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(tmp_path)], capture_output=True, text=True, check=True
    )
    rc, modules = out.stdout.split(" ", 1)
    assert rc == "0", out.stdout  # it was inspected: compatible, no GPU code
    loaded = set(modules.split())
    assert "stackmatrix.check.scan" in loaded  # the check below would pass vacuously
    unwanted = {m for m in loaded for n in NOT_FOR_A_DIRECTORY if m == n or m.startswith(n + ".")}
    assert not unwanted


def test_a_target_that_is_not_an_arch_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stackmatrix.cli import main

    assert main(["inspect", str(tmp_path), "--target", "foo"]) == 2
    err = capsys.readouterr().err
    assert "inspect --target: not a GPU arch: 'foo'" in err and "Traceback" not in err
