"""Each analysis module builds its own findings: libs, symbols, coverage,
driver, probe. The codes and severities each module gives for what it finds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stackmatrix.check import coverage, driver, libs, missinglibs, probe, symbols
from stackmatrix.check.fatbin import FatbinEntry
from stackmatrix.findings import Finding, Severity


def _codes(findings: list[Finding]) -> list[tuple[str, Severity]]:
    return [(f.code, f.severity) for f in findings]


def test_libs_missing_libraries() -> None:
    missing = {
        "libcuda.so.1": Path("/sp/x.so"),
        "libcudart.so.12": Path("/sp/x.so"),
        "libnuma.so.1": Path("/sp/x.so"),
    }
    closure = libs.Closure(resolved={}, missing=missing)
    found = missinglibs.lib_findings(closure, "x.so", "c", host_has_driver=False)
    assert _codes(found) == [
        ("SM-DRIVER-LIB-ABSENT", Severity.INFO),
        ("SM-LIB-MISSING", Severity.FAIL),
        ("SM-LIB-HOST-MISSING", Severity.WARN),
    ]
    assert "nvidia-cuda-runtime-cu12" in found[1].message
    assert found[0].details == {
        "library": "libcuda.so.1",
        "needed_by": "/sp/x.so",
        "extension": "x.so",
    }
    on_gpu_host = missinglibs.lib_findings(closure, "x.so", "c", host_has_driver=True)
    assert on_gpu_host[0].severity is Severity.WARN


def test_libs_cuda_majors_mixed() -> None:
    assert libs.cuda_mixed_findings({12: ["torch 2.9"]}, "c") == []
    mixed = libs.cuda_mixed_findings({13: ["torch 2.9"], 12: ["x.so"]}, "c")
    assert _codes(mixed) == [("SM-CUDA-MIXED", Severity.FAIL)]
    assert "CUDA 12: x.so; CUDA 13: torch 2.9" in mixed[0].message


def test_symbols_undefined_abi_and_versions() -> None:
    group = symbols.UnresolvedGroup(
        provider="libc10.so", provider_missing=False, symbols=("c10::f()",), cause="abi"
    )
    report = symbols.SymbolReport(
        undefined_count=1, groups=(group,), cxx11_abi=True, torch_cxx11_abi=False
    )
    versions = (
        symbols.VersionProblem(
            soname="libc.so.6",
            required=("GLIBC_2.38",),
            provided_by=Path("/lib/libc.so.6"),
            missing=("GLIBC_2.38",),
        ),
    )
    linked = libs.Closure(resolved={"libc10.so": Path("/t/libc10.so")}, missing={})
    found = symbols.symbol_findings(report, versions, linked, "x.so", "c")
    assert _codes(found) == [
        ("SM-SYM-UNDEFINED", Severity.FAIL),
        ("SM-CXX-ABI", Severity.FAIL),
        ("SM-GLIBC", Severity.FAIL),
    ]
    unlinked = symbols.symbol_findings(
        report, (), libs.Closure(resolved={}, missing={}), "x.so", "c"
    )
    assert _codes(unlinked)[0] == ("SM-SYM-GLOBAL", Severity.WARN)


def _entry(kind: Any, sm: int) -> FatbinEntry:
    return FatbinEntry(
        kind=kind,
        sm=sm,
        variant="",
        flags=0,
        header_size=0,
        size=0,
        compressed=False,
        compression=None,
        uncompressed_size=0,
        raw_kind=0,
    )


def test_coverage_per_target() -> None:
    extensions = [
        ("ptx.so", (_entry("ptx", 80),)),
        ("old.so", (_entry("cubin", 70),)),
        ("opt.so", (_entry("cubin", 70),)),
        ("cpu.so", ()),
    ]
    optional = (coverage.OptionalRule(glob="opt.so", feature="feat"),)
    cov = coverage.coverage_of(extensions, ["sm_90"], (), optional)
    assert cov.to_dict()["target_summary"] == {"sm_90": "none"}
    assert _codes(coverage.coverage_findings(cov, "c")) == [
        ("SM-ARCH-NONE", Severity.FAIL),
        ("SM-ARCH-OPTIONAL", Severity.INFO),
        ("SM-ARCH-PTX-ONLY", Severity.WARN),
    ]


@pytest.mark.parametrize(
    ("declared", "code"),
    [("400.1", "SM-DRIVER-OLD"), ("590.0", None)],
)
def test_driver_check(declared: str, code: str | None) -> None:
    data, found = driver.driver_check("12.8", declared, "c")
    assert data["found"] == declared and data["source"] == "declared"
    assert [f.code for f in found] == ([code] if code else [])


def test_driver_check_without_a_runtime() -> None:
    data, found = driver.driver_check(None, "590.0", "c")
    assert data["required_min"] is None and found == []


def test_probe_check(monkeypatch: pytest.MonkeyPatch) -> None:
    result = {
        "imports": {
            "a": {
                "installed": True,
                "ok": False,
                "error": {"message": "libcuda.so.1: cannot open shared object file"},
            },
            "b": {"installed": True, "ok": False, "error": {"type": "E", "message": "bad"}},
            "c": {"installed": False},
        },
        "gpu": {"cuda_available": False, "reason": "no device"},
    }
    monkeypatch.setattr(probe, "run_probe", lambda *a, **k: result)
    data, found = probe.probe_check(["py"], None, {}, "c")
    assert data == result
    assert _codes(found) == [
        ("SM-IMPORT-NEEDS-DRIVER", Severity.INFO),
        ("SM-IMPORT-FAILED", Severity.FAIL),
        ("SM-NO-GPU", Severity.INFO),
    ]


def test_probe_that_did_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*a: Any, **k: Any) -> dict[str, Any]:
        raise probe.ProbeFailed("no interpreter")

    monkeypatch.setattr(probe, "run_probe", fail)
    assert probe.probe_check(["py"], None, {}, "c") == (
        None,
        [
            Finding(
                code="SM-PROBE-FAILED",
                severity=Severity.WARN,
                cell="c",
                subject="probe",
                message="the runtime probe did not run: no interpreter",
            )
        ],
    )
