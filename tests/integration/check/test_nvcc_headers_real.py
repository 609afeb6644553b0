"""CCCL's compiler/header check, with the real nvcc and the real CCCL as the oracle.

A CUDA_HOME laid out as the CUDA 13 wheels lay it out (bin/nvcc, include/, include/cccl)
whose nvcc is this machine's and whose headers are its toolkit's, except
cuda_runtime_api.h, which says another release (as nvidia-cuda-runtime of another
version than nvidia-cuda-nvcc does, flashinfer#3493). The real nvcc compiling a kernel
that includes CCCL there stops with CCCL's error; the check says so from the files alone.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from tests.support.nvccbin import real_toolkit

from stackmatrix.check import nvcc, nvccheaders
from stackmatrix.findings import Severity

pytestmark = pytest.mark.integration

KERNEL = "#include <cuda/std/cstdint>\n__global__ void k(cuda::std::int32_t* p) { *p = 1; }\n"


def _cuda_home(tmp_path: Path, toolkit: Path, cudart: int | None) -> Path:
    """bin/nvcc -> the real one; include/ -> the real headers, cuda_runtime_api.h saying
    `cudart` (None: unchanged)."""
    home = tmp_path / "site-packages/nvidia/cu13"
    (home / "bin").mkdir(parents=True)
    (home / "bin/nvcc").symlink_to(toolkit / "bin/nvcc")
    real_include = (toolkit / "include").resolve()
    (home / "include").mkdir()
    for entry in real_include.iterdir():
        if entry.name != "cuda_runtime_api.h":
            (home / "include" / entry.name).symlink_to(entry)
    text = (real_include / "cuda_runtime_api.h").read_text(encoding="utf-8")
    if cudart is not None:
        text, n = re.subn(r"(#define\s+CUDART_VERSION\s+)\d+", rf"\g<1>{cudart}", text)
        assert n == 1
    (home / "include/cuda_runtime_api.h").write_text(text, encoding="utf-8")
    return home


def _compile(toolkit: Path, home: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    argv = [
        str(toolkit / "bin/nvcc"),
        "-c",
        str(src),
        "-o",
        str(tmp_path / "k.o"),
        "-I",
        str(home / "include"),
        "-I",
        str(home / "include/cccl"),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("other_release", [True, False])
def test_the_check_agrees_with_nvcc_and_cccl(tmp_path: Path, other_release: bool) -> None:
    toolkit = real_toolkit()
    release = nvcc.read_version(toolkit / "bin/nvcc")
    assert release is not None
    major, minor = (int(p) for p in release[0].split("."))
    cudart = major * 1000 + (minor + 3) * 10 if other_release else None
    home = _cuda_home(tmp_path, toolkit, cudart)
    done = _compile(toolkit, home, tmp_path)
    found, _ = nvcc.find_nvcc(Path("/"), [], {"CUDA_HOME": str(home)})
    assert found is not None and found.path == f"{home}/bin/nvcc"
    data, out = nvccheaders.headers_check(
        Path("/"),
        found,
        [tmp_path / "site-packages"],
        {"CUDA_HOME": str(home)},
        installed={"flashinfer-python": "0.6.12"},
        cell="c",
    )
    assert data is not None and data["cccl_checks"] is True
    if other_release:
        assert done.returncode != 0 and nvccheaders.CHECK_MESSAGE in done.stderr
        assert [(f.code, f.severity) for f in out] == [("SM-NVCC-HEADERS-MISMATCH", Severity.FAIL)]
        assert data["cudart_version"] == cudart
    else:
        assert done.returncode == 0, done.stderr
        assert out == []
