"""Our fatbin parser against cuobjdump, on fatbins nvcc builds here."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stackmatrix.check import coverage
from stackmatrix.check._elffile import ELFFile
from stackmatrix.check.fatbin import FatbinEntry, elf_fatbin_entries
from stackmatrix.check.phase import inspect_path, render_text

pytestmark = pytest.mark.integration


def _ours(path: Path) -> list[FatbinEntry]:
    with ELFFile(path) as elf:
        return elf_fatbin_entries(elf)


@pytest.mark.parametrize("variant", ["plain", "compressed"])
def test_entries_match_cuobjdump(
    fatbins: Any, cuobjdump_list: Callable[[Path], list[tuple[str, str]]], variant: str
) -> None:
    path = getattr(fatbins, variant)
    entries = _ours(path)
    oracle = cuobjdump_list(path)
    for kind in ("cubin", "ptx"):
        assert [e.cuobjdump_arch for e in entries if e.kind == kind] == [
            a for k, a in oracle if k == kind
        ]
    assert {e.arch for e in entries} >= {
        "sm_90a",
        "sm_120a",
        "sm_100f",
        "sm_80",
        "compute_120",
        "compute_90a",
    }


def test_family_flag_matches_cuobjdump_elf_header(fatbins: Any, cuobjdump: str) -> None:
    # --list-elf drops the `f` of a family cubin; the dumped ELF header keeps it
    proc = subprocess.run(
        [cuobjdump, "-elf", str(fatbins.plain)], capture_output=True, text=True, check=True
    )
    dumped = [
        line.split("=", 1)[1].strip()
        for line in proc.stdout.splitlines()
        if line.startswith("arch = ")
    ]
    ours = [e.arch for e in _ours(fatbins.plain) if e.kind == "cubin"]
    assert set(ours) <= set(dumped)
    assert "sm_100f" in ours


def test_compression_is_seen(fatbins: Any) -> None:
    plain, packed = _ours(fatbins.plain), _ours(fatbins.compressed)
    assert not any(e.compressed for e in plain if e.kind == "cubin")
    assert all(e.compressed for e in packed)
    assert {e.compression for e in packed} == {"zstd"}
    assert [e.arch for e in plain] == [e.arch for e in packed]
    cubin = next(e for e in packed if e.kind == "cubin")
    assert cubin.uncompressed_size > cubin.size


def test_coverage_of_built_fatbin(fatbins: Any) -> None:
    entries = _ours(fatbins.plain)
    judge = {
        t: coverage.judge(entries, coverage.parse_target(t))
        for t in ("sm_90", "sm_120", "sm_121", "sm_100", "sm_103", "sm_86", "sm_75")
    }
    assert judge == {
        "sm_90": "native",  # sm_90a cubin, exactly
        "sm_120": "native",  # sm_120a cubin
        "sm_121": "ptx",  # sm_120a cubin is not enough; compute_120 PTX JITs forward
        "sm_100": "native",  # sm_100f
        "sm_103": "native",  # sm_100f covers its family
        "sm_86": "native",  # sm_80 cubin runs on 8.6
        "sm_75": "none",
    }


def test_inspect_so_renders_arches(fatbins: Any) -> None:
    outcome = inspect_path(fatbins.compressed, targets=["sm_120", "sm_75"])
    assert outcome.verdict == "incompatible"
    assert [f.code for f in outcome.findings] == ["SM-ARCH-NONE"]
    assert outcome.data["target_summary"] == {"sm_120": "native", "sm_75": "none"}
    text = render_text(outcome)
    assert "sm_90a sm_120a sm_100f sm_80" in text
    ptx_line = next(line for line in text.splitlines() if line.strip().startswith("ptx:"))
    assert sorted(ptx_line.split()[1:]) == ["compute_120", "compute_90a"]
