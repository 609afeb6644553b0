"""A library an extension needs and nobody provides, said for who owns it and where the
server runs (check/missinglibs.py): in an image cell a system library the image lacks is
incompatible, naming the library, the extension and its Debian package; a wheel's own
library is a broken install; a venv's host keeps a warning. Real ELF files built here
with gcc (-nostdlib: their only DT_NEEDED are the ones each test names)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from stackmatrix.built_environment import Environment
from stackmatrix.check import libs, missinglibs
from stackmatrix.check.environment import check_environment, userland_of
from stackmatrix.check.inventory import read_inventory
from stackmatrix.check.static import CheckOutcome, static_check
from stackmatrix.findings import Finding, Severity

REPO = Path(__file__).resolve().parents[3]
MULTIARCH = "usr/lib/x86_64-linux-gnu"
SITE = "opt/stackmatrix/venv/lib/python3.11/site-packages"


def _gcc(*argv: str | Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required for these tests: install gcc")
    subprocess.run([gcc, "-shared", "-fPIC", "-nostdlib", *map(str, argv)], check=True)


def _library(directory: Path, soname: str, symbol: str, src_dir: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    src = src_dir / f"{symbol}.c"
    src.write_text(f"int {symbol}(void) {{ return 1; }}\n")
    out = directory / soname
    _gcc(f"-Wl,-soname,{soname}", "-o", out, src)
    return out


def _extension(out: Path, src_dir: Path, needs: dict[str, str], *flags: str) -> Path:
    """`out` calls one symbol of each library in `needs` (soname -> symbol)."""
    stubs = src_dir / f"stubs-{out.stem}"
    for soname, symbol in needs.items():
        _library(stubs, soname, symbol, src_dir)
        link = stubs / (soname.split(".so")[0] + ".so")
        if link.name != soname:
            link.symlink_to(soname)
    calls = " + ".join(f"{s}()" for s in needs.values())
    decls = "".join(f"int {s}(void);\n" for s in needs.values())
    src = src_dir / f"{out.stem}.c"
    src.write_text(f"{decls}int entry(void) {{ return {calls}; }}\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    libs_flags = [f"-l{n.split('.so')[0].removeprefix('lib')}" for n in needs]
    _gcc("-o", out, src, "-L", stubs, *flags, *libs_flags)
    return out


def _dist(site: Path, name: str, files: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def _image(tmp_path: Path, *, with_numa: bool) -> tuple[Path, Path]:
    """An image's files: sgl-kernel's common_ops needs libnuma.so.1, which the image's
    /usr/lib holds or not."""
    root = tmp_path / "rootfs"
    site = root / SITE
    ext = site / "sgl_kernel" / "sm90" / "common_ops.abi3.so"
    _extension(ext, tmp_path, {"libnuma.so.1": "numa_available"})
    _dist(site, "sgl-kernel", ["sgl_kernel/sm90/common_ops.abi3.so"])
    (root / MULTIARCH).mkdir(parents=True)
    if with_numa:
        _library(root / MULTIARCH, "libnuma.so.1", "numa_available", tmp_path)
    return root, site


def _static(root: Path, site: Path, userland: missinglibs.Userland) -> CheckOutcome:
    return static_check(
        [site],
        read_inventory([site]),
        libs.search_context(root, [site]),
        cell_id="cu128",
        targets=[],
        resolve=True,
        host_has_driver=False,
        userland=userland,
    )


def _codes(outcome: CheckOutcome) -> list[tuple[str, Severity]]:
    return [(f.code, f.severity) for f in outcome.findings]


def test_an_image_without_libnuma_is_incompatible_naming_library_extension_package(
    tmp_path: Path,
) -> None:
    root, site = _image(tmp_path, with_numa=False)
    outcome = _static(root, site, "image")
    assert outcome.verdict == "incompatible"
    assert _codes(outcome) == [("SM-LIB-IMAGE-MISSING", Severity.FAIL)]
    finding = outcome.findings[0]
    assert finding.subject == "sgl_kernel/sm90/common_ops.abi3.so"
    for part in ("libnuma.so.1", "sgl_kernel/sm90/common_ops.abi3.so", "install libnuma1"):
        assert part in finding.message
    assert "host" not in finding.message  # no host can help a container
    assert finding.details["package"] == "libnuma1"
    assert finding.details["userland"] == "image"


def test_the_same_image_with_libnuma_is_compatible(tmp_path: Path) -> None:
    root, site = _image(tmp_path, with_numa=True)
    outcome = _static(root, site, "image")
    assert (outcome.verdict, outcome.findings) == ("compatible", [])


def test_on_a_host_the_missing_system_library_stays_a_warning(tmp_path: Path) -> None:
    root, site = _image(tmp_path, with_numa=False)
    outcome = _static(root, site, "host")
    assert outcome.verdict == "warnings"
    assert _codes(outcome) == [("SM-LIB-HOST-MISSING", Severity.WARN)]
    assert "install libnuma1" in outcome.findings[0].message


def _found(closure: libs.Closure, owners: missinglibs.Owners) -> list[Finding]:
    return missinglibs.lib_findings(closure, "x.so", "c", host_has_driver=False, owners=owners)


@pytest.mark.parametrize("userland", ["host", "image"])
def test_a_library_no_table_names_gets_no_borrowed_hint(userland: missinglibs.Userland) -> None:
    closure = libs.Closure(resolved={}, missing={"libctc_prefix_decoder.so": Path("/sp/x.so")})
    (finding,) = _found(closure, missinglibs.Owners(userland=userland))
    assert "libnuma" not in finding.message
    assert "no Debian package for it is listed" in finding.message
    assert "package" not in finding.details


def test_a_library_an_installed_wheel_ships_is_that_wheels_not_the_systems() -> None:
    """deep_gemm/_C.so needs libtvm_ffi.so, which apache-tvm-ffi ships off its path."""
    closure = libs.Closure(resolved={}, missing={"libtvm_ffi.so": Path("/sp/deep_gemm/_C.so")})
    owners = missinglibs.Owners(
        userland="image",
        wheel_files={"libtvm_ffi.so": ("apache-tvm-ffi", "tvm_ffi/lib/libtvm_ffi.so")},
    )
    (finding,) = _found(closure, owners)
    assert (finding.code, finding.severity) == ("SM-LIB-WHEEL-MISSING", Severity.WARN)
    assert "apache-tvm-ffi (tvm_ffi/lib/libtvm_ffi.so)" in finding.message
    assert "install is broken" in finding.message
    assert "system library" not in finding.message and "libnuma" not in finding.message


def test_a_wheels_library_its_rpath_expects_in_site_packages_is_a_broken_install(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site-packages"
    ext = site / "pkg" / "_C.so"
    _extension(ext, tmp_path, {"libpkg_core.so": "pkg_core"}, "-Wl,-rpath,$ORIGIN/lib")
    outcome = _static(Path("/"), site, "host")
    assert _codes(outcome) == [("SM-LIB-WHEEL-MISSING", Severity.FAIL)]
    message = outcome.findings[0].message
    assert "broken install" in message and str(site / "pkg" / "lib") in message
    assert "libnuma" not in message and "host" not in message


def test_a_system_library_keeps_its_meaning_even_where_a_wheel_rpath_points(
    tmp_path: Path,
) -> None:
    """An $ORIGIN RPATH is in site-packages by construction; libnuma stays the system's."""
    root, site = tmp_path / "rootfs", tmp_path / "rootfs" / SITE
    _extension(site / "k" / "ops.so", tmp_path, {"libnuma.so.1": "numa_a"}, "-Wl,-rpath,$ORIGIN")
    assert _codes(_static(root, site, "image")) == [("SM-LIB-IMAGE-MISSING", Severity.FAIL)]


def test_a_docker_cell_is_judged_as_its_images_userland(tmp_path: Path) -> None:
    root, site = _image(tmp_path, with_numa=False)
    env = Environment(
        backend="docker",
        python=("python3",),
        site_packages=(site,),
        root=root,
        image="stackmatrix/cu128:0",
    )
    assert userland_of(env) == "image"
    assert userland_of(Environment(backend="venv", python=("python3",))) == "host"
    outcome = check_environment(
        env,
        cell_id="cu128",
        targets=[],
        cuda=None,
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    assert outcome.verdict == "incompatible"
    assert [f.code for f in outcome.findings if f.severity is Severity.FAIL] == [
        "SM-LIB-IMAGE-MISSING"
    ]


def _template_packages() -> list[str]:
    """The serving engine's packages that the CUDA cell template installs."""
    text = (REPO / "dockerfiles" / "system-python.sh").read_text()
    m = re.search(r'^serving="([^"]+)"$', text, re.M)
    assert m is not None and "ca-certificates $serving" in text
    return m.group(1).split()


def _image_from_packages(tmp_path: Path, packages: list[str]) -> tuple[Path, Path]:
    """An image whose /usr/lib holds the libraries of `packages` (by the table), and
    sgl-kernel's common_ops needing libnuma.so.1 and libibverbs.so.1."""
    root = tmp_path / "rootfs"
    site = root / SITE
    needs = {"libnuma.so.1": "numa_available", "libibverbs.so.1": "ibv_get_device_list"}
    _extension(site / "sgl_kernel" / "sm90" / "common_ops.abi3.so", tmp_path, needs)
    for soname, package in missinglibs.system_packages().items():
        if package in packages:
            symbol = needs.get(soname, "f_" + re.sub(r"\W", "_", soname))
            _library(root / MULTIARCH, soname, symbol, tmp_path)
    return root, site


def test_the_cuda_templates_image_serves_and_without_libnuma1_it_does_not(
    tmp_path: Path,
) -> None:
    packages = _template_packages()
    root, site = _image_from_packages(tmp_path / "full", packages)
    assert _static(root, site, "image").verdict == "compatible"
    root, site = _image_from_packages(
        tmp_path / "trimmed", [p for p in packages if p != "libnuma1"]
    )
    outcome = _static(root, site, "image")
    assert outcome.verdict == "incompatible"
    (finding,) = outcome.findings
    assert (finding.code, finding.details["library"], finding.details["package"]) == (
        "SM-LIB-IMAGE-MISSING",
        "libnuma.so.1",
        "libnuma1",
    )
