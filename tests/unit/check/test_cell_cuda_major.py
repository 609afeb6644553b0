"""SM-CUDA-CELL-MISMATCH (check/cudamajor.py): what was installed for another CUDA major
than the cell's `cuda`, judged from each extension's DT_NEEDED as the static scan records
it (tests/integration/check/test_cuda_index_mismatch.py builds real wheels for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stackmatrix.check import cudamajor
from stackmatrix.check.inventory import Inventory, read_inventory
from stackmatrix.findings import Severity


def _inventory(site: Path, dists: dict[str, tuple[str, list[str]]]) -> Inventory:
    for name, (version, files) in dists.items():
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    return read_inventory([site])


def _ext(relpath: str, package: str | None, *needed: str) -> dict[str, Any]:
    return {"relpath": relpath, "package": package, "needed": [*needed, "libc.so.6"]}


def test_the_declared_major() -> None:
    assert cudamajor.declared_major("12.9") == 12
    assert cudamajor.declared_major("13") == 13
    assert cudamajor.declared_major(None) is None
    assert cudamajor.declared_major("cpu") is None


def test_an_extension_of_another_major_names_its_wheel_and_libraries(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, {"vllm": ("0.20.2", ["vllm/_C.abi3.so"])})
    exts = [
        _ext("vllm/_C.abi3.so", "vllm", "libcudart.so.13", "libcublas.so.13", "libcufft.so.12"),
        _ext("vllm/_ok.abi3.so", "vllm", "libcudart.so.12"),
        _ext("plain.abi3.so", None),
    ]
    (found,) = cudamajor.cell_cuda_findings(exts, inv, "12.9", "cu129")
    assert found.code == "SM-CUDA-CELL-MISMATCH" and found.severity is Severity.FAIL
    assert found.subject == "vllm/_C.abi3.so" and found.cell == "cu129"
    # libcufft numbers its sonames on its own: not a CUDA major
    assert found.details["libraries"] == ["libcudart.so.13", "libcublas.so.13"]
    assert (found.details["distribution"], found.details["version"]) == ("vllm", "0.20.2")
    assert found.message.startswith("vllm 0.20.2 is a CUDA 13 build: vllm/_C.abi3.so needs")
    assert "+cu129" in found.message


def test_no_declared_cuda_judges_nothing(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, {"vllm": ("0.20.2", [])})
    assert (
        cudamajor.cell_cuda_findings([_ext("v/_C.so", "vllm", "libcudart.so.13")], inv, None, "c")
        == []
    )


def test_torch_of_another_major_is_named_once(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, {"torch": ("2.11.0+cu130", [])})
    (found,) = cudamajor.cell_cuda_findings([], inv, "12.8", "c")
    assert found.subject == "torch" and found.details["majors"] == [13]
    assert found.message.startswith("torch 2.11.0+cu130 is a CUDA 13 build")


def test_builds_for_other_majors_and_optional_files(tmp_path: Path) -> None:
    inv = _inventory(tmp_path, {"sgl-kernel": ("0.3.21", [])})
    exts = [
        # torch-memory-saver loads the build for the cell's major only (loaders.toml)
        _ext("torch_memory_saver_hook_mode_preload_cu13.abi3.so", None, "libcudart.so.13"),
        # FA3: only that feature is lost
        _ext("sgl_kernel/flash_ops.abi3.so", "sgl-kernel", "libcudart.so.13"),
    ]
    (found,) = cudamajor.cell_cuda_findings(exts, inv, "12.8", "c")
    assert found.subject == "sgl_kernel/flash_ops.abi3.so"
    assert found.severity is Severity.INFO and "optional" in found.message
