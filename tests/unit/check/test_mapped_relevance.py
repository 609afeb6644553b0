"""The report's live mapped set (report/mapped.py) and the check's serving-path
relevance (check/relevance.py) name a finding's file by one rule,
relevance.finding_file: the finding's subject. Before, the report read
details["file"/"path"/"extension"], so it missed every symbol and ABI finding (whose
details name no file) and named the absent file of SM-FEATURE-ABSENT as one the server
never mapped."""

from __future__ import annotations

from pathlib import Path

from stackmatrix.check import relevance
from stackmatrix.findings import Finding, Severity
from stackmatrix.report.mapped import _unmapped

SITE = "/venv/lib/python3.12/site-packages"


def _findings() -> tuple[Finding, ...]:
    undefined = Finding(
        "SM-SYM-UNDEFINED",
        Severity.FAIL,
        "torchao/_C.abi3.so uses 2 symbols ...",
        subject="torchao/_C.abi3.so",
        details={"groups": []},
    )
    abi = Finding(
        "SM-CXX-ABI",
        Severity.FAIL,
        "abi",
        subject="sgl_kernel/common_ops.abi3.so",
        details={"extension": False, "torch": True},
    )
    absent = Finding(
        "SM-FEATURE-ABSENT",
        Severity.WARN,
        "no FA3",
        subject="sglang-kernel 0.4.10",
        details={"file": "sgl_kernel/flash_ops.abi3.so"},
    )
    unreadable = Finding(
        "SM-ELF-UNREADABLE", Severity.WARN, "cannot read", subject=f"{SITE}/top_ext.so"
    )
    driver = Finding("SM-DRIVER-LIB-ABSENT", Severity.INFO, "x", subject="flashinfer/_k.so")
    mixed = Finding("SM-CUDA-MIXED", Severity.FAIL, "two majors", subject="cuda")
    return (undefined, abi, absent, unreadable, driver, mixed)


def test_the_report_names_the_files_the_check_judges() -> None:
    mapped = {"sgl_kernel/common_ops.abi3.so"}
    assert _unmapped(_findings(), mapped) == ("torchao/_C.abi3.so", "top_ext.so")


def test_each_file_the_report_names_is_one_mark_latent_would_mark() -> None:
    findings = _findings()
    files = [relevance.finding_file(f) for f in findings]
    assert files == [
        "torchao/_C.abi3.so",
        "sgl_kernel/common_ops.abi3.so",
        None,
        f"{SITE}/top_ext.so",
        None,
        None,
    ]
    latent = {
        "torchao/_C.abi3.so": Path(f"{SITE}/torchao/_C.abi3.so"),
        "top_ext.so": Path(f"{SITE}/top_ext.so"),
    }
    marked = relevance.mark_latent(list(findings), latent)
    assert [f.code for f in marked if relevance.is_latent(f)] == [
        "SM-SYM-UNDEFINED",
        "SM-ELF-UNREADABLE",
    ]
    # what the live server did not map is what the static check calls latent
    assert set(_unmapped(findings, {"sgl_kernel/common_ops.abi3.so"})) == set(latent)
