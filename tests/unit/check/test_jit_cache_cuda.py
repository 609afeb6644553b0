"""FlashInfer JIT modules compiled by one CUDA major, reused by a cell of another.

https://github.com/flashinfer-ai/flashinfer/issues/5145: a host's CUDA 13 nvcc compiled
the sampler into the shared cache, linked against libcudart.so.13, and CUDA 12.9 workers
loaded it as it was and failed at run time. Here the cached modules are real shared
objects built with gcc against a CUDA runtime stub whose soname is libcudart.so.12 or
libcudart.so.13, placed where flashinfer keeps them, and the check reads their DT_NEEDED.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackmatrix.built_environment import Environment
from stackmatrix.check import jitcuda
from stackmatrix.check.inventory import read_inventory
from stackmatrix.check.phase import check_environment
from stackmatrix.findings import Severity

SAMPLER = "int cudaGetDeviceCount(int*);\nint top_p(void) { int n; return cudaGetDeviceCount(&n); }"


def _gcc(*argv: str | Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is required for these tests: install gcc")
    subprocess.run([gcc, "-shared", "-fPIC", *map(str, argv)], check=True)


@pytest.fixture(scope="module")
def runtimes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """libcudart.so.12 and libcudart.so.13 stubs (one symbol each), by soname."""
    d = tmp_path_factory.mktemp("cudart")
    (d / "rt.c").write_text("int cudaGetDeviceCount(int* n) { *n = 0; return 0; }\n")
    for major in (12, 13):
        _gcc(f"-Wl,-soname,libcudart.so.{major}", "-o", d / f"libcudart.so.{major}", d / "rt.c")
    return d


def _module(cache: Path, rel: str, major: int, runtimes: Path) -> Path:
    """A compiled JIT module at `cache/rel`, linked against libcudart.so.<major>."""
    out = cache / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(SAMPLER)
    _gcc("-o", out, src, "-Wl,--no-as-needed", runtimes / f"libcudart.so.{major}")
    return out


def _site(tmp_path: Path, torch: str = "2.11.0+cu130") -> Path:
    site = tmp_path / "site-packages"
    for name, version in (("flashinfer-python", "0.6.4"), ("torch", torch)):
        info = site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
    return site


def _env(site: Path, **env: str) -> Environment:
    # -S: only the test's site-packages (PYTHONPATH) is on the interpreter's path
    return Environment(
        backend="venv",
        python=(sys.executable, "-S"),
        site_packages=(site,),
        prefix=site.parent / "venv",
        env={"PYTHONPATH": str(site), **env},
    )


def test_a_cache_compiled_by_cuda_12_fails_a_cuda_13_cell(
    tmp_path: Path, runtimes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLASHINFER_WORKSPACE_BASE", raising=False)
    site = _site(tmp_path)
    cache = tmp_path / "venv" / "jit-cache" / ".cache" / "flashinfer"  # builder/jitcache.py's
    _module(cache, "0.6.4/90/cached_ops/sampling/sampling.so", 12, runtimes)
    _module(cache, "0.6.4/90/cached_ops/norm/norm.so", 13, runtimes)
    _module(cache, "0.6.3/90/cached_ops/old/old.so", 12, runtimes)  # another flashinfer's
    outcome = check_environment(
        _env(site),
        cell_id="cu130",
        targets=[],
        cuda="13.0",
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    (found,) = [f for f in outcome.findings if f.code == "SM-JIT-CACHE-CUDA"]
    assert found.severity is Severity.FAIL and outcome.verdict == "incompatible"
    assert found.subject == str(cache)
    assert found.details["modules"] == {
        "0.6.4/90/cached_ops/sampling/sampling.so": ["libcudart.so.12"]
    }
    assert "sampling/sampling.so needs libcudart.so.12" in found.message
    assert "CUDA 13.0" in found.message and "flashinfer #5145" in found.message
    assert outcome.data["jit_cache"]["modules"] == 2  # the other version's is not read


def test_the_cells_own_workspace_base_is_read_and_torch_decides_without_cuda(
    tmp_path: Path, runtimes: Path
) -> None:
    site = _site(tmp_path, torch="2.9.1+cu128")
    base = tmp_path / "shared-cache"
    _module(base / ".cache/flashinfer", "90/cached_ops/sampling/sampling.so", 13, runtimes)
    env = _env(site, FLASHINFER_WORKSPACE_BASE=str(base))
    data, found = jitcuda.jit_cache_findings(env, read_inventory([site]), None, "c")
    assert data["cache"] == str(base / ".cache/flashinfer") and data["modules"] == 1
    assert [f.details["expected_major"] for f in found] == [12]  # torch's CUDA 12.8
    assert "(torch's)" in found[0].message


def test_a_cache_of_the_cells_own_cuda_major_is_fine(tmp_path: Path, runtimes: Path) -> None:
    site = _site(tmp_path)
    base = tmp_path / "own"
    _module(base / ".cache/flashinfer", "0.6.4/90/cached_ops/sampling/sampling.so", 13, runtimes)
    env = _env(site, FLASHINFER_WORKSPACE_BASE=str(base))
    data, found = jitcuda.jit_cache_findings(env, read_inventory([site]), "13.0", "c")
    assert found == [] and data["modules"] == 1 and data["other_cuda"] == []


def test_without_flashinfer_no_cache_is_read(tmp_path: Path, runtimes: Path) -> None:
    site = tmp_path / "empty-site"
    site.mkdir()
    base = tmp_path / "b"
    _module(base / ".cache/flashinfer", "90/cached_ops/sampling/sampling.so", 12, runtimes)
    env = _env(site, FLASHINFER_WORKSPACE_BASE=str(base))
    assert jitcuda.jit_cache_findings(env, read_inventory([site]), "13.0", "c")[1] == []


def _layout(site: Path, body: str) -> None:
    env_py = site / "flashinfer" / "jit" / "env.py"
    env_py.parent.mkdir(parents=True)
    env_py.write_text(f"def _get_workspace_dir_name():\n    {body}\n")


@pytest.mark.parametrize(
    ("body", "versioned", "read"),
    [
        # flashinfer's two layouts, as its jit/env.py spells them
        ("return FLASHINFER_CACHE_DIR / flashinfer_version / arch", True, ["0.6.4/90"]),
        ("return FLASHINFER_CACHE_DIR / arch", False, ["90"]),
        ('return pathlib.Path(base) / ".cache" / "flashinfer" / arch', False, ["90"]),
        ("return somewhere_else()", None, ["0.6.4/90", "90"]),
    ],
)
def test_only_the_layout_this_flashinfer_reads_is_judged(
    tmp_path: Path, runtimes: Path, body: str, versioned: bool | None, read: list[str]
) -> None:
    site = _site(tmp_path)
    _layout(site, body)
    base = tmp_path / "b"
    for head in ("0.6.4/90", "90", "0.6.3/90"):
        _module(base / ".cache/flashinfer", f"{head}/cached_ops/s/s.so", 12, runtimes)
    inventory = read_inventory([site])
    flashinfer = inventory.get("flashinfer-python")
    assert flashinfer is not None and jitcuda.versioned_layout(flashinfer) is versioned
    env = _env(site, FLASHINFER_WORKSPACE_BASE=str(base))
    data, _ = jitcuda.jit_cache_findings(env, inventory, "13.0", "c")
    assert data["other_cuda"] == [f"{head}/cached_ops/s/s.so" for head in read]


def test_a_current_cell_uses_the_home_cache_and_a_venv_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLASHINFER_WORKSPACE_BASE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    prefix = tmp_path / "prefix"
    current = Environment(backend="current", python=(sys.executable,), prefix=prefix)
    assert jitcuda.cache_dir(current) == tmp_path / "home" / ".cache" / "flashinfer"
    venv = Environment(backend="venv", python=(sys.executable,), prefix=prefix)
    assert jitcuda.cache_dir(venv) == prefix / "jit-cache" / ".cache" / "flashinfer"
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path / "mine"))
    assert jitcuda.cache_dir(venv) == tmp_path / "mine" / ".cache" / "flashinfer"
    image = Environment(
        backend="docker",
        python=("python3",),
        root=tmp_path / "rootfs",
        env={"FLASHINFER_WORKSPACE_BASE": "/ws"},
    )
    assert jitcuda.cache_dir(image) == tmp_path / "rootfs" / "ws" / ".cache" / "flashinfer"
    assert (
        jitcuda.cache_dir(
            Environment(backend="docker", python=("python3",), root=tmp_path / "rootfs")
        )
        is None
    )
