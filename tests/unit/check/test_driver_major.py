"""A CUDA 13 runtime on a driver older than 580: "RuntimeError: CUDA error: CUDA driver
version is insufficient for CUDA runtime version" (nagadomi/nunif#702, "CUDA 13
requires a newer driver"; NVIDIA's minor-version compatibility table: 13.x >= 580, 12.x
>= 525). The CUDA major comes from the extension's DT_NEEDED: real shared objects built
with gcc, linked against CUDA runtime stubs whose sonames are libcudart.so.12 and
libcudart.so.13, in a site-packages with no torch (so the cell's CUDA is not torch's)
or next to a CUDA 12 torch."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackmatrix.built_environment import Environment
from stackmatrix.check.phase import CheckOutcome, check_environment
from stackmatrix.findings import Finding, Severity

KERNEL = "int cudaGetDeviceCount(int*);\nint rms(void) { int n; return cudaGetDeviceCount(&n); }"


def _gcc(*argv: str | Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required for these tests: install gcc")
    subprocess.run([gcc, "-shared", "-fPIC", *map(str, argv)], check=True)


def _site(tmp_path: Path, major: int, torch: str | None = None) -> Path:
    """kern/_C.so linked against libcudart.so.<major>, shipped beside it ($ORIGIN)."""
    site = tmp_path / "site-packages"
    pkg = site / "kern"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "rt.c").write_text("int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n")
    (pkg / "k.c").write_text(KERNEL)
    rt = pkg / f"libcudart.so.{major}"
    _gcc(f"-Wl,-soname,libcudart.so.{major}", "-o", rt, pkg / "rt.c")
    _gcc("-o", pkg / "_C.so", pkg / "k.c", "-Wl,--no-as-needed", rt, "-Wl,-rpath,$ORIGIN")
    dists = [("kern", "1.0")] + ([("torch", torch)] if torch else [])
    for name, version in dists:
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (site / "kern-1.0.dist-info" / "RECORD").write_text("kern/_C.so,,\n")
    if torch:
        (site / "torch").mkdir()
        cuda = "12.8" if "cu128" in torch else "13.0"
        (site / "torch" / "version.py").write_text(f"cuda = '{cuda}'\n")
    return site


def _check(site: Path, driver: str, cuda: str | None = None) -> CheckOutcome:
    env = Environment(
        backend="venv",
        python=(sys.executable, "-S"),
        site_packages=(site,),
        env={"PYTHONPATH": str(site)},
    )
    return check_environment(
        env,
        cell_id="c",
        targets=["sm_90"],
        cuda=cuda,
        declared_driver=driver,
        log_path=None,
        run_probe=False,
    )


def _major_findings(outcome: CheckOutcome) -> list[Finding]:
    return [f for f in outcome.findings if f.code == "SM-DRIVER-MAJOR-OLD"]


def test_a_cuda_13_extension_on_a_570_driver_is_incompatible(tmp_path: Path) -> None:
    outcome = _check(_site(tmp_path, 13), "570.124.06")
    (finding,) = [f for f in outcome.findings if f.code == "SM-DRIVER-MAJOR-OLD"]
    assert finding.severity is Severity.FAIL
    assert finding.subject == "kern/_C.so"
    assert "libcudart.so.13 (CUDA 13)" in finding.message
    assert ">= 580.65.06" in finding.message and "declared driver 570.124.06" in finding.message
    assert "CUDA driver version is insufficient for CUDA runtime version" in finding.message
    assert finding.details["cuda_major"] == 13
    assert outcome.verdict == "incompatible"


def test_a_580_driver_runs_it(tmp_path: Path) -> None:
    assert _major_findings(_check(_site(tmp_path, 13), "580.65.06")) == []


def test_a_cuda_12_extension_on_a_570_driver_is_fine(tmp_path: Path) -> None:
    assert _major_findings(_check(_site(tmp_path, 12), "570.124.06")) == []


def test_a_cuda_12_extension_on_a_520_driver_is_not(tmp_path: Path) -> None:
    (finding,) = _major_findings(_check(_site(tmp_path, 12), "520.61.05"))
    assert ">= 525.60.13" in finding.message


def test_a_cuda_13_kernel_beside_a_cuda_12_torch(tmp_path: Path) -> None:
    # torch's CUDA 12.8 is judged by SM-DRIVER-* and passes on 570; the kernel does not
    outcome = _check(_site(tmp_path, 13, torch="2.9.1+cu128"), "570.124.06")
    assert {f.code for f in outcome.findings if f.code.startswith("SM-DRIVER")} == {
        "SM-DRIVER-MAJOR-OLD"
    }


def test_the_cells_own_major_is_said_once(tmp_path: Path) -> None:
    # the cell's CUDA 13.0 on 570: SM-DRIVER-OLD says it, not once more per extension
    outcome = _check(_site(tmp_path, 13), "570.124.06", cuda="13.0")
    codes = [f.code for f in outcome.findings if f.code.startswith("SM-DRIVER")]
    assert codes == ["SM-DRIVER-OLD"]
    old = next(f for f in outcome.findings if f.code == "SM-DRIVER-OLD")
    assert "CUDA driver version is insufficient for CUDA runtime version" in old.message
