"""A real CUDA wheel from PyPI: sgl-kernel 0.3.21 (536 MB, cached in ~/.cache)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from stackmatrix.compat.phase import inspect_path
from stackmatrix.compat.scan import scan_extension

pytestmark = pytest.mark.integration

WHEEL = "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
CACHE = Path.home() / ".cache" / "stackmatrix" / "wheels"
EXTENSIONS = (
    "sgl_kernel/flash_ops.abi3.so",
    "sgl_kernel/flashmla_ops.abi3.so",
    "sgl_kernel/sm90/common_ops.abi3.so",
    "sgl_kernel/sm100/common_ops.abi3.so",
)


@pytest.fixture(scope="session")
def sgl_kernel_wheel() -> Path:
    path = CACHE / WHEEL
    if not path.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.10",
            "--platform",
            "manylinux2014_x86_64",
            "sgl-kernel==0.3.21",
            "-d",
            str(CACHE),
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not path.is_file():
            pytest.fail(f"could not download {WHEEL} from PyPI:\n{proc.stdout}\n{proc.stderr}")
    return path


@pytest.fixture(scope="session")
def sgl_kernel_unpacked(sgl_kernel_wheel: Path) -> Path:
    dest = CACHE / "sgl_kernel-0.3.21-unpacked"
    done = dest / ".complete"
    if not done.exists():
        with zipfile.ZipFile(sgl_kernel_wheel) as zf:
            for name in EXTENSIONS:
                zf.extract(name, dest)
        done.touch()
    return dest


@pytest.mark.parametrize("rel", EXTENSIONS)
def test_arches_match_cuobjdump(
    sgl_kernel_unpacked: Path, cuobjdump_list: Callable[[Path], list[tuple[str, str]]], rel: str
) -> None:
    path = sgl_kernel_unpacked / rel
    scan = scan_extension(path)
    oracle = cuobjdump_list(path)
    for kind in ("cubin", "ptx"):
        assert [e.cuobjdump_arch for e in scan.fatbin if e.kind == kind] == [
            a for k, a in oracle if k == kind
        ]
    assert "libcudart.so.12" in scan.dynamic.needed


def test_inspect_wheel_native_on_sm120_and_sm90(sgl_kernel_wheel: Path) -> None:
    outcome = inspect_path(sgl_kernel_wheel, targets=["sm_120", "sm_90"])
    data = outcome.data
    assert data["target_summary"] == {"sm_120": "native", "sm_90": "native"}
    cov = data["coverage"]
    assert cov["sm_120"]["sgl_kernel/sm100/common_ops.abi3.so"] == "native"
    assert cov["sm_90"]["sgl_kernel/sm90/common_ops.abi3.so"] == "native"
    # the loader rule: sm90/ is what cc 9.0 loads, sm100/ everything else
    assert data["not_loaded"]["sm_120"] == ["sgl_kernel/sm90/common_ops.abi3.so"]
    assert data["not_loaded"]["sm_90"] == ["sgl_kernel/sm100/common_ops.abi3.so"]
    # FA3 has no Blackwell code: reported as an optional feature, not a failure
    assert cov["sm_120"]["sgl_kernel/flash_ops.abi3.so"] == "none"
    codes = {(f.code, f.subject) for f in outcome.findings}
    assert ("SM-ARCH-OPTIONAL", "sgl_kernel/flash_ops.abi3.so") in codes
    assert not any(f.code == "SM-ARCH-NONE" for f in outcome.findings)
    assert data["cuda_majors"] == [12]
    [dist] = data["inventory"]
    assert (dist["name"], dist["version"], dist["cuda_major"]) == ("sgl-kernel", "0.3.21", 12)
