"""nvcc, the CUDA runtime headers and CCCL, as NVIDIA's CUDA 13 wheels lay them out.

flashinfer#3493: torch 2.11.0+cu130 with CUDA_HOME at site-packages/nvidia/cu13, where
nvidia-cuda-nvcc 13.3 put nvcc 13.3.33 and nvidia-cuda-runtime 13.0 put headers that
say CUDART_VERSION 13000; every JIT build of flashinfer's sampler stopped with "CUDA
compiler and CUDA toolkit headers are incompatible, please check your include paths".
Here nvcc is a gcc-built executable carrying nvcc's banner, and the headers are files
the test writes with the defines and the check the real ones have.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.nvccbin import gcc_nvcc

from stackmatrix.built_environment import Environment
from stackmatrix.check import nvcc, nvccheaders
from stackmatrix.check.phase import check_environment
from stackmatrix.findings import Severity

MESSAGE = "CUDA compiler and CUDA toolkit headers are incompatible, please check your include paths"


def runtime_header(include: Path, cudart: int) -> None:
    include.mkdir(parents=True, exist_ok=True)
    (include / "cuda_runtime_api.h").write_text(
        f"#if !defined(__CUDA_RUNTIME_API_H__)\n#define __CUDA_RUNTIME_API_H__\n"
        f"#define CUDART_VERSION  {cudart}\n#endif\n"
    )


def cccl(include: Path, version: int, *, checks: bool = True) -> None:
    d = include / "cuda/std/__cccl"
    d.mkdir(parents=True, exist_ok=True)
    (d / "version.h").write_text(f"#define CCCL_VERSION {version}\n")
    check = (
        "#ifndef CCCL_DISABLE_CTK_COMPATIBILITY_CHECK\n"
        "#  if !_CCCL_CUDACC_EQUAL((CUDART_VERSION / 1000), (CUDART_VERSION % 1000) / 10)\n"
        f'#    error "{MESSAGE}"\n#  endif\n#endif\n'
    )
    (d / "cuda_toolkit.h").write_text("#pragma once\n" + (check if checks else ""))


def wheel_site(tmp_path: Path, *, nvcc_release: str, cudart: int, flashinfer: bool = True) -> Path:
    """site-packages as torch cu130 + nvidia-cuda-nvcc + nvidia-cuda-runtime +
    nvidia-cuda-cccl lay it out: all in nvidia/cu13."""
    site = tmp_path / "site-packages"
    dists = [("torch", "2.11.0")] + ([("flashinfer-python", "0.6.12")] if flashinfer else [])
    for name, version in dists:
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
    (site / "torch").mkdir()
    (site / "torch/version.py").write_text("__version__ = '2.11.0'\ncuda: str = '13.0'\n")
    cu13 = site / "nvidia/cu13"
    gcc_nvcc(cu13 / "bin/nvcc", nvcc_release, f"{nvcc_release}.33")
    runtime_header(cu13 / "include", cudart)
    cccl(cu13 / "include/cccl", 3003000)
    return site


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in (
        "CUDA_HOME",
        "CUDA_PATH",
        "FLASHINFER_EXTRA_CUDAFLAGS",
        "NVCC_APPEND_FLAGS",
        "NVCC_PREPEND_FLAGS",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(nvcc, "HOST_TOOLKIT", str(tmp_path / "usr-local-cuda"))
    return tmp_path


Found = list[tuple[str, Severity]]


def _outcome(site: Path, env: dict[str, str]) -> tuple[Found, dict[str, object]]:
    environment = Environment(backend="venv", python=("python3",), site_packages=(site,), env=env)
    outcome = check_environment(
        environment,
        cell_id="c",
        targets=["sm_120"],
        cuda="13.0",
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    found = [(f.code, f.severity) for f in outcome.findings if f.code == "SM-NVCC-HEADERS-MISMATCH"]
    return found, outcome.data["nvcc"]["headers"]


def test_nvcc_13_3_against_cuda_13_0_headers_fails(host: Path) -> None:
    site = wheel_site(host, nvcc_release="13.3", cudart=13000)
    cu13 = site / "nvidia/cu13"
    environment = Environment(
        backend="venv", python=("python3",), site_packages=(site,), env={"CUDA_HOME": str(cu13)}
    )
    outcome = check_environment(
        environment,
        cell_id="c",
        targets=["sm_120"],
        cuda="13.0",
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    [f] = [f for f in outcome.findings if f.code == "SM-NVCC-HEADERS-MISMATCH"]
    assert f.severity is Severity.FAIL and f.subject == f"{cu13}/bin/nvcc"
    for words in (
        "13.3.33",
        "CUDA 13.0 headers",
        "CUDART_VERSION 13000",
        MESSAGE,
        "CCCL 3.3.0",
        str(cu13 / "include/cccl"),
        "flashinfer#3493",
    ):
        assert words in f.message
    assert f.details["public_message"] == nvccheaders.CHECK_MESSAGE
    assert outcome.verdict == "incompatible"
    headers = outcome.data["nvcc"]["headers"]
    assert headers["cudart_version"] == 13000 and headers["cccl_version"] == "3.3.0"
    # nvcc 13.3 against 13.0 is also another minor than torch's: said apart, as a warning
    assert "SM-NVCC-CUDA-MINOR" in [x.code for x in outcome.findings]


def test_matching_headers_say_nothing(host: Path) -> None:
    site = wheel_site(host, nvcc_release="13.0", cudart=13000)
    found, headers = _outcome(site, {"CUDA_HOME": str(site / "nvidia/cu13")})
    assert found == [] and headers["cccl_checks"] is True


def test_flashinfers_vendored_cccl_is_the_one_included_first(host: Path) -> None:
    """flashinfer puts its own CCCL on -I before the toolkit's -isystem: a vendored copy
    without the check decides, and the mismatch is only a warning."""
    site = wheel_site(host, nvcc_release="13.3", cudart=13000)
    cccl(site / "flashinfer/data/cccl/libcudacxx/include", 3000003, checks=False)
    found, headers = _outcome(site, {"CUDA_HOME": str(site / "nvidia/cu13")})
    assert found == [("SM-NVCC-HEADERS-MISMATCH", Severity.WARN)]
    assert headers["cccl_version"] == "3.0.3" and headers["cccl_checks"] is False


def test_the_opt_out_define_and_no_jit_user(host: Path) -> None:
    site = wheel_site(host, nvcc_release="13.3", cudart=13000)
    env = {
        "CUDA_HOME": str(site / "nvidia/cu13"),
        "FLASHINFER_EXTRA_CUDAFLAGS": "-DCCCL_DISABLE_CTK_COMPATIBILITY_CHECK",
    }
    found, headers = _outcome(site, env)
    assert found == [("SM-NVCC-HEADERS-MISMATCH", Severity.INFO)]
    assert headers["check_disabled_by"] == "FLASHINFER_EXTRA_CUDAFLAGS"
    bare = wheel_site(host / "b", nvcc_release="13.3", cudart=13000, flashinfer=False)
    assert _outcome(bare, {"CUDA_HOME": str(bare / "nvidia/cu13")})[0] == []


def test_a_cuda_12_toolkit_layout(host: Path) -> None:
    """CUDA 12 keeps CCCL directly in include/ (no include/cccl)."""
    toolkit = host / "cuda-12.8"
    gcc_nvcc(toolkit / "bin/nvcc", "12.8", "12.8.93")
    runtime_header(toolkit / "targets/x86_64-linux/include", 12090)
    cccl(toolkit / "targets/x86_64-linux/include", 2008000)
    found = nvcc.Nvcc(
        path=f"{toolkit}/bin/nvcc", release="12.8", version="12.8.93", source="binary"
    )
    data, out = nvccheaders.headers_check(
        Path("/"), found, [], {}, installed={"sglang": "0.5.14"}, cell="c"
    )
    assert data is not None and data["cccl_version"] == "2.8.0"
    assert [(f.code, f.severity) for f in out] == [("SM-NVCC-HEADERS-MISMATCH", Severity.FAIL)]
