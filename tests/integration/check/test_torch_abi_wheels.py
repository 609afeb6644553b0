"""A kernel wheel built against a newer torch, installed next to an older torch.

The failure that public trackers report for SGLang's kernel wheels: an extension built
against torch 2.13 imported with torch 2.11 stops at an undefined `torch::Library`
symbol, because a kernel wheel that declares no torch requirement lets the resolver keep
whatever torch the cell pins. Here three real wheels are made by the test: `torch` 2.11.0
and 2.13.0, each shipping a g++-built torch/lib/libtorch_cpu.so (2.13's `torch::Library`
has a member 2.11's lacks), and `torchkern`, whose extension g++ links against the 2.13
library. Real uv installs them offline from a local wheel directory.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from stackmatrix.builder import venv
from stackmatrix.check.phase import CheckOutcome, check_environment
from stackmatrix.findings import Severity
from stackmatrix.spec_model import Cell

pytestmark = pytest.mark.integration
WheelWriter = Callable[[Path, str, str, dict[str, bytes]], Path]  # conftest.write_wheel
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
LIBRARY_213 = """
namespace torch {
struct Library { int def(int x); int impl_with_stable_abi(int x); };
int Library::def(int x) { return x; }
int Library::impl_with_stable_abi(int x) { return 2 * x; }
}
"""
LIBRARY_211 = """
namespace torch {
struct Library { int def(int x); };
int Library::def(int x) { return x; }
}
"""
KERNEL = """
namespace torch { struct Library { int def(int x); int impl_with_stable_abi(int x); }; }
extern "C" int register_ops(void) {
    torch::Library lib;
    return lib.def(1) + lib.impl_with_stable_abi(2);
}
"""


@pytest.fixture(scope="module")
def wheels(
    tmp_path_factory: pytest.TempPathFactory,
    wheel_writer: WheelWriter,
    compiler: Callable[..., None],
) -> Path:
    d = tmp_path_factory.mktemp("torch-abi")
    out = d / "wheels"
    for version, source in (("2.13.0", LIBRARY_213), ("2.11.0", LIBRARY_211)):
        work = d / version
        work.mkdir()
        (work / "library.cpp").write_text(source)
        compiler(
            ["-Wl,-soname,libtorch_cpu.so", "-o", "libtorch_cpu.so", "library.cpp"], work, cxx=True
        )
        files = {
            "torch/__init__.py": b"",
            "torch/lib/libtorch_cpu.so": (work / "libtorch_cpu.so").read_bytes(),
        }
        wheel_writer(out, "torch", version, files)
    (d / "kernel.cpp").write_text(KERNEL)
    compiler(
        [
            "-o",
            "ops.abi3.so",
            "kernel.cpp",
            "-Wl,--no-as-needed",
            "-L",
            d / "2.13.0",
            "-ltorch_cpu",
        ],
        d,
        cxx=True,
    )
    files = {
        "torchkern/__init__.py": b"",
        "torchkern/ops.abi3.so": (d / "ops.abi3.so").read_bytes(),
    }
    wheel_writer(out, "torchkern", "1.0", files)
    return out


def _checked(tmp_path: Path, wheels: Path, torch: str) -> CheckOutcome:
    pins = (f"torch=={torch}", "torchkern==1.0")
    cell = Cell(id="c", python=PY, offline=True, find_links=(str(wheels),), pins=pins)
    digest = hashlib.sha256(torch.encode()).hexdigest()
    built = venv.build(
        cell,
        spec_dir=tmp_path,
        work_dir=tmp_path / "work",
        log_path=tmp_path / "build.log",
        content_hash=digest,
    )
    assert built.status.value == "ok", built.message
    assert built.environment is not None
    return check_environment(
        built.environment,
        cell_id="c",
        targets=(),
        cuda=None,
        declared_driver=None,
        log_path=None,
        run_probe=False,
    )


def test_a_kernel_built_for_a_newer_torch_lacks_its_library_symbol(
    tmp_path: Path, wheels: Path
) -> None:
    outcome = _checked(tmp_path, wheels, "2.11.0")
    (found,) = [f for f in outcome.findings if f.code == "SM-SYM-UNDEFINED"]
    assert found.severity is Severity.FAIL and found.subject == "torchkern/ops.abi3.so"
    (group,) = found.details["groups"]
    assert group["provider"] == "libtorch_cpu.so"
    assert group["symbols"] == ["torch::Library::impl_with_stable_abi(int)"]
    assert "another torch version" in group["cause"]
    ext = next(e for e in outcome.data["extensions"] if e["relpath"] == "torchkern/ops.abi3.so")
    assert ext["resolved"]["libtorch_cpu.so"].endswith("/torch/lib/libtorch_cpu.so")
    assert outcome.verdict == "incompatible"


def test_the_torch_it_was_built_for_defines_every_symbol(tmp_path: Path, wheels: Path) -> None:
    outcome = _checked(tmp_path, wheels, "2.13.0")
    assert [f.code for f in outcome.findings if f.code.startswith("SM-SYM")] == []
    assert [f.code for f in outcome.findings if f.severity is Severity.FAIL] == []
