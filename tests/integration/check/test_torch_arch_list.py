"""unsloth#5876: a cu130 torch has no sm_70 code, so on a V100 it failed only at run time
("no kernel image is available for execution on the device"). torch's own kernels live
in torch/lib/libtorch_cuda.so, which the extension scan leaves out; its fatbin is read
and judged by the same rules as an extension's. Here it is a real fatbin built by nvcc
13 (which can no longer build sm_70 either) for torch cu130's kind of list: sm_75,
sm_80 and sm_90 cubins and compute_90 PTX; cuobjdump says what the file holds."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from stackmatrix.built_environment import Environment
from stackmatrix.check.phase import CheckOutcome, check_environment
from stackmatrix.check.render import render_text

pytestmark = pytest.mark.integration

KERNEL = "__global__ void scale(float* a, float s) { a[threadIdx.x] *= s; }\n"
GENCODES = (
    "arch=compute_75,code=sm_75",
    "arch=compute_80,code=sm_80",
    "arch=compute_90,code=sm_90",
    "arch=compute_90,code=compute_90",
)


@pytest.fixture(scope="module")
def torch_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site-packages holding torch 2.9.0+cu130 with an nvcc-built libtorch_cuda.so."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.fail("nvcc is required for these tests: install the CUDA toolkit (nvcc 13)")
    site = tmp_path_factory.mktemp("torch-site")
    lib = site / "torch" / "lib"
    lib.mkdir(parents=True)
    (lib / "kern.cu").write_text(KERNEL)
    gen = [a for g in GENCODES for a in ("-gencode", g)]
    argv = [nvcc, "-shared", "-Xcompiler", "-fPIC", *gen, "kern.cu", "-o", "libtorch_cuda.so"]
    done = subprocess.run(argv, cwd=lib, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"nvcc failed: {done.stderr}")
    (lib / "kern.cu").unlink()
    (site / "torch" / "__init__.py").write_text("")
    (site / "torch" / "version.py").write_text("__version__ = '2.9.0+cu130'\ncuda = '13.0'\n")
    info = site / "torch-2.9.0+cu130.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0+cu130\n")
    return site


def _check(site: Path, targets: list[str]) -> CheckOutcome:
    env = Environment(
        backend="venv",
        python=(sys.executable, "-S"),
        site_packages=(site,),
        env={"PYTHONPATH": str(site)},
    )
    return check_environment(
        env,
        cell_id="c",
        targets=targets,
        cuda=None,
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )


def _torch(outcome: CheckOutcome) -> dict[str, str]:
    return {
        f.details["target"]: f.code for f in outcome.findings if f.code.startswith("SM-TORCH-ARCH")
    }


def test_what_the_file_holds(
    torch_site: Path, cuobjdump_list: Callable[[Path], list[tuple[str, str]]]
) -> None:
    held = set(cuobjdump_list(torch_site / "torch" / "lib" / "libtorch_cuda.so"))
    assert held == {("cubin", "sm_75"), ("cubin", "sm_80"), ("cubin", "sm_90"), ("ptx", "sm_90")}


def test_a_v100_is_not_covered_by_a_cu130_torch(torch_site: Path) -> None:
    outcome = _check(torch_site, ["sm_70", "sm_90"])
    assert _torch(outcome) == {"sm_70": "SM-TORCH-ARCH-NONE"}
    none = next(f for f in outcome.findings if f.code == "SM-TORCH-ARCH-NONE")
    assert "torch 2.9.0+cu130 has no code for sm_70 in torch/lib/libtorch_cuda.so" in none.message
    assert "cubins: sm_75 sm_80 sm_90; PTX: compute_90" in none.message
    assert "no kernel image is available for execution on the device" in none.message
    assert outcome.verdict == "incompatible"
    assert outcome.data["torch_arch"]["targets"] == {"sm_70": "none", "sm_90": "native"}
    shown = "torch archs: sm_75 sm_80 sm_90 (PTX: compute_90); sm_70: none, sm_90: native"
    assert shown in render_text(outcome)


def test_same_major_and_ptx_rules_apply(torch_site: Path) -> None:
    # sm_86 runs the sm_80 cubin (same major), sm_100 only JITs the compute_90 PTX
    outcome = _check(torch_site, ["sm_86", "sm_90", "sm_100"])
    assert _torch(outcome) == {"sm_100": "SM-TORCH-ARCH-PTX-ONLY"}
    assert outcome.data["torch_arch"]["targets"] == {
        "sm_86": "native",
        "sm_90": "native",
        "sm_100": "ptx",
    }


def test_covered_targets_say_nothing(torch_site: Path) -> None:
    outcome = _check(torch_site, ["sm_75", "sm_89"])
    assert _torch(outcome) == {}
    assert outcome.verdict == "compatible"
