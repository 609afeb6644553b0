"""`stackmatrix inspect` imports only what it needs (issue 17, item 3: start-up time).

Start-up was most of inspect's run on real extensions (the scan of sgl-kernel's four
takes ~20 ms, the process took ~190 ms): these modules are for other commands, for a
wheel, or for a *.dist-info, and must not creep back into a directory's inspection.
"""

from __future__ import annotations

import _json
import shutil
import subprocess
import sys
from pathlib import Path

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
    "stackmatrix.envs",
    "stackmatrix.compat.environment",
    "stackmatrix.compat.scancache",
    "stackmatrix.compat.probe",
)

_RUN = """
import contextlib, io, sys
from stackmatrix.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["inspect", sys.argv[1], "--json"])
print(rc, " ".join(sys.modules))
"""


def test_inspecting_a_directory_imports_none_of_the_rest(tmp_path: Path) -> None:
    shutil.copy(_json.__file__, tmp_path / "ext.so")  # a real ELF extension
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(tmp_path)], capture_output=True, text=True, check=True
    )
    rc, modules = out.stdout.split(" ", 1)
    assert rc == "0", out.stdout  # it was inspected: compatible, no GPU code
    loaded = set(modules.split())
    assert "stackmatrix.compat.scan" in loaded  # the check below would pass vacuously
    unwanted = {m for m in loaded for n in NOT_FOR_A_DIRECTORY if m == n or m.startswith(n + ".")}
    assert not unwanted
