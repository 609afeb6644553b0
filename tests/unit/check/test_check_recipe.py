"""The recipe for a new check, performed: in a copy of the package, an analysis module
in check/ that builds its own findings and the one line of check/static.py that calls
it (2 files, and its code documented in docs/compat.md, as docs/architecture.md says)
make `stackmatrix inspect` report its finding on a real ELF extension built here by
gcc, with its verdict."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.package_copy import insert_after, perform_in_copy

ANALYSIS = '''"""Extensions that need no shared library at all (no DT_NEEDED): a throwaway check."""

from collections.abc import Sequence

from stackmatrix.check.extension import ExtResult
from stackmatrix.findings import Finding, Severity


def findings(results: Sequence[ExtResult], cell: str | None) -> list[Finding]:
    return [
        Finding(
            "SM-EXT-NO-NEEDED",
            Severity.WARN,
            f"{r.relpath} needs no shared library",
            cell=cell,
            subject=r.relpath,
        )
        for r in results
        if not r.scan.dynamic.needed
    ]
'''
CALL = "    findings += extension.arch_findings(results, cov, cell_id)\n"


def _perform(copy: Path) -> None:
    (copy / "check/noneeded.py").write_text(ANALYSIS)
    insert_after(
        copy / "check/static.py",
        CALL,
        "    from stackmatrix.check import noneeded\n\n"
        "    findings += noneeded.findings(results, cell_id)\n",
    )


def _extensions(site: Path, src: Path) -> None:
    """pkg/_alone.so needs nothing; pkg/_libc.so needs libc.so.6."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required for these tests: install gcc")
    (site / "pkg").mkdir(parents=True)
    code = src / "entry.c"
    code.write_text("int entry(void) { return 1; }\n")
    base = [gcc, "-shared", "-fPIC", str(code)]
    subprocess.run([*base, "-nostdlib", "-o", str(site / "pkg/_alone.so")], check=True)
    needs = ["-Wl,--no-as-needed", "-lc"]
    subprocess.run([*base, *needs, "-o", str(site / "pkg/_libc.so")], check=True)


def test_a_new_check_touches_two_files_and_inspect_reports_it(tmp_path: Path) -> None:
    package = tmp_path / "package"
    perform_in_copy(package, _perform, ["check/noneeded.py", "check/static.py"])
    site = tmp_path / "site"
    _extensions(site, tmp_path)
    argv = [sys.executable, "-m", "stackmatrix", "inspect", "--json", str(site)]
    compat = {"STACKMATRIX_COMPAT_DIR": str(Path(__file__).resolve().parents[3] / "compat")}
    env = {**os.environ, "PYTHONPATH": str(package), **compat}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    ours = [f for f in out["findings"] if f["code"] == "SM-EXT-NO-NEEDED"]
    assert [f["subject"] for f in ours] == ["pkg/_alone.so"]  # not the one needing libc
    assert out["verdict"] == "warnings"  # its severity is the verdict's, as any finding's
    # the installed package has no such check
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    assert "SM-EXT-NO-NEEDED" not in plain.stdout
