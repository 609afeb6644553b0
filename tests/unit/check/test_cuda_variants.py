"""Builds per CUDA major that a package never loads next to torch's CUDA (loaders.toml
[[cuda_variant]]): torch-memory-saver 0.0.10 ships `_cu12` and `_cu13` builds
of its hooks and loads the one for torch's CUDA major, so its CUDA 12 files next to a
cu130 torch are neither SM-LIB-MISSING failures nor a second CUDA major."""

from __future__ import annotations

import struct
from pathlib import Path

from stackmatrix.built_environment import Environment
from stackmatrix.check import coverage
from stackmatrix.check.phase import check_environment
from stackmatrix.findings import Severity

_SH = struct.Struct("<IIQQQQIIQQ")


def elf_needing(soname: str) -> bytes:
    """A small ELF64 shared object whose one DT_NEEDED entry is `soname`."""
    shstr = b"\0.shstrtab\0.dynstr\0.dynamic\0"
    dynstr = b"\0" + soname.encode() + b"\0"
    dynamic = struct.pack("<qQqQ", 1, 1, 0, 0)  # DT_NEEDED -> dynstr[1], DT_NULL
    blobs = [shstr, dynstr, dynamic]
    offsets, body = [], b""
    for blob in blobs:
        offsets.append(64 + len(body))
        body += blob + b"\0" * (-len(blob) % 8)
    shoff = 64 + len(body)
    meta = [(1, 3, 0, 0), (11, 3, 0, 0), (19, 6, 2, 16)]  # name, type, link, entsize
    headers = b"\0" * _SH.size + b"".join(
        _SH.pack(n, t, 0, 0, off, len(blob), link, 0, 8, ent)
        for (n, t, link, ent), off, blob in zip(meta, offsets, blobs, strict=True)
    )
    head = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    head += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 4, 1)
    return head + body + headers


def _dist(site: Path, name: str, version: str, files: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def _check(tmp_path: Path, extension: str) -> list[tuple[str, Severity]]:
    """An image root: torch 2.11.0+cu130 and one extension that needs libcudart.so.12."""
    root = tmp_path / extension
    site = root / "opt/venv/lib/python3.11/site-packages"
    _dist(site, "torch", "2.11.0+cu130", [])
    _dist(site, "torch-memory-saver", "0.0.10", [extension])
    (site / extension).write_bytes(elf_needing("libcudart.so.12"))
    env = Environment(
        backend="docker", python=("python3",), site_packages=(site,), root=root, image="i:1"
    )
    outcome = check_environment(
        env,
        cell_id="cu130",
        targets=["sm_90"],
        cuda="13.0",
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    return [(f.code, f.severity) for f in outcome.findings if f.code.startswith("SM-")]


def test_the_build_for_another_cuda_major_is_not_loaded(tmp_path: Path) -> None:
    found = _check(tmp_path, "torch_memory_saver_hook_mode_torch_cu12.abi3.so")
    assert ("SM-LIB-MISSING", Severity.INFO) in found
    assert "SM-CUDA-MIXED" not in [code for code, _ in found]
    assert not [code for code, sev in found if sev is Severity.FAIL]


def test_any_other_extension_needing_cuda_12_still_fails(tmp_path: Path) -> None:
    found = _check(tmp_path, "other_hooks_cu12.abi3.so")
    assert ("SM-LIB-MISSING", Severity.FAIL) in found
    assert ("SM-CUDA-MIXED", Severity.FAIL) in found


def test_the_rule_as_the_data_states_it() -> None:
    rules = coverage.cuda_variant_rules()
    name = "torch_memory_saver_hook_mode_preload"
    assert coverage.unused_cuda_variant(f"{name}_cu13.abi3.so", rules, 13) is None
    assert coverage.unused_cuda_variant(f"{name}_cu12.abi3.so", rules, 12) is None
    assert "_cu13." in str(coverage.unused_cuda_variant(f"{name}_cu12.abi3.so", rules, 13))
    # the unsuffixed build is ROCm's / XPU's: never loaded next to a CUDA torch
    assert coverage.unused_cuda_variant(f"{name}.abi3.so", rules, 13) is not None
    assert coverage.unused_cuda_variant(f"{name}_cu12.abi3.so", rules, None) is None
