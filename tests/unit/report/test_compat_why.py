"""The first screen says why a cell is "warnings" or "incompatible": the most severe
deciding finding of its check, the others of that severity and the latent ones counted
(report/compat_why.py); the details list the deciding findings first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stackmatrix.report import build_report

from ._results import finding, phase, run_dir, write

LIBNUMA = "sgl_kernel/sm90/common_ops.abi3.so needs the system library libnuma.so.1"


def _latent(code: str, severity: str, cell: str, subject: str) -> dict[str, Any]:
    f = finding(
        code,
        severity,
        f"{subject} is bad (latent: the serving process does not load this file)",
        cell,
        subject,
    )
    f["details"] = {"latent": True}
    return f


def _results(tmp_path: Path) -> Path:
    defs = {c: {"python": "3.11", "pins": ["x==1"]} for c in ("cu128", "cu130")}
    rd = run_dir(tmp_path, cells=["cu128", "cu130"], baseline="cu128", definitions=defs)
    drift = [
        finding("SM-DRIFT-UNPINNED-HEAVY", "warn", f"added p{i}", "cu128", f"p{i}")
        for i in range(25)
    ]
    write(rd / "cells/cu128/build.json", phase("cu128", "build", findings=drift))
    check = [
        _latent("SM-CXX-ABI", "fail", "cu128", "torchao/_C.abi3.so"),
        _latent("SM-LIB-MISSING", "fail", "cu128", "torchaudio/lib/_torchaudio.so"),
        finding("SM-NVCC-MISSING", "warn", "no nvcc for the JIT", "cu128", "nvcc"),
        finding("SM-LIB-HOST-MISSING", "warn", LIBNUMA, "cu128", "sgl_kernel/sm90/common_ops"),
        finding("SM-DRIVER-LIB-ABSENT", "info", "no driver here", "cu128", "x.so"),
    ]
    data = {"verdict": "warnings"}
    write(rd / "cells/cu128/check.json", phase("cu128", "check", data=data, findings=check))
    write(rd / "cells/cu130/build.json", phase("cu130", "build"))
    served = [finding("SM-SERVING-IMPORT-FAILED", "fail", "http_server fails", "cu130", "srv")]
    data = {"verdict": "incompatible"}
    write(rd / "cells/cu130/check.json", phase("cu130", "check", data=data, findings=served))
    return rd


def test_the_first_screen_gives_the_deciding_finding_and_counts(tmp_path: Path) -> None:
    outcome = build_report(_results(tmp_path))
    first_screen = outcome.markdown.read_text().split("### Performance")[0]
    assert (
        "- **cu128** warnings: ⚠️ `SM-LIB-HOST-MISSING` (sgl_kernel/sm90/common_ops): "
        f"{LIBNUMA} (1 more warning decides; 2 latent findings, about files the server does "
        "not load, not counted)"
    ) in first_screen
    assert "- **cu130** incompatible: ❌ `SM-SERVING-IMPORT-FAILED` (srv): http_server fails\n" in (
        first_screen + "\n"
    )
    assert "SM-DRIFT" not in first_screen  # the build's warnings do not make `compat`
    why = {c["id"]: c["compat_why"] for c in json.loads(outcome.json.read_text())["cells"]}
    assert why["cu128"]["first"]["code"] == "SM-LIB-HOST-MISSING"
    assert (why["cu128"]["deciding"], why["cu128"]["latent"]) == (2, 2)


def test_the_details_list_deciding_findings_before_latent_ones(tmp_path: Path) -> None:
    report = build_report(_results(tmp_path)).report
    codes = [f.code for f in report.cell("cu128").findings_by_phase["check"]]
    assert codes == [
        "SM-LIB-HOST-MISSING",
        "SM-NVCC-MISSING",
        "SM-DRIVER-LIB-ABSENT",
        "SM-CXX-ABI",
        "SM-LIB-MISSING",
    ]


def test_a_compatible_cell_needs_no_reason(tmp_path: Path) -> None:
    rd = _results(tmp_path)
    write(rd / "cells/cu130/check.json", phase("cu130", "check", data={"verdict": "compatible"}))
    report = build_report(rd).report
    assert report.cell("cu130").why is None
    assert "**cu130**" not in build_report(rd).markdown.read_text().split("### Performance")[0]


def test_a_missing_library_is_the_reason_before_the_import_failures_it_causes(
    tmp_path: Path,
) -> None:
    """The project's cu128 image with libnuma1 purged: sgl_kernel's import and the server's
    entry fail because of it, and the first screen names the library."""
    rd = _results(tmp_path)
    missing = "sgl_kernel/sm90/common_ops.abi3.so needs the system library libnuma.so.1"
    check = [
        finding("SM-IMPORT-FAILED", "fail", "import sgl_kernel fails", "cu130", "sgl_kernel"),
        finding("SM-SERVING-IMPORT-FAILED", "fail", "http_server fails", "cu130", "srv"),
        finding("SM-LIB-IMAGE-MISSING", "fail", missing, "cu130", "sgl_kernel/sm90/common_ops"),
    ]
    data = {"verdict": "incompatible"}
    write(rd / "cells/cu130/check.json", phase("cu130", "check", data=data, findings=check))
    outcome = build_report(rd)
    first_screen = outcome.markdown.read_text().split("### Performance")[0]
    assert (
        "- **cu130** incompatible: ❌ `SM-LIB-IMAGE-MISSING` (sgl_kernel/sm90/common_ops): "
        f"{missing} (2 more failures decide)"
    ) in first_screen
    codes = [f.code for f in outcome.report.cell("cu130").findings_by_phase["check"]]
    assert codes == ["SM-LIB-IMAGE-MISSING", "SM-IMPORT-FAILED", "SM-SERVING-IMPORT-FAILED"]


def _serving(module: str, judged_on: str, added: int) -> dict[str, Any]:
    """check.json's serving_path as check/environment.py writes it."""
    extra = f" plus {added} file{'s' if added != 1 else ''} by loader rule" if added else ""
    return {
        "known": True,
        "module": module,
        "judged_on": judged_on,
        "added": {},
        "judged_on_note": f"judged on the files mapped by the probe's import of {module}{extra}",
        "latent": [],
        "target_summary": {},
    }


def test_the_first_screen_says_what_each_verdict_was_judged_on(tmp_path: Path) -> None:
    """cu128 imported the server's entry with the stub libcuda and one file was added by
    the loader rule; cu130's entry failed, so a lighter module's set was judged; ok is
    compatible and says so, with its set; none of them hides its reason."""
    defs = {c: {"python": "3.11", "pins": ["x==1"]} for c in ("cu128", "cu130", "ok")}
    rd = run_dir(tmp_path, cells=["cu128", "cu130", "ok"], baseline="cu128", definitions=defs)
    entry = "sglang.srt.entrypoints.http_server"
    cells = {
        "cu128": ("warnings", _serving(entry, "entry with stub libcuda", 1), "SM-NVCC-MISSING"),
        "cu130": ("incompatible", _serving("sglang", "fallback", 0), "SM-SERVING-IMPORT-FAILED"),
        "ok": ("compatible", _serving(entry, "entry", 0), None),
    }
    for cid, (verdict, serving, code) in cells.items():
        write(rd / f"cells/{cid}/build.json", phase(cid, "build"))
        sev = "fail" if verdict == "incompatible" else "warn"
        found = [finding(code, sev, f"{code} here", cid, "s")] if code else []
        data = {"verdict": verdict, "serving_path": serving}
        write(rd / f"cells/{cid}/check.json", phase(cid, "check", data=data, findings=found))
    outcome = build_report(rd)
    first_screen = outcome.markdown.read_text().split("### Performance")[0]
    assert (
        "- **cu128** warnings: ⚠️ `SM-NVCC-MISSING` (s): SM-NVCC-MISSING here (judged on the "
        f"files mapped by the probe's import of {entry}, with the CUDA toolkit's stub libcuda "
        "in place of a driver, plus 1 file by loader rule)"
    ) in first_screen
    assert (
        "- **cu130** incompatible: ❌ `SM-SERVING-IMPORT-FAILED` (s): SM-SERVING-IMPORT-FAILED "
        "here (judged on the files mapped by the probe's import of sglang, a lighter module, "
        "as the server's entry failed to import)"
    ) in first_screen
    assert (
        "- **ok** compatible: no finding decides; judged on the files mapped by the probe's "
        f"import of {entry}\n"
    ) in first_screen
    html = outcome.html.read_text()
    assert "<b>ok</b> compatible: no finding decides" in html
    assert "with the CUDA toolkit&#x27;s stub libcuda in place of a driver" in html
    cells_json = {c["id"]: c for c in json.loads(outcome.json.read_text())["cells"]}
    assert cells_json["cu130"]["judged_on"].endswith("as the server's entry failed to import")
