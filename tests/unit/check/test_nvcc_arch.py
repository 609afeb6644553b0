"""The nvcc FlashInfer's JIT will use, against the cell's target archs.

vllm#50705 / vllm#54267: on an RTX 5090 (sm_120) with torch 2.13.0+cu130 and a CUDA 12.8
toolkit under CUDA_HOME, FlashInfer takes the toolkit's nvcc (CUDA_HOME, then PATH,
before torch's CUDA), drops the arch ("SM 12.x requires CUDA >= 12.9") and fails the
first JIT build with "FlashInfer requires GPUs with sm75 or higher"; with nvcc 12.9 the
same modules compile (flashinfer#3633's reports). The nvcc binaries here are real ELF
executables built by gcc that carry nvcc's version banner, as nvcc does.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.support.nvccbin import gcc_nvcc

from stackmatrix.built_environment import Environment
from stackmatrix.check import nvcc, nvccarch
from stackmatrix.check.coverage import parse_target
from stackmatrix.check.phase import check_environment
from stackmatrix.findings import Severity


def _site(tmp_path: Path, torch_cuda: str = "13.0", flashinfer: str | None = "0.6.18") -> Path:
    site = tmp_path / "site-packages"
    dists = [("torch", "2.13.0")] + ([("flashinfer-python", flashinfer)] if flashinfer else [])
    for name, version in dists:
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
    (site / "torch").mkdir()
    (site / "torch/version.py").write_text(f"__version__ = '2.13.0'\ncuda: str = '{torch_cuda}'\n")
    return site


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A venv on this host with nothing of the host's own CUDA in view."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(nvcc, "HOST_TOOLKIT", str(tmp_path / "usr-local-cuda"))
    return tmp_path


def _check(site: Path, env: dict[str, str], targets: list[str]) -> list[tuple[str, str]]:
    environment = Environment(backend="venv", python=("python3",), site_packages=(site,), env=env)
    outcome = check_environment(
        environment,
        cell_id="c",
        targets=targets,
        cuda=None,
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    return [
        (f.code, f.details.get("target", ""))
        for f in outcome.findings
        if f.code == "SM-NVCC-ARCH-TOO-OLD"
    ]


def test_the_banner_of_a_gcc_built_nvcc_is_read(host: Path) -> None:
    binary = gcc_nvcc(host / "cuda-12.8/bin/nvcc", "12.8", "12.8.93")
    out = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    assert "release 12.8, V12.8.93" in out  # the oracle: what `nvcc --version` prints
    assert nvcc.read_version(binary) == ("12.8", "12.8.93")


def test_cuda_home_nvcc_12_8_for_sm_120_fails_with_flashinfers_words(host: Path) -> None:
    home = host / "cuda-12.8"
    gcc_nvcc(home / "bin/nvcc", "12.8", "12.8.93")
    site = _site(host)
    environment = Environment(
        backend="venv", python=("python3",), site_packages=(site,), env={"CUDA_HOME": str(home)}
    )
    outcome = check_environment(
        environment,
        cell_id="c",
        targets=["sm_120"],
        cuda=None,
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    [f] = [f for f in outcome.findings if f.code == "SM-NVCC-ARCH-TOO-OLD"]
    assert f.severity is Severity.FAIL and f.subject == f"{home}/bin/nvcc"
    assert f.details["minimum"] == "12.9" and f.details["version"] == "12.8.93"
    assert f.details["public_message"] == "SM 12.x requires CUDA >= 12.9"
    for words in (
        "12.8.93",
        "sm_120",
        "12.9",
        "SM 12.x requires CUDA >= 12.9",
        "FlashInfer requires GPUs with sm75 or higher",
        str(home),
    ):
        assert words in f.message
    assert outcome.verdict == "incompatible"
    assert outcome.data["nvcc"]["targets"]["sm_120"]["minimum"] == "12.9"


def test_nvcc_12_9_passes_and_an_h200_target_needs_nothing_new(host: Path) -> None:
    home = host / "cuda-12.9"
    gcc_nvcc(home / "bin/nvcc", "12.9", "12.9.86")
    assert _check(_site(host), {"CUDA_HOME": str(home)}, ["sm_120", "sm_121"]) == []
    old = host / "cuda-12.8"
    gcc_nvcc(old / "bin/nvcc", "12.8", "12.8.93")
    assert _check(_site(host / "b"), {"CUDA_HOME": str(old)}, ["sm_90"]) == []


def test_path_nvcc_comes_before_a_wheels_when_cuda_home_is_unset(
    host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flashinfer's get_cuda_path: CUDA_HOME, CUDA_PATH, then `which nvcc`; the wheel's
    nvcc (nvidia/cu13/bin) is used only where none of those gives one."""
    site = _site(host)
    gcc_nvcc(site / "nvidia/cu13/bin/nvcc", "13.0", "13.0.88")
    on_path = gcc_nvcc(host / "toolkit-12.8/bin/nvcc", "12.8", "12.8.93")
    monkeypatch.setenv("PATH", f"{host}/empty-bin:{on_path.parent}")
    assert _check(site, {}, ["sm_120"]) == [("SM-NVCC-ARCH-TOO-OLD", "sm_120")]
    monkeypatch.setenv("PATH", f"{host}/empty-bin")
    assert _check(site, {}, ["sm_120"]) == []  # the wheel's 13.0 nvcc


def test_an_arch_newer_than_nvcc_without_a_gate(host: Path) -> None:
    """sm_110 needs CUDA 13.0 whatever the JIT; the message says nvcc's first release."""
    home = host / "cuda-12.9"
    gcc_nvcc(home / "bin/nvcc", "12.9", "12.9.86")
    site = _site(host)
    found, _ = nvcc.find_nvcc(Path("/"), [site], {"CUDA_HOME": str(home)})
    data, out = nvccarch.arch_findings(found, ["sm_110", "sm_103"], {"sglang": "0.5.14"}, "c")
    assert [(f.code, f.details["target"], f.details["minimum"]) for f in out] == [
        ("SM-NVCC-ARCH-TOO-OLD", "sm_110", "13.0")
    ]
    assert out[0].details["public_message"] is None
    assert "nvcc first targets sm_110 in CUDA 13.0" in out[0].message
    assert data["sm_103"]["minimum"] == "12.9"


def test_no_jit_user_no_finding_and_a_gate_limited_by_version(host: Path) -> None:
    home = host / "cuda-12.8"
    found = nvcc.Nvcc(path=f"{home}/bin/nvcc", release="12.8", version="12.8.93", source="binary")
    assert nvccarch.arch_findings(found, ["sm_120"], {"torch": "2.13.0"}, "c")[1] == []
    table = {
        "schema_version": 1,
        "jit_gate": [
            {
                "package": "flashinfer-python",
                "major": 12,
                "minimum": "12.9",
                "message": "m",
                "versions": "<0.7",
            }
        ],
    }
    assert (
        nvccarch.arch_findings(found, ["sm_120"], {"flashinfer-python": "0.7.1"}, "c", table)[1]
        == []
    )
    assert (
        len(
            nvccarch.arch_findings(found, ["sm_120"], {"flashinfer-python": "0.6.18"}, "c", table)[
                1
            ]
        )
        == 1
    )


def test_the_shipped_table_has_a_source_per_entry() -> None:
    archs, gates = nvccarch.rules()
    assert archs and gates and all(a.source for a in archs) and all(g.source for g in gates)
    need = nvccarch.need_of(parse_target("sm_121"), {}, archs, gates)
    assert need is not None and need.minimum == "12.9"


def test_an_h100_target_needs_an_nvcc_that_knows_hopper(host: Path) -> None:
    """sm_90 first in CUDA 11.8: an 11.7 toolkit JIT-compiles nothing for an H100/H200
    (its torch would be a CUDA 11 build, judged by nvcc.py against torch's CUDA too)."""
    old = host / "cuda-11.7"
    gcc_nvcc(old / "bin/nvcc", "11.7", "11.7.99")
    found, _ = nvcc.find_nvcc(Path("/"), [_site(host)], {"CUDA_HOME": str(old)})
    _, out = nvccarch.arch_findings(found, ["sm_90"], {"sglang": "0.5.14"}, "c")
    assert [(f.code, f.details["target"], f.details["minimum"]) for f in out] == [
        ("SM-NVCC-ARCH-TOO-OLD", "sm_90", "11.8")
    ]
    assert "nvcc first targets sm_90 in CUDA 11.8" in out[0].message
    ok = host / "cuda-11.8"
    gcc_nvcc(ok / "bin/nvcc", "11.8", "11.8.89")
    found, _ = nvcc.find_nvcc(Path("/"), [_site(host / "b")], {"CUDA_HOME": str(ok)})
    assert nvccarch.arch_findings(found, ["sm_90"], {"sglang": "0.5.14"}, "c")[1] == []
