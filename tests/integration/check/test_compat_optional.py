"""Extensions that serve one optional feature (compat/loaders.toml [[optional]]): a
library they need and the environment lacks is info, while the same gap in any other
extension stays a warning. Built here with gcc against a library then removed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from stackmatrix.check.phase import inspect_path
from stackmatrix.findings import Finding, Severity

EXT = "int feature(void);\nint entry(void) { return feature(); }\n"
LIB = "int feature(void) { return 7; }\n"


def _ext(path: Path, libdir: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    src = path.parent / "ext.c"
    src.write_text(EXT)
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(path), str(src), "-L", str(libdir), "-ltbbx"]
    subprocess.run(cmd, check=True)
    src.unlink()


def _subject(finding: Finding) -> str:
    assert finding.subject is not None, finding
    return finding.subject


def test_missing_library_of_an_optional_extension_is_info(tmp_path: Path) -> None:
    libdir = tmp_path / "gone"
    libdir.mkdir()
    lib_src = libdir / "lib.c"
    lib_src.write_text(LIB)
    # the soname the extensions will ask for; the library is deleted afterwards
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libtbbx.so.12",
            "-o",
            str(libdir / "libtbbx.so"),
            str(lib_src),
        ],
        check=True,
    )
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    tag = "cpython-311-x86_64-linux-gnu.so"
    _ext(site / "numba" / "np" / "ufunc" / f"tbbpool.{tag}", libdir)  # optional
    _ext(site / "plainpkg" / f"core.{tag}", libdir)  # not optional
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for p in libdir.iterdir():
        p.unlink()

    outcome = inspect_path(venv, targets=["sm_90"])
    found = {
        (_subject(f).split("/")[0], f.code): f
        for f in outcome.findings
        if f.code == "SM-LIB-HOST-MISSING"
    }
    optional = found[("numba", "SM-LIB-HOST-MISSING")]
    plain = found[("plainpkg", "SM-LIB-HOST-MISSING")]
    assert optional.severity is Severity.INFO
    assert "numba's TBB threading layer" in optional.message
    assert optional.details["library"] == "libtbbx.so.12"
    assert optional.details["optional_feature"].startswith("numba's TBB")
    assert plain.severity is Severity.WARN and "optional" not in plain.details
    assert outcome.verdict == "warnings"  # the plain one still counts
