"""Real ELF and fatbin fixtures, built once per session with gcc/g++ and nvcc.

A tool that is missing makes the fixture fail (never skip): CI installs them.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import platform
import shutil
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

CU_SOURCE = """
__global__ void add(float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}
extern "C" void launch(float* a, const float* b, int n) { add<<<(n + 255) / 256, 256>>>(a, b, n); }
"""

# one nvcc call per variant covers every arch form the parser must read
GENCODES = (
    "arch=compute_90a,code=sm_90a",
    "arch=compute_120a,code=sm_120a",
    "arch=compute_100f,code=sm_100f",
    "arch=compute_80,code=sm_80",
    "arch=compute_120,code=compute_120",
    "arch=compute_90a,code=compute_90a",
)

TORCH_V1 = """
#include <string>
namespace c10 {
int kept(int x) { return x + 1; }
int removed_in_v2(const std::string& s) { return (int)s.size(); }
}
"""
TORCH_V2 = """
namespace c10 {
int kept(int x) { return x + 2; }
}
"""
EXTENSION = """
#include <string>
namespace c10 { int kept(int); int removed_in_v2(const std::string&); }
extern "C" int ext_entry(int x) { return c10::kept(x) + c10::removed_in_v2("abc"); }
"""


def _run(argv: list[str], cwd: Path) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(f"{argv[0]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def _tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is required for these tests: {hint}")
    return path


def find_cuobjdump() -> str:
    """cuobjdump from the nvidia-cuda-cuobjdump wheel (nvidia/cu13/bin or nvidia/*/bin)."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for cand in sorted(Path(root).glob("*/bin/cuobjdump")):
            return str(cand)
    on_path = shutil.which("cuobjdump")
    if on_path:
        return on_path
    pytest.fail("cuobjdump not found: `pip install nvidia-cuda-cuobjdump` (the test extra)")


@pytest.fixture(scope="session")
def cuobjdump() -> str:
    return find_cuobjdump()


@dataclass(frozen=True)
class FatbinFixtures:
    plain: Path
    compressed: Path


@pytest.fixture(scope="session")
def fatbins(tmp_path_factory: pytest.TempPathFactory) -> FatbinFixtures:
    nvcc = _tool("nvcc", "install the CUDA toolkit (nvcc 12.9+ for sm_100f)")
    d = tmp_path_factory.mktemp("fatbin")
    (d / "kern.cu").write_text(CU_SOURCE)
    gen = [a for g in GENCODES for a in ("-gencode", g)]
    base = [nvcc, "-shared", "-Xcompiler", "-fPIC", *gen, "kern.cu"]
    _run([*base, "-o", "kern.so"], d)
    _run([*base, "-Xfatbin", "-compress-all", "-o", "kernc.so"], d)
    return FatbinFixtures(plain=d / "kern.so", compressed=d / "kernc.so")


@pytest.fixture(scope="session")
def one_arch_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same kernel built by nvcc for one `-gencode` each: gencode -> the .so."""
    nvcc = _tool("nvcc", "install the CUDA toolkit (nvcc 12.8+ for sm_120)")
    d = tmp_path_factory.mktemp("one-arch")
    (d / "kern.cu").write_text(CU_SOURCE)
    out: dict[str, Path] = {}
    for i, gencode in enumerate(ONE_ARCH_GENCODES):
        argv = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-gencode", gencode, "kern.cu"]
        _run([*argv, "-o", f"kern{i}.so"], d)
        out[gencode] = d / f"kern{i}.so"
    return out


ONE_ARCH_GENCODES = (
    "arch=compute_120,code=sm_120",  # plain Blackwell consumer cubin
    "arch=compute_120a,code=sm_120a",  # arch-specific: that exact arch only
    "arch=compute_120,code=compute_120",  # PTX only
)


@dataclass(frozen=True)
class AbiFixtures:
    torch_v1: Path  # directory holding libc10.so v1
    torch_v2: Path  # directory holding libc10.so v2 (lacks removed_in_v2)
    extension: Path  # built against v1, DT_NEEDED libc10.so, no rpath
    cudart_user: Path  # needs libcudart.so.12, which is nowhere on the path
    root: Path


@pytest.fixture(scope="session")
def abi(tmp_path_factory: pytest.TempPathFactory) -> AbiFixtures:
    gxx = _tool("g++", "install g++")
    gcc = _tool("gcc", "install gcc")
    d = tmp_path_factory.mktemp("abi")
    for name, src in (("v1", TORCH_V1), ("v2", TORCH_V2)):
        (d / name).mkdir()
        (d / name / "c10.cpp").write_text(src)
        _run(
            [gxx, "-shared", "-fPIC", "-Wl,-soname,libc10.so", "-o", "libc10.so", "c10.cpp"],
            d / name,
        )
    (d / "ext").mkdir()
    (d / "ext" / "ext.cpp").write_text(EXTENSION)
    _run(
        [gxx, "-shared", "-fPIC", "-o", "ext_ops.so", "ext.cpp", "-L", str(d / "v1"), "-lc10"],
        d / "ext",
    )
    stub = d / "stub"
    stub.mkdir()
    (stub / "rt.c").write_text("int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n")
    _run(
        [gcc, "-shared", "-fPIC", "-Wl,-soname,libcudart.so.12", "-o", "libcudart.so", "rt.c"], stub
    )
    (stub / "user.c").write_text(
        "int cudaGetDeviceCount(int*);\n"
        "int count(void) { int n; cudaGetDeviceCount(&n); return n; }\n"
    )
    _run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-Wl,--no-as-needed",
            "-o",
            "cuda_user.so",
            "user.c",
            "-L",
            str(stub),
            "-lcudart",
        ],
        stub,
    )
    (stub / "libcudart.so").unlink()  # now nothing provides libcudart.so.12
    return AbiFixtures(
        torch_v1=d / "v1",
        torch_v2=d / "v2",
        extension=d / "ext" / "ext_ops.so",
        cudart_user=stub / "cuda_user.so",
        root=d,
    )


def cuobjdump_archs(cuobjdump: str, path: Path) -> list[tuple[str, str]]:
    """[(kind, arch)] in cuobjdump's order, arch as it prints it (sm_90a, sm_120...)."""
    out: list[tuple[str, str]] = []
    for flag, kind in (("--list-elf", "cubin"), ("--list-ptx", "ptx")):
        proc = subprocess.run(
            [cuobjdump, flag, str(path)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0 and "does not contain" not in proc.stderr + proc.stdout:
            pytest.fail(f"cuobjdump {flag} {path} failed: {proc.stderr}")
        for line in proc.stdout.splitlines():
            if ":" not in line:
                continue
            name = line.split(":", 1)[1].strip()
            arch = name.rsplit(".", 2)[-2]  # kern.3.sm_100.cubin -> sm_100
            out.append((kind, arch))
    return out


@pytest.fixture(scope="session")
def cuobjdump_list(cuobjdump: str) -> Callable[[Path], list[tuple[str, str]]]:
    """cuobjdump_archs bound to the cuobjdump found for this session."""
    return lambda path: cuobjdump_archs(cuobjdump, path)


WheelWriter = Callable[[Path, str, str, dict[str, bytes]], Path]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}\n"


def write_wheel(out_dir: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A platform wheel of `files` (archive name -> bytes) with its METADATA, WHEEL and
    a RECORD of sha256 digests, as the wheel specification describes it."""
    info = f"{name}-{version}.dist-info"
    tag = f"py3-none-manylinux_2_17_{platform.machine()}"
    meta = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}\n"
        ).encode(),
    }
    members = {**files, **meta}
    record = "".join(_record_line(n, d) for n, d in members.items()) + f"{info}/RECORD,,\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
        zf.writestr(f"{info}/RECORD", record)
    return wheel


@pytest.fixture(scope="session")
def wheel_writer() -> WheelWriter:
    return write_wheel


def compile_shared(argv: list[str | Path], cwd: Path, *, cxx: bool = False) -> None:
    """gcc (or g++) -shared -fPIC `argv`, failing the test when the compiler is missing."""
    tool = _tool("g++" if cxx else "gcc", "install gcc and g++")
    _run([tool, "-shared", "-fPIC", *map(str, argv)], cwd)


@pytest.fixture(scope="session")
def compiler() -> Callable[..., None]:
    return compile_shared
