"""Library resolution and symbol checks on shared objects gcc builds here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stackmatrix.check import libs, symbols
from stackmatrix.check.scan import scan_extension

pytestmark = pytest.mark.integration


def _ctx(*process_dirs: Path) -> libs.SearchContext:
    return libs.SearchContext(
        root=Path("/"), process_dirs=process_dirs, system_dirs=libs.system_dirs(Path("/"))
    )


def _check(ext: Path, torch_dir: Path) -> tuple[libs.Closure, symbols.SymbolReport]:
    index = libs.LibraryIndex()
    closure = libs.needed_closure(ext, _ctx(torch_dir), index)
    scan = scan_extension(ext)
    return closure, symbols.check_symbols(scan.symbols, closure.resolved, closure.missing, index)


def test_extension_against_its_own_torch_is_clean(abi: Any) -> None:
    closure, report = _check(abi.extension, abi.torch_v1)
    assert closure.resolved["libc10.so"] == abi.torch_v1 / "libc10.so"
    assert not closure.missing
    assert report.groups == ()
    assert report.undefined_count >= 2


def test_extension_against_other_torch_has_undefined_symbol(abi: Any) -> None:
    closure, report = _check(abi.extension, abi.torch_v2)
    assert closure.resolved["libc10.so"] == abi.torch_v2 / "libc10.so"
    [group] = report.groups
    assert group.provider == "libc10.so"
    assert not group.provider_missing
    assert group.symbols == (
        "c10::removed_in_v2(std::__cxx11::basic_string<char, "
        "std::char_traits<char>, std::allocator<char> > const&)",
    )
    assert "another torch" in group.cause
    assert report.cxx11_abi is True


def test_missing_cuda12_runtime(abi: Any) -> None:
    index = libs.LibraryIndex()
    closure = libs.needed_closure(abi.cudart_user, _ctx(), index)
    assert closure.missing == {"libcudart.so.12": abi.cudart_user}
    scan = scan_extension(abi.cudart_user)
    report = symbols.check_symbols(scan.symbols, closure.resolved, closure.missing, index)
    [group] = report.groups
    assert group.provider == "libcudart" and group.provider_missing


def test_runpath_origin_is_followed(abi: Any, tmp_path: Path) -> None:
    import shutil
    import subprocess

    src = abi.root / "ext" / "ext.cpp"
    out = tmp_path / "pkg" / "ext_rp.so"
    out.parent.mkdir()
    (tmp_path / "pkg" / "libs").mkdir()
    shutil.copy(abi.torch_v1 / "libc10.so", tmp_path / "pkg" / "libs" / "libc10.so")
    subprocess.run(
        [
            "g++",
            "-shared",
            "-fPIC",
            "-o",
            str(out),
            str(src),
            "-L",
            str(abi.torch_v1),
            "-lc10",
            "-Wl,-rpath,$ORIGIN/libs",
            "-Wl,--enable-new-dtags",
        ],
        check=True,
    )
    scan = scan_extension(out)
    assert scan.dynamic.runpath == ("$ORIGIN/libs",)
    closure = libs.needed_closure(out, _ctx(), libs.LibraryIndex())
    assert closure.resolved["libc10.so"] == tmp_path / "pkg" / "libs" / "libc10.so"


def test_glibc_versions_against_this_root(abi: Any) -> None:
    index = libs.LibraryIndex()
    closure = libs.needed_closure(abi.extension, _ctx(abi.torch_v1), index)
    scan = scan_extension(abi.extension)
    libc_needs = {k: v for k, v in scan.version_needs.items() if k.startswith("lib")}
    assert any(v.startswith("GLIBC") for vs in libc_needs.values() for v in vs)
    assert symbols.check_versions(scan.version_needs, closure.resolved, index) == ()
    # a requirement this root cannot meet is reported
    fake = {"libc.so.6": ("GLIBC_2.99",)}
    [problem] = symbols.check_versions(fake, closure.resolved, index)
    assert problem.missing == ("GLIBC_2.99",)
