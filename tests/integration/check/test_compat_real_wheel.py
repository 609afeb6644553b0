"""A real CUDA wheel from PyPI: sgl-kernel 0.3.21 (536 MB).

Downloaded when it is not in the cache yet (~/.cache/stackmatrix/wheels, or under
$XDG_CACHE_HOME), with pip from the test extra: the nox venv is made by uv, which
brings no pip of its own. A cached copy that is not a whole wheel (an
interrupted earlier run) is downloaded again; nothing here needs an earlier run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from stackmatrix.check.phase import inspect_path
from stackmatrix.check.scan import scan_extension

pytestmark = pytest.mark.integration

REQUIREMENT = "sgl-kernel==0.3.21"
WHEEL = "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "stackmatrix" / "wheels"
EXTENSIONS = (
    "sgl_kernel/flash_ops.abi3.so",
    "sgl_kernel/flashmla_ops.abi3.so",
    "sgl_kernel/sm90/common_ops.abi3.so",
    "sgl_kernel/sm100/common_ops.abi3.so",
)
# what pip prints when it cannot reach an index (requests/urllib3 errors); "versions:
# none" for a release that PyPI has means no index answered
_UNREACHABLE = (
    "(from versions: none)",
    "Could not fetch URL",
    "NewConnectionError",
    "Max retries exceeded",
    "ConnectTimeout",
    "ReadTimeout",
    "Name or service not known",
    "Temporary failure in name resolution",
    "ProxyError",
    "SSLError",
    "Network is unreachable",
    "Connection refused",
)


def _is_whole_wheel(path: Path) -> bool:
    if not zipfile.is_zipfile(path):  # a truncated file has no central directory
        return False
    with zipfile.ZipFile(path) as zf:
        return set(EXTENSIONS) <= set(zf.namelist())


def _download(dest_dir: Path) -> Path:
    """`pip download` of the wheel into a new folder of `dest_dir`, then moved in place."""
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=False
    )
    if pip.returncode != 0:
        pytest.fail(
            f"pip is missing from {sys.executable} ({pip.stderr.strip()}); it downloads "
            f"{REQUIREMENT} and comes with the test extra: pip install -e '.[test]'"
        )
    with tempfile.TemporaryDirectory(dir=dest_dir, prefix=".download-") as tmp:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.10",
            "--platform",
            "manylinux2014_x86_64",
            "--progress-bar",
            "off",
            REQUIREMENT,
            "-d",
            tmp,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600)
        got = Path(tmp) / WHEEL
        if proc.returncode != 0 or not got.is_file():
            output = (proc.stdout + proc.stderr)[-3000:]
            why = (
                "PyPI (https://pypi.org/simple/sgl-kernel/) did not answer: is it reachable "
                "from this machine, and is pip's index (PIP_INDEX_URL, pip.conf) PyPI?"
                if any(marker in output for marker in _UNREACHABLE)
                else f"pip download failed (exit {proc.returncode})."
            )
            pytest.fail(
                f"cannot download {REQUIREMENT} ({WHEEL}, 536 MB) from PyPI: {why} These "
                f"tests need that real wheel; pip said:\n{output}"
            )
        got.replace(dest_dir / WHEEL)  # atomic: a concurrent run sees all or nothing
    return dest_dir / WHEEL


@pytest.fixture(scope="session")
def sgl_kernel_wheel() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / WHEEL
    if path.is_file() and _is_whole_wheel(path):
        return path
    path.unlink(missing_ok=True)
    path = _download(CACHE)
    assert _is_whole_wheel(path), f"{path} from PyPI lacks {EXTENSIONS}"
    return path


@pytest.fixture(scope="session")
def sgl_kernel_unpacked(sgl_kernel_wheel: Path) -> Path:
    """The four extensions, unpacked once next to the wheel (1.6 GB)."""
    dest = CACHE / "sgl_kernel-0.3.21-unpacked"
    if (dest / ".complete").exists():
        return dest
    # unpacked aside and renamed: an interrupted or concurrent run never leaves (or
    # reads) half-written files under `dest`
    tmp = Path(tempfile.mkdtemp(dir=CACHE, prefix=".unpack-"))
    try:
        with zipfile.ZipFile(sgl_kernel_wheel) as zf:
            for name in EXTENSIONS:
                zf.extract(name, tmp)
        (tmp / ".complete").touch()
        if not (dest / ".complete").exists():  # else another run finished first: use its copy
            shutil.rmtree(dest, ignore_errors=True)  # an interrupted run's partial copy
            try:
                tmp.rename(dest)
            except OSError:
                if not (dest / ".complete").exists():
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@pytest.mark.parametrize("rel", EXTENSIONS)
def test_arches_match_cuobjdump(
    sgl_kernel_unpacked: Path, cuobjdump_list: Callable[[Path], list[tuple[str, str]]], rel: str
) -> None:
    path = sgl_kernel_unpacked / rel
    scan = scan_extension(path)
    oracle = cuobjdump_list(path)
    for kind in ("cubin", "ptx"):
        assert [e.cuobjdump_arch for e in scan.fatbin if e.kind == kind] == [
            a for k, a in oracle if k == kind
        ]
    assert "libcudart.so.12" in scan.dynamic.needed


def test_inspect_wheel_native_on_sm120_and_sm90(sgl_kernel_wheel: Path) -> None:
    outcome = inspect_path(sgl_kernel_wheel, targets=["sm_120", "sm_90"])
    data = outcome.data
    assert data["target_summary"] == {"sm_120": "native", "sm_90": "native"}
    cov = data["coverage"]
    assert cov["sm_120"]["sgl_kernel/sm100/common_ops.abi3.so"] == "native"
    assert cov["sm_90"]["sgl_kernel/sm90/common_ops.abi3.so"] == "native"
    # the loader rule: sm90/ is what cc 9.0 loads, sm100/ everything else
    assert data["not_loaded"]["sm_120"] == ["sgl_kernel/sm90/common_ops.abi3.so"]
    assert data["not_loaded"]["sm_90"] == ["sgl_kernel/sm100/common_ops.abi3.so"]
    # FA3 has no Blackwell code: reported as an optional feature, not a failure
    assert cov["sm_120"]["sgl_kernel/flash_ops.abi3.so"] == "none"
    codes = {(f.code, f.subject) for f in outcome.findings}
    assert ("SM-ARCH-OPTIONAL", "sgl_kernel/flash_ops.abi3.so") in codes
    assert not any(f.code == "SM-ARCH-NONE" for f in outcome.findings)
    assert data["cuda_majors"] == [12]
    [dist] = data["inventory"]
    assert (dist["name"], dist["version"], dist["cuda_major"]) == ("sgl-kernel", "0.3.21", 12)
