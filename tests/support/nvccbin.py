"""An nvcc stand-in that is a real executable: built by gcc, it prints and carries the
banner `nvcc --version` prints, which is what the check reads from the binary."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

GCC = shutil.which("gcc")  # looked up at import, before a test empties PATH
_GCC_ENV = {**os.environ}  # gcc runs `as` and `ld` from PATH


def gcc_nvcc(path: Path, release: str, version: str) -> Path:
    """An executable at `path` whose .rodata holds nvcc's banner for `release`/`version`."""
    if GCC is None:
        pytest.fail("gcc is required for these tests: install gcc")
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / "nvcc.c"
    banner = (
        "nvcc: NVIDIA (R) Cuda compiler driver\\n"
        f"Cuda compilation tools, release {release}, V{version}\\n"
    )
    src.write_text(
        "#include <stdio.h>\n"
        f'static const char banner[] = "{banner}";\n'
        "int main(void) { fputs(banner, stdout); return 0; }\n"
    )
    subprocess.run([GCC, "-O1", "-o", str(path), str(src)], check=True, env=_GCC_ENV)
    src.unlink()
    return path


def real_toolkit() -> Path:
    """The CUDA toolkit of this machine's nvcc (`nvcc -dryrun` names it as TOP)."""
    wrapper = shutil.which("nvcc")
    if wrapper is None:
        pytest.fail("nvcc is required for these tests: install the CUDA toolkit (13.x)")
    dry = subprocess.run([wrapper, "-dryrun", "-c", "x.cu"], capture_output=True, text=True)
    m = re.search(r"^#\$ TOP=(.+)$", dry.stderr + dry.stdout, re.MULTILINE)
    assert m, "nvcc -dryrun names its toolkit (TOP=...)"
    return Path(m.group(1).strip()).resolve()
