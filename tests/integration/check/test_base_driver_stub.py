"""The local CUDA bases carry the driver's stub, as NVIDIA's toolkit does
(`lib64/stubs/libcuda.so`), built in the image from the toolkit's own cuda.h
(dockerfiles/cuda-base-install.py): with it the check's probe imports the server's real
entry module on a machine without a GPU, where sgl-kernel's `common_ops` needs
`libcuda.so.1`. Oracles: the real cuda.h compiled against it (its versioned names
included), and the real CUDA runtime, which calls a driver of this kind "a stub library"
exactly as it does NVIDIA's."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from tests.support.nvccbin import GCC, real_toolkit

from stackmatrix.check._elffile import ELFFile

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

DRIVER_C = r"""
#include <cuda.h>
#include <stdio.h>
int main(void) {
    CUdeviceptr p; size_t free_b, total_b; CUcontext ctx;
    printf("%d %d %d %d\n", (int)cuInit(0), (int)cuMemAlloc(&p, 16),
           (int)cuMemGetInfo(&free_b, &total_b), (int)cuCtxCreate(&ctx, NULL, 0, 0));
    return 0;
}
"""
RUNTIME_C = r"""
#include <cuda_runtime_api.h>
#include <stdio.h>
int main(void) {
    int n = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    printf("%d %s\n", (int)e, cudaGetErrorString(e));
    return 0;
}
"""


def _installer() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "cuda_base_install", ROOT / "dockerfiles" / "cuda-base-install.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(argv: list[str], **kw: object) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)  # type: ignore[call-overload]
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the stub built from this machine's toolkit's cuda.h, that toolkit)"""
    if GCC is None:
        pytest.fail("gcc is required for these tests: install gcc")
    toolkit = real_toolkit()
    home = tmp_path_factory.mktemp("toolkit")
    (home / "include").symlink_to(toolkit / "include")
    return _installer().driver_stub(home, cc=GCC), toolkit


def test_the_stub_is_what_the_toolkit_ships(stub: tuple[Path, Path]) -> None:
    path, toolkit = stub
    assert path.name == "libcuda.so" and path.parent.name == "stubs"
    assert path.parent.parent.name == "lib64"
    with ELFFile(path) as elf:
        dynamic = elf.dynamic()
    assert dynamic.soname == "libcuda.so.1"
    assert dynamic.needed == ()  # loads in any image, whatever its libc
    names = _installer().driver_api_names((toolkit / "include/cuda.h").read_text())
    assert {"cuInit", "cuMemAlloc_v2", "cuCtxCreate_v4", "cuGetProcAddress_v2"} <= set(names)
    assert len(names) > 400


def test_a_program_of_the_real_cuda_h_links_and_loads_against_it(
    stub: tuple[Path, Path], tmp_path: Path
) -> None:
    path, toolkit = stub
    (tmp_path / "drv.c").write_text(DRIVER_C)
    exe = tmp_path / "drv"
    _run(
        [
            str(GCC),
            str(tmp_path / "drv.c"),
            "-I",
            str(toolkit / "include"),
            "-L",
            str(path.parent),
            "-lcuda",
            "-o",
            str(exe),
        ]
    )
    private = tmp_path / "private"
    private.mkdir()
    (private / "libcuda.so.1").symlink_to(path)
    out = _run([str(exe)], env={"LD_LIBRARY_PATH": str(private)})
    assert out.split() == ["34"] * 4  # CUDA_ERROR_STUB_LIBRARY, versioned names included


def test_the_real_cuda_runtime_calls_it_a_stub_library(
    stub: tuple[Path, Path], tmp_path: Path
) -> None:
    path, toolkit = stub
    lib64 = toolkit / "lib64"
    if not (lib64 / "libcudart.so").exists():
        pytest.fail(f"the toolkit at {toolkit} has no lib64/libcudart.so")
    (tmp_path / "rt.c").write_text(RUNTIME_C)
    exe = tmp_path / "rt"
    _run(
        [
            str(GCC),
            str(tmp_path / "rt.c"),
            "-I",
            str(toolkit / "include"),
            "-L",
            str(lib64),
            "-lcudart",
            "-o",
            str(exe),
        ]
    )
    private = tmp_path / "private"
    private.mkdir()
    (private / "libcuda.so.1").symlink_to(path)
    with_stub = _run([str(exe)], env={"LD_LIBRARY_PATH": f"{private}:{lib64}"})
    assert with_stub.strip() == "34 CUDA driver is a stub library"
    without = _run([str(exe)], env={"LD_LIBRARY_PATH": str(lib64)})
    assert not without.startswith("34 ")  # no driver at all is another error
