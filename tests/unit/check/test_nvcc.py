"""nvcc against torch's CUDA: found where the JITs look, inside the
environment's root (an image's absolute /usr/local/cuda links followed there, never to
the host), its version read from the binary's banner, and judged against torch's CUDA."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackmatrix.built_environment import Environment
from stackmatrix.check import features, nvcc
from stackmatrix.check.features import feature_findings
from stackmatrix.check.inventory import read_inventory
from stackmatrix.check.phase import check_environment
from stackmatrix.findings import Severity

SITE = "opt/stackmatrix/venv/lib/python3.11/site-packages"


def nvcc_binary(path: Path, release: str, version: str) -> Path:
    """An ELF-looking file that carries nvcc's banner among other bytes, as nvcc does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    banner = f"Cuda compilation tools, release {release}, V{version}\x00".encode()
    path.write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 4096 + banner + b"\x00" * 512)
    path.chmod(0o755)
    return path


def image_root(tmp_path: Path, release: str, version: str) -> Path:
    """An exported image as NVIDIA's images lay it out: /usr/local/cuda ->
    /etc/alternatives/cuda -> /usr/local/cuda-X.Y, both links absolute."""
    root = tmp_path / "rootfs"
    nvcc_binary(root / f"usr/local/cuda-{release}/bin/nvcc", release, version)
    (root / "etc/alternatives").mkdir(parents=True)
    (root / "etc/alternatives/cuda").symlink_to(f"/usr/local/cuda-{release}")
    (root / "usr/local/cuda").symlink_to("/etc/alternatives/cuda")
    return root


def test_the_banner_gives_release_and_version(tmp_path: Path) -> None:
    binary = nvcc_binary(tmp_path / "nvcc", "13.0", "13.0.88")
    assert nvcc.read_version(binary) == ("13.0", "13.0.88")
    wrapper = tmp_path / "wrapper"
    wrapper.write_text('#!/bin/sh\nexec /usr/local/cuda-13.0/bin/nvcc "$@"\n')
    assert nvcc.read_version(wrapper) is None
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert nvcc.read_version(empty) is None


def test_absolute_links_are_followed_inside_the_image(tmp_path: Path) -> None:
    root = image_root(tmp_path, "12.8", "12.8.93")
    found, looked = nvcc.find_nvcc(root, [], {})
    assert found == nvcc.Nvcc(
        path="/usr/local/cuda/bin/nvcc", release="12.8", version="12.8.93", source="binary"
    )
    assert looked == ["/usr/local/cuda/bin/nvcc"]


def test_an_absolute_link_never_reaches_the_hosts_files(tmp_path: Path) -> None:
    host_toolkit = tmp_path / "host-cuda"
    nvcc_binary(host_toolkit / "bin/nvcc", "13.0", "13.0.88")  # on the host, not in the image
    root = tmp_path / "rootfs"
    (root / "usr/local").mkdir(parents=True)
    (root / "usr/local/cuda").symlink_to(host_toolkit)
    assert nvcc.find_nvcc(root, [], {}) == (None, ["/usr/local/cuda/bin/nvcc"])


def test_a_wrapper_script_falls_back_to_version_json(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    bin_dir = root / "usr/local/cuda/bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvcc").write_text('#!/bin/sh\nexec nvcc.real "$@"\n')
    (root / "usr/local/cuda/version.json").write_text(
        json.dumps({"cuda": {"version": "12.8.1"}, "cuda_nvcc": {"version": "12.8.93"}})
    )
    found, _ = nvcc.find_nvcc(root, [], {})
    assert found is not None and (found.release, found.source) == ("12.8", "version.json")


def test_a_venv_on_the_host_is_judged_where_its_server_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A venv's server runs on this host with this process's environment under the
    cell's: the cell's
    CUDA_HOME, then the process's PATH, /usr/local/cuda, the venv's CUDA wheels."""
    site = tmp_path / "site-packages"
    nvcc_binary(site / "nvidia/cu13/bin/nvcc", "13.0", "13.0.88")
    on_path = tmp_path / "toolkit/bin"
    nvcc_binary(on_path / "nvcc", "13.0", "13.0.48")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path}/empty:{on_path}")
    monkeypatch.setattr(nvcc, "HOST_TOOLKIT", str(tmp_path / "usr-local-cuda"))
    found, looked = nvcc.find_nvcc(Path("/"), [site], {"CUDA_HOME": str(tmp_path / "none")})
    assert looked == [f"{tmp_path}/none/bin/nvcc", f"{tmp_path}/empty/nvcc", f"{on_path}/nvcc"]
    assert found is not None and (found.path, found.version) == (f"{on_path}/nvcc", "13.0.48")
    # nothing on PATH: after /usr/local/cuda, the wheels (host paths, as the venv sees them)
    monkeypatch.setenv("PATH", f"{tmp_path}/empty")
    _, looked = nvcc.find_nvcc(Path("/"), [site], {})
    assert looked[:2] == [f"{tmp_path}/empty/nvcc", f"{tmp_path}/usr-local-cuda/bin/nvcc"]
    found, _ = nvcc.find_nvcc(Path("/"), [site], {})
    assert found is not None and found.path == str(site / "nvidia/cu13/bin/nvcc")
    # the toolkit of the last resort comes before the wheels
    nvcc_binary(tmp_path / "usr-local-cuda/bin/nvcc", "12.8", "12.8.93")
    found, _ = nvcc.find_nvcc(Path("/"), [site], {})
    assert found is not None and found.release == "12.8"


def test_the_process_cuda_home_reaches_a_venv_and_agrees_with_the_jit_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both checks that need nvcc find the same one: no "nvcc missing" next to "compiles
    with the nvcc found at ..." (the H200 report had both)."""
    home = tmp_path / "cuda-13.0"
    nvcc_binary(home / "bin/nvcc", "13.0", "13.0.88")
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv("PATH", f"{tmp_path}/empty")
    monkeypatch.setattr(nvcc, "HOST_TOOLKIT", str(tmp_path / "usr-local-cuda"))
    data, found = nvcc.check(
        Path("/"), [], {}, torch_cuda="13.0", installed=["flashinfer-python"], cell="c"
    )
    assert found == [] and data["found"]["path"] == f"{home}/bin/nvcc"
    assert features.find_tool("nvcc", {}) == data["found"]["path"]
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    _, found = nvcc.check(
        Path("/"), [], {}, torch_cuda="13.0", installed=["flashinfer-python"], cell="c"
    )
    assert features.find_tool("nvcc", {}) is None
    assert [f.code for f in found] == ["SM-NVCC-MISSING"]
    # the last resort, /usr/local/cuda, counts for both
    nvcc_binary(tmp_path / "usr-local-cuda/bin/nvcc", "13.0", "13.0.88")
    data, found = nvcc.check(
        Path("/"), [], {}, torch_cuda="13.0", installed=["flashinfer-python"], cell="c"
    )
    assert found == [] and features.find_tool("nvcc", {}) == data["found"]["path"]


@pytest.mark.parametrize(
    ("release", "torch_cuda", "codes"),
    [
        ("12.8", "12.8", []),
        ("13.0", "12.8", [("SM-NVCC-CUDA-MISMATCH", Severity.FAIL)]),
        ("12.8", "13.0", [("SM-NVCC-CUDA-MISMATCH", Severity.FAIL)]),
        ("12.9", "12.8", [("SM-NVCC-CUDA-MINOR", Severity.WARN)]),
        ("13.0", None, []),  # a CPU torch: nothing to compare
    ],
)
def test_nvcc_is_judged_against_torchs_cuda(
    tmp_path: Path, release: str, torch_cuda: str | None, codes: list[tuple[str, Severity]]
) -> None:
    root = image_root(tmp_path, release, f"{release}.1")
    data, found = nvcc.check(
        root, [], {}, torch_cuda=torch_cuda, installed=["flashinfer-python"], cell="c"
    )
    assert [(f.code, f.severity) for f in found] == codes
    assert data["found"]["release"] == release
    for f in found:
        assert f.cell == "c" and f.subject == "/usr/local/cuda/bin/nvcc"
        assert release in f.message and str(torch_cuda) in f.message


def test_no_nvcc_is_a_warning_only_where_a_jit_needs_it(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    ptxas = root / "usr/local/cuda-12.8/bin/ptxas"  # PyPI's CUDA 12 "nvcc" wheel
    ptxas.parent.mkdir(parents=True)
    ptxas.write_bytes(b"\x7fELF")
    (root / "usr/local/cuda").symlink_to("cuda-12.8")
    _, found = nvcc.check(root, [], {}, torch_cuda="12.8", installed=["sglang"], cell="c")
    assert [(f.code, f.severity) for f in found] == [("SM-NVCC-MISSING", Severity.WARN)]
    assert "only ptxas is there: /usr/local/cuda/bin/ptxas" in found[0].message
    _, none = nvcc.check(root, [], {}, torch_cuda="12.8", installed=["torch"], cell="c")
    assert none == []


def test_the_check_phase_reports_it(tmp_path: Path) -> None:
    """check_environment on an image root: torch says CUDA 13.0, the toolkit is 12.8."""
    root = image_root(tmp_path, "12.8", "12.8.93")
    site = root / SITE
    info = site / "torch-2.11.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    (info / "RECORD").write_text("torch/version.py,,\n")
    (site / "torch").mkdir()
    (site / "torch/version.py").write_text("__version__ = '2.11.0'\ncuda: str = '13.0'\n")
    env = Environment(
        backend="docker", python=("python3",), site_packages=(site,), root=root, image="i:1"
    )
    outcome = check_environment(
        env,
        cell_id="trap",
        targets=["sm_90"],
        cuda="13.0",
        declared_driver="580.95.05",
        log_path=None,
        run_probe=False,
    )
    assert "SM-NVCC-CUDA-MISMATCH" in [f.code for f in outcome.findings]
    assert outcome.verdict == "incompatible"
    assert outcome.data["nvcc"]["found"]["version"] == "12.8.93"
    assert outcome.data["nvcc"]["torch_cuda"] == "13.0"


def test_flashinfer_nvcc_is_the_nvcc_flashinfer_compiles_with(tmp_path: Path) -> None:
    """flashinfer's ninja rule runs $FLASHINFER_NVCC where it is set, whatever CUDA_HOME
    and PATH hold (flashinfer/jit/cpp_ext.py): an image whose toolkit matches torch's
    CUDA 13.0 but whose variable names a CUDA 12.8 nvcc builds against 12.8."""
    root = image_root(tmp_path, "13.0", "13.0.88")
    nvcc_binary(root / "opt/cuda-12.8/bin/nvcc", "12.8", "12.8.93")
    named = {"FLASHINFER_NVCC": "/opt/cuda-12.8/bin/nvcc"}
    flashinfer = ["flashinfer-python", "torch"]
    data, found = nvcc.check(root, [], {}, torch_cuda="13.0", installed=flashinfer, cell="c")
    assert found == [] and data["found"]["path"] == "/usr/local/cuda/bin/nvcc"
    data, found = nvcc.check(root, [], named, torch_cuda="13.0", installed=flashinfer, cell="c")
    assert [(f.code, f.subject) for f in found] == [
        ("SM-NVCC-CUDA-MISMATCH", "/opt/cuda-12.8/bin/nvcc")
    ]
    assert data["found"]["version"] == "12.8.93"
    assert data["override"] == {"variable": "FLASHINFER_NVCC", "path": "/opt/cuda-12.8/bin/nvcc"}
    # only flashinfer reads it: sglang's JIT alone still finds the image's toolkit
    _, found = nvcc.check(root, [], named, torch_cuda="13.0", installed=["sglang"], cell="c")
    assert found == []


def test_a_flashinfer_nvcc_that_is_not_there_fails_flashinfer_s_jit(tmp_path: Path) -> None:
    root = image_root(tmp_path, "13.0", "13.0.88")  # a good toolkit, which flashinfer skips
    named = {"FLASHINFER_NVCC": "/opt/gone/bin/nvcc"}
    data, found = nvcc.check(
        root, [], named, torch_cuda="13.0", installed=["flashinfer-python"], cell="c"
    )
    assert [(f.code, f.severity, f.subject) for f in found] == [
        ("SM-NVCC-OVERRIDE-MISSING", Severity.WARN, "FLASHINFER_NVCC")
    ]
    assert "FLASHINFER_NVCC names /opt/gone/bin/nvcc, and no file is there" in found[0].message
    assert "point FLASHINFER_NVCC at a CUDA 13.0 nvcc" in found[0].message
    assert data["found"] is None and data["looked"] == ["/opt/gone/bin/nvcc"]
    # the JIT feature check agrees: flashinfer's tool is not there
    site = root / SITE
    info = site / "flashinfer_python-0.6.12.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.6.12\n"
    )
    (info / "RECORD").write_text("")
    findings, facts = feature_findings(read_inventory([site]), named, "c", root=root)
    assert [(f.code, f.severity) for f in findings] == [("SM-JIT-ONLY", Severity.WARN)]
    assert facts["jit"]["flashinfer-python"]["tool_path"] is None
    _, facts = feature_findings(read_inventory([site]), {}, "c", root=root)
    assert facts["jit"]["flashinfer-python"]["tool_path"] == "/usr/local/cuda/bin/nvcc"
