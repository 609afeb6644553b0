"""A cell meant for CUDA 12.9 whose indexes resolve a CUDA 13 build.

https://github.com/vllm-project/vllm/issues/42338: the cu129 channel's newest build was a
pre-release (0.20.2rc1.dev...+cu129) while PyPI had the final 0.20.2, built for CUDA 13;
PEP 440 ordering preferred the final release, and every extension installed needed
libcudart.so.13. Here both builds are real wheels made by the test: a package `kern`
whose extension gcc links against a CUDA runtime stub (soname libcudart.so.12 or
libcudart.so.13) that the wheel bundles in `kern.libs/`, as auditwheel does, so no
library is missing and only the cell's declared CUDA shows the mismatch. Real uv
resolves them from a local PEP 503 index (the cu129 channel) and a local wheel
directory (the default index); nothing is fetched from the network.
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
EXT = "int cudaGetDeviceCount(int*);\nint devices(void) { int n; return cudaGetDeviceCount(&n); }\n"


def _kern(
    out_dir: Path,
    version: str,
    major: int,
    work: Path,
    write: WheelWriter,
    compile_shared: Callable[..., None],
) -> Path:
    """kern-<version>: kern/_C.abi3.so needing libcudart.so.<major>, bundled."""
    work.mkdir(parents=True)
    (work / "rt.c").write_text("int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n")
    (work / "ext.c").write_text(EXT)
    runtime = work / f"libcudart.so.{major}"
    compile_shared([f"-Wl,-soname,libcudart.so.{major}", "-o", runtime, "rt.c"], work)
    compile_shared(
        [
            "-o",
            "_C.abi3.so",
            "ext.c",
            "-Wl,--no-as-needed",
            runtime,
            "-Wl,-rpath,$ORIGIN/../kern.libs",
        ],
        work,
    )
    files = {
        "kern/__init__.py": b"",
        "kern/_C.abi3.so": (work / "_C.abi3.so").read_bytes(),
        f"kern.libs/libcudart.so.{major}": runtime.read_bytes(),
    }
    return write(out_dir, "kern", version, files)


@pytest.fixture(scope="module")
def indexes(
    tmp_path_factory: pytest.TempPathFactory,
    wheel_writer: WheelWriter,
    compiler: Callable[..., None],
) -> tuple[Path, Path]:
    """(the CUDA 12.9 channel, a PEP 503 simple index holding a pre-release +cu129 build;
    the default index, a wheel directory holding the final release, a CUDA 13 build)."""
    d = tmp_path_factory.mktemp("indexes")
    simple = d / "cu129" / "simple"
    wheel = _kern(simple / "kern", "0.20.2rc1+cu129", 12, d / "build-cu129", wheel_writer, compiler)
    (simple / "kern" / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')
    (simple / "index.html").write_text('<a href="kern/">kern</a>\n')
    _kern(d / "default", "0.20.2", 13, d / "build-default", wheel_writer, compiler)
    return simple, d / "default"


def _built_and_checked(tmp_path: Path, indexes: tuple[Path, Path], pin: str) -> CheckOutcome:
    cu129, default = indexes
    cell = Cell(
        id="cu129",
        python=PY,
        cuda="12.9",
        index_url=str(cu129),
        find_links=(str(default),),
        pins=(pin,),
    )
    digest = hashlib.sha256(pin.encode()).hexdigest()
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
        cell_id="cu129",
        targets=(),
        cuda="12.9",
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )


def test_the_final_cuda_13_release_outranks_the_cu129_channel(
    tmp_path: Path, indexes: tuple[Path, Path]
) -> None:
    # a pre-release in the specifier allows pre-releases, as `--pre` did upstream
    outcome = _built_and_checked(tmp_path, indexes, "kern>=0.20.2rc1")
    inventory = {d["name"]: d["version"] for d in outcome.data["inventory"]}
    assert inventory["kern"] == "0.20.2"  # uv took the CUDA 13 build
    (found,) = [f for f in outcome.findings if f.code == "SM-CUDA-CELL-MISMATCH"]
    assert found.severity is Severity.FAIL and found.subject == "kern/_C.abi3.so"
    assert found.details["distribution"] == "kern" and found.details["version"] == "0.20.2"
    assert found.details["libraries"] == ["libcudart.so.13"]
    assert found.message.startswith(
        "kern 0.20.2 is a CUDA 13 build: kern/_C.abi3.so needs "
        "libcudart.so.13, and the cell declares CUDA 12.9"
    )
    # the bundled runtime resolves: nothing is missing, only the declared CUDA disagrees
    assert not [f for f in outcome.findings if f.code.startswith("SM-LIB-")]
    assert outcome.verdict == "incompatible"


def test_the_cu129_build_pinned_by_its_label_passes(
    tmp_path: Path, indexes: tuple[Path, Path]
) -> None:
    outcome = _built_and_checked(tmp_path, indexes, "kern==0.20.2rc1+cu129")
    inventory = {d["name"]: d["version"] for d in outcome.data["inventory"]}
    assert inventory["kern"] == "0.20.2rc1+cu129"
    assert [f.code for f in outcome.findings if f.severity is Severity.FAIL] == []
    ext = next(e for e in outcome.data["extensions"] if e["relpath"] == "kern/_C.abi3.so")
    assert "libcudart.so.12" in ext["needed"] and ext["missing"] == []
    assert ext["resolved"]["libcudart.so.12"].endswith("/kern.libs/libcudart.so.12")
