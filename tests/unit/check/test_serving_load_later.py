"""Files the server loads later than the probe's import: not latent.

On a machine without a GPU, `import sgl_kernel` loads the fallback build,
sm100/common_ops (compat/loaders.toml), so the probe's loaded set maps that one only; an
sm_90 target (the H200) loads sm90/common_ops, and a finding about it must decide the
verdict. flashinfer loads flashinfer-jit-cache's prebuilt modules at a kernel's first
call, long after its import. Here both packages are real: gcc-built shared objects laid
out as sgl_kernel/sm90/common_ops.abi3.so and sgl_kernel/sm100/common_ops.abi3.so (the
package's __init__ maps sm100's through ctypes, as without a GPU), and
flashinfer_jit_cache/jit_cache/norm/norm.so; sm90's and norm's need a CUDA runtime that
is not there. The probe is the real one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackmatrix.built_environment import Environment
from stackmatrix.check import relevance
from stackmatrix.check.phase import CheckOutcome, check_environment

# the server's entry module: imports both, as sglang's scheduler does with the model
SRV_INIT = "import sgl_kernel\nimport flashinfer\n"
SGL_INIT = (
    "import ctypes, os\n"
    "_ops = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'sm100', 'common_ops.abi3.so'))\n"
)
SM90 = "sgl_kernel/sm90/common_ops.abi3.so"
SM100 = "sgl_kernel/sm100/common_ops.abi3.so"
NORM = "flashinfer_jit_cache/jit_cache/norm/norm.so"


def _gcc(*argv: str | Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required for these tests: install gcc")
    subprocess.run([gcc, "-shared", "-fPIC", *map(str, argv)], check=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("load-later")
    site = tmp / "site-packages"
    gone = tmp / "gone"
    for d in (
        "sgl_kernel/sm90",
        "sgl_kernel/sm100",
        "flashinfer",
        "flashinfer_jit_cache/jit_cache/norm",
    ):
        (site / d).mkdir(parents=True)
    gone.mkdir()
    (tmp / "rt.c").write_text("int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n")
    _gcc("-Wl,-soname,libcudart.so.12", "-o", gone / "libcudart.so", tmp / "rt.c")
    (tmp / "ops.c").write_text(
        "int cudaGetDeviceCount(int*);\nint op(void) { int n; return cudaGetDeviceCount(&n); }\n"
    )
    (tmp / "fallback.c").write_text("int op(void) { return 0; }\n")
    for rel in (SM90, NORM):  # need libcudart.so.12, gone after the link
        _gcc("-o", site / rel, tmp / "ops.c", "-L", gone, "-lcudart")
    _gcc("-o", site / SM100, tmp / "fallback.c")
    (site / "sgl_kernel/__init__.py").write_text(SGL_INIT)
    (site / "flashinfer/__init__.py").write_text("")
    (site / "srv").mkdir()
    (site / "srv/__init__.py").write_text(SRV_INIT)
    shutil.rmtree(gone)
    return site


def _check(site: Path, targets: list[str], modules: list[str]) -> CheckOutcome:
    env = Environment(
        backend="venv",
        python=(sys.executable, "-S"),
        site_packages=(site,),
        env={"PYTHONPATH": str(site)},
    )
    return check_environment(
        env,
        cell_id="c",
        targets=targets,
        cuda=None,
        declared_driver="580.95.05",
        log_path=None,
        serving_modules=modules,
    )


def _latent(outcome: CheckOutcome, subject: str) -> list[bool]:
    return [relevance.is_latent(f) for f in outcome.findings if f.subject == subject]


def test_the_variant_an_sm_90_target_loads_is_on_the_serving_path(site: Path) -> None:
    outcome = _check(site, ["sm_90"], ["srv"])
    loaded = outcome.data["probe"]["loaded_libraries"]
    assert str((site / SM100).resolve()) in loaded  # the probe mapped the fallback only
    assert str((site / SM90).resolve()) not in loaded
    assert _latent(outcome, SM90) and not any(_latent(outcome, SM90))
    assert _latent(outcome, NORM) and not any(_latent(outcome, NORM))
    assert outcome.verdict == "incompatible"
    serving = outcome.data["serving_path"]
    assert serving["added"] == {
        SM90: "loader rule: sgl_kernel loads sm90/common_ops.* on sm_90",
        NORM: "load-later rule: flashinfer loads flashinfer_jit_cache/jit_cache/*",
    }
    assert serving["judged_on_note"] == (
        "judged on the files mapped by the probe's import of srv plus 2 files by "
        "load-later rule and loader rule"
    )
    assert SM90 not in serving["latent"] and NORM not in serving["latent"]


def test_without_that_target_or_that_import_they_stay_latent(site: Path) -> None:
    outcome = _check(site, ["sm_120"], ["sgl_kernel"])
    assert _latent(outcome, SM90) and all(_latent(outcome, SM90))
    assert _latent(outcome, NORM) and all(_latent(outcome, NORM))
    assert outcome.verdict == "compatible"
    assert outcome.data["serving_path"]["added"] == {}
    assert outcome.data["serving_path"]["judged_on_note"] == (
        "judged on the files mapped by the probe's import of sgl_kernel"
    )


def test_a_package_counts_as_imported_by_a_mapped_file(site: Path) -> None:
    """The loader rule needs its package imported: a file of it mapped is enough, with
    no serving attempt naming it (the server's entry module imported it)."""
    loaded = relevance.LoadedSet(
        identities=frozenset(),
        paths=frozenset({str((site / SM100).resolve())}),
        failed_packages=frozenset(),
        module="sglang.srt.entrypoints.http_server",
    )
    exts = [
        {"relpath": SM90, "path": str(site / SM90)},
        {"relpath": SM100, "path": str(site / SM100)},
    ]
    added = relevance.load_later_files(exts, [site], loaded, ["sm_90", "sm_120"])
    assert added == {SM90: "loader rule: sgl_kernel loads sm90/common_ops.* on sm_90"}
    none = relevance.LoadedSet(
        identities=frozenset(), paths=frozenset(), failed_packages=frozenset(), module="srv"
    )
    assert relevance.load_later_files(exts, [site], none, ["sm_90"]) == {}
