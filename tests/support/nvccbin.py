"""An nvcc stand-in that is a real executable: built by gcc, it prints and carries the
banner `nvcc --version` prints, which is what the check reads from the binary."""

from __future__ import annotations

import os
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
