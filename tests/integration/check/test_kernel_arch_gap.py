"""sglang#38515: sgl_kernel's `rmsnorm` failed with "no kernel image is available for
execution on the device" on sm_75 while `silu_and_mul` of the same `common_ops` ran: each
translation unit has its own arch list, so coverage is per kernel, not per file. Here two
translation units built by nvcc with different arch lists are linked into one extension,
as sgl-kernel's are; cuobjdump's SASS listing says which kernel each arch holds."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from stackmatrix.check.phase import inspect_path

pytestmark = pytest.mark.integration

NORM = (
    "__global__ void rmsnorm(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 0.5f; }\n"
)
ACT = (
    "__global__ void silu_and_mul(float* x, int n) {\n"
    "  int i = threadIdx.x; if (i < n) x[i] = x[i] / (1.0f + __expf(-x[i])); }\n"
)


def _nvcc(argv: list[str], cwd: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.fail("nvcc is required for these tests: install the CUDA toolkit")
    done = subprocess.run([nvcc, *argv], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"nvcc failed: {done.stderr}")


def _ops(d: Path, norm: list[str], act: list[str], *extra: str) -> Path:
    """common_ops.abi3.so of a norm and an activation unit, each with its -gencode list."""
    d.mkdir(parents=True)
    for name, src, gencodes in (("norm", NORM, norm), ("act", ACT, act)):
        (d / f"{name}.cu").write_text(src)
        gen = [a for g in gencodes for a in ("-gencode", g)]
        _nvcc(["-c", "-Xcompiler", "-fPIC", *gen, *extra, f"{name}.cu", "-o", f"{name}.o"], d)
    _nvcc(["-shared", *extra, "norm.o", "act.o", "-o", "common_ops.abi3.so"], d)
    return d / "common_ops.abi3.so"


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("ops")
    sm75, sm80 = "arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80"
    return {
        # the report's wheel: rmsnorm was left out of the sm_75 build
        "gap": _ops(d / "gap", [sm80], [sm75, sm80]),
        "whole": _ops(d / "whole", [sm75, sm80], [sm75, sm80]),
        # a kernel for Hopper alone, on purpose: sm_90a is one arch's code
        "specific": _ops(d / "specific", ["arch=compute_90a,code=sm_90a"], [sm75, sm80]),
        "compressed": _ops(d / "compressed", [sm80], [sm75, sm80], "-Xfatbin", "-compress-all"),
    }


def _sass_functions(path: Path) -> dict[str, set[str]]:
    """cuobjdump -elf: arch -> the kernels (.text.<name> sections) of its cubins (the
    oracle); a cubin with none (the device link's) is not listed."""
    spec_dirs = [Path(p) for p in __import__("nvidia").__path__]
    tool = next((str(c) for r in spec_dirs for c in sorted(r.glob("*/bin/cuobjdump"))), None)
    if tool is None:
        pytest.fail("cuobjdump not found: `pip install nvidia-cuda-cuobjdump` (the test extra)")
    # -sass needs nvdisasm, which the cuobjdump wheel lacks; -elf lists each cubin's sections
    done = subprocess.run([tool, "-elf", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"cuobjdump -elf failed: {done.stderr}")
    out: dict[str, set[str]] = {}
    arch = ""
    for line in done.stdout.splitlines():
        if m := re.search(r"arch = (sm_\w+)", line):
            arch = m.group(1)
        elif m := re.fullmatch(r"\.text\.(\S+)", line.strip()):
            out.setdefault(arch, set()).add(m.group(1))
    return out


def test_what_each_arch_holds(builds: dict[str, Path]) -> None:
    assert _sass_functions(builds["gap"]) == {
        "sm_75": {"_Z12silu_and_mulPfi"},
        "sm_80": {"_Z7rmsnormPfi", "_Z12silu_and_mulPfi"},
    }


def test_a_kernel_without_the_targets_code_is_named(builds: dict[str, Path]) -> None:
    outcome = inspect_path(builds["gap"], targets=["sm_75", "sm_80"])
    # the file as a whole runs on both: the per-file view sees nothing
    assert outcome.data["target_summary"] == {"sm_75": "native", "sm_80": "native"}
    (gap,) = outcome.findings
    assert (gap.code, gap.severity.value, gap.details["target"]) == (
        "SM-ARCH-KERNEL-GAP",
        "warn",
        "sm_75",
    )
    assert gap.details["kernels"] == ["_Z7rmsnormPfi"]
    assert "not for 1 of its 2 kernels read: rmsnorm" in gap.message
    assert "others (silu_and_mul) run" in gap.message
    assert outcome.verdict == "warnings"


def test_a_whole_build_says_nothing(builds: dict[str, Path]) -> None:
    outcome = inspect_path(builds["whole"], targets=["sm_75", "sm_80"])
    assert (outcome.verdict, outcome.findings) == ("compatible", [])


def test_an_arch_specific_kernel_is_no_gap(builds: dict[str, Path]) -> None:
    outcome = inspect_path(builds["specific"], targets=["sm_75", "sm_90"])
    # sm_75 lacks rmsnorm, built for sm_90a alone: no gap. sm_90 lacks silu_and_mul,
    # whose sm_80 cubin does not run on another major and which has no PTX: a gap
    gaps = {f.details["target"]: f.details["kernels"] for f in outcome.findings}
    assert gaps == {"sm_90": ["_Z12silu_and_mulPfi"]}


def test_compressed_entries_are_not_judged_per_kernel(builds: dict[str, Path]) -> None:
    outcome = inspect_path(builds["compressed"], targets=["sm_75"])
    assert outcome.data["extensions"][0]["compressed_entries"] > 0
    assert [f.code for f in outcome.findings] == []
