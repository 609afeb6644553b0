"""A FlashInfer JIT module compiled by the host's CUDA 13 nvcc, in the cache of a cell
meant for CUDA 12.9.

https://github.com/flashinfer-ai/flashinfer/issues/5145: the host's default toolkit was
CUDA 13.0, the vLLM/PyTorch stack CUDA 12.9; flashinfer compiled its sampler with the
host's nvcc into the shared cache, linked against libcudart.so.13, and the CUDA 12.9
workers loaded that module and failed. Here the real nvcc compiles a kernel and links it
with a shared CUDA runtime (`--cudart shared`, as flashinfer's `-lcudart` link does) into
the place flashinfer keeps compiled modules; readelf is the oracle for what it needs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackmatrix.built_environment import Environment
from stackmatrix.check.phase import check_environment
from stackmatrix.findings import Severity

pytestmark = pytest.mark.integration
SAMPLER = """
__global__ void top_p(float* probs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) probs[i] *= 0.5f;
}
extern "C" int launch(float* probs, int n) {
    top_p<<<(n + 255) / 256, 256>>>(probs, n);
    return (int)cudaGetLastError();
}
"""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is required for this test: install the CUDA toolkit and binutils")
    return path


def _nvcc_major(nvcc: str) -> int:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    release = out.split("release ", 1)[1].split(",", 1)[0]
    return int(release.split(".", 1)[0])


def test_a_module_compiled_by_another_cuda_major_is_flagged(tmp_path: Path) -> None:
    nvcc = _tool("nvcc")
    major = _nvcc_major(nvcc)
    cell_cuda = "12.9" if major >= 13 else "13.0"  # the other major than the compiler's
    base = tmp_path / "workspace"
    module_dir = base / ".cache/flashinfer/0.6.4/90/cached_ops/sampling"
    module_dir.mkdir(parents=True)
    (module_dir / "sampling.cu").write_text(SAMPLER)
    subprocess.run(
        [
            nvcc,
            "-shared",
            "-Xcompiler",
            "-fPIC",
            "--cudart",
            "shared",
            "-gencode",
            "arch=compute_90,code=sm_90",
            "sampling.cu",
            "-o",
            "sampling.so",
        ],
        cwd=module_dir,
        check=True,
        capture_output=True,
    )
    dynamic = subprocess.run(
        [_tool("readelf"), "-d", str(module_dir / "sampling.so")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"Shared library: [libcudart.so.{major}]" in dynamic

    site = tmp_path / "site-packages"
    info = site / "flashinfer_python-0.6.4.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.6.4\n"
    )
    (info / "RECORD").write_text("")
    env = Environment(
        backend="venv",
        python=(sys.executable, "-S"),
        site_packages=(site,),
        env={"PYTHONPATH": str(site), "FLASHINFER_WORKSPACE_BASE": str(base)},
    )
    outcome = check_environment(
        env,
        cell_id="cu129",
        targets=[],
        cuda=cell_cuda,
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    (found,) = [f for f in outcome.findings if f.code == "SM-JIT-CACHE-CUDA"]
    assert found.severity is Severity.FAIL
    assert found.details["modules"] == {
        "0.6.4/90/cached_ops/sampling/sampling.so": [f"libcudart.so.{major}"]
    }
    assert f"this cell is CUDA {cell_cuda}" in found.message
    assert outcome.data["jit_cache"]["cache"] == str(base / ".cache/flashinfer")
