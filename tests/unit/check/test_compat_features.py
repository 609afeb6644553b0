"""Features that hang on one file (FA3 in sglang-kernel) and kernels compiled at first use
(flashinfer): findings from compat/features.toml against an inventory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stackmatrix.check import nvcc as nvcc_module
from stackmatrix.check.features import feature_findings
from stackmatrix.check.inventory import read_inventory


def _dist(site: Path, name: str, version: str, files: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for rel in files:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(b"")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def test_sglang_kernel_without_flash_ops_has_no_fa3(tmp_path: Path) -> None:
    # as in the offline kit on the H200: sgl_kernel imports, flash_ops was left out
    _dist(tmp_path, "sglang-kernel", "0.4.4", ["sgl_kernel/__init__.py"])
    findings, _ = feature_findings(read_inventory([tmp_path]), {}, "c")
    fa3 = [f for f in findings if f.code == "SM-FEATURE-ABSENT"]
    assert len(fa3) == 1 and fa3[0].severity.value == "warn"
    assert "--attention-backend fa3" in fa3[0].message and "flash_ops" in fa3[0].message
    (tmp_path / "sgl_kernel" / "flash_ops.abi3.so").write_bytes(b"\x7fELF")
    findings, _ = feature_findings(read_inventory([tmp_path]), {}, "c")
    assert not [f for f in findings if f.code == "SM-FEATURE-ABSENT"]


def test_flashinfer_without_prebuilt_kernels_needs_nvcc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nvcc_module, "HOST_TOOLKIT", str(tmp_path / "usr-local-cuda"))
    site, cuda = tmp_path / "site", tmp_path / "cuda"
    _dist(site, "flashinfer-python", "0.6.12", ["flashinfer/__init__.py"])
    empty_path = {"PATH": str(tmp_path / "nowhere"), "CUDA_HOME": str(cuda)}
    findings, data = feature_findings(read_inventory([site]), empty_path, "c")
    assert [(f.code, f.severity.value) for f in findings] == [("SM-JIT-ONLY", "warn")]
    assert "cannot compile" in findings[0].message
    nvcc = cuda / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    findings, data = feature_findings(read_inventory([site]), empty_path, "c")
    assert [(f.code, f.severity.value) for f in findings] == [("SM-JIT-ONLY", "info")]
    assert data["jit"]["flashinfer-python"]["tool_path"] == str(nvcc)
    _dist(site, "flashinfer-jit-cache", "0.6.12", ["flashinfer_jit_cache/__init__.py"])
    findings, data = feature_findings(read_inventory([site]), empty_path, "c")
    assert findings == [] and data["jit"]["flashinfer-python"]["prebuilt"] == [
        "flashinfer-jit-cache"
    ]
    assert os.environ.get("CUDA_HOME") != str(cuda)  # the cell's env, not ours


def test_an_images_nvcc_is_looked_for_in_the_image_not_on_the_host(tmp_path: Path) -> None:
    """For a docker cell the host's nvcc (this machine has one) was reported;
    the image's root is what counts, its absolute links followed inside it."""
    root = tmp_path / "rootfs"
    site = root / "opt/venv/site-packages"
    _dist(site, "flashinfer-python", "0.6.4", ["flashinfer/__init__.py"])
    findings, data = feature_findings(read_inventory([site]), {}, "c", root=root)
    assert [(f.code, f.severity.value) for f in findings] == [("SM-JIT-ONLY", "warn")]
    assert data["jit"]["flashinfer-python"]["tool_path"] is None
    toolkit = root / "usr/local/cuda-13.0/bin"
    toolkit.mkdir(parents=True)
    (toolkit / "nvcc").write_bytes(b"\x7fELF")
    (root / "usr/local/cuda").symlink_to("/usr/local/cuda-13.0")  # absolute, as in images
    findings, data = feature_findings(read_inventory([site]), {}, "c", root=root)
    assert [(f.code, f.severity.value) for f in findings] == [("SM-JIT-ONLY", "info")]
    assert data["jit"]["flashinfer-python"]["tool_path"] == "/usr/local/cuda/bin/nvcc"
