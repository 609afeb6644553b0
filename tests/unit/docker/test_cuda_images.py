"""The CUDA images' pieces that need no engine: the local CUDA base's toolkit layout
(dockerfiles/cuda-base-install.py), the image hygiene scan (scripts/image-hygiene.py)
on small real tars, and matrix/cuda-images.toml rendering its cells on the CUDA
template. The heavy run itself is `nox -s cuda_images` (never part of `tests`)."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from stackmatrix.builder import _docker_context
from stackmatrix.check import missinglibs
from stackmatrix.specfile import load_spec

REPO = Path(__file__).resolve().parents[3]


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defined
    spec.loader.exec_module(module)
    return module


base_install = _load(REPO / "dockerfiles" / "cuda-base-install.py")
hygiene = _load(REPO / "scripts" / "image-hygiene.py")


def _wheel_tree(staging: Path) -> None:
    """What `uv pip install --target` leaves for CUDA 12's runtime and nvcc wheels."""
    rt = staging / "nvidia" / "cuda_runtime"
    (rt / "lib").mkdir(parents=True)
    (rt / "lib" / "libcudart.so.12").write_bytes(b"\x7fELF cudart")
    (rt / "lib" / "__init__.py").write_text("")
    (rt / "include").mkdir()
    (rt / "include" / "cuda_runtime.h").write_text("/* runtime */\n")
    nv = staging / "nvidia" / "cuda_nvcc"
    (nv / "bin").mkdir(parents=True)
    (nv / "bin" / "ptxas").write_bytes(b"\x7fELF ptxas")
    (nv / "nvvm" / "lib64").mkdir(parents=True)
    (nv / "nvvm" / "lib64" / "libnvvm.so").write_bytes(b"\x7fELF nvvm")
    for dist, version in (
        ("nvidia_cuda_runtime_cu12", "12.8.90"),
        ("nvidia_cuda_nvcc_cu12", "12.8.93"),
    ):
        (staging / f"{dist}-{version}.dist-info").mkdir()


def test_wheels_are_laid_out_as_a_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging, dest = tmp_path / "staging", tmp_path / "cuda-12.8"
    _wheel_tree(staging)
    monkeypatch.setattr(base_install, "STAGING", staging)
    for component in sorted((staging / "nvidia").iterdir()):
        base_install.merge(component, dest)
    base_install.dev_links(dest / "lib64")
    assert (dest / "lib64" / "libcudart.so.12").read_bytes() == b"\x7fELF cudart"
    assert (dest / "lib64" / "libcudart.so").readlink() == Path("libcudart.so.12")
    assert (dest / "bin" / "ptxas").is_file() and not (dest / "bin" / "nvcc").exists()
    assert (dest / "nvvm" / "lib64" / "libnvvm.so").is_file()
    assert (dest / "include" / "cuda_runtime.h").is_file()
    assert not list(dest.rglob("__init__.py"))
    doc = base_install.version_json({"cuda_version": "12.8.1"}, base_install.wheel_versions())
    assert doc["cuda"]["version"] == "12.8.1"
    assert doc["cuda_cudart"] == {"name": "nvidia-cuda-runtime-cu12", "version": "12.8.90"}
    assert doc["cuda_nvcc"]["version"] == "12.8.93"


def _layer(files: dict[str, bytes], mtime: int = 1) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_secret_is_found_across_chunk_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hygiene, "CHUNK", 8)
    secret = b"sm-planted-token"
    data = b"x" * 13 + secret + b"y" * 5  # straddles several 8-byte reads
    layer = _layer({"opt/venv/lock.txt": data, "etc/clean": b"nothing here"})
    found = hygiene.scan_layer(io.BytesIO(layer), [secret])
    assert found["secret_hits"] == ["opt/venv/lock.txt: sm-planted-token"]
    assert (found["files"], found["bytes"]) == (2, len(data) + 12)
    assert hygiene.scan_layer(io.BytesIO(_layer({"a": data[:20]})), [secret])["secret_hits"] == []


def test_uv_cache_paths_and_digests() -> None:
    cached = _layer({"root/.cache/uv/archive-v0/abc/torch/__init__.py": b"", "opt/x": b"1"})
    assert hygiene.scan_layer(io.BytesIO(cached), [])["uv_cache_paths"] == [
        "/root/.cache/uv/",
        "/root/.cache/uv/archive-v0/",
    ]
    # BuildKit leaves the cache mount's mount point: an empty directory is no cache
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        mount_point = tarfile.TarInfo("root/.cache/uv")
        mount_point.type = tarfile.DIRTYPE
        tar.addfile(mount_point)
    empty = hygiene.scan_layer(io.BytesIO(buf.getvalue()), [])
    assert (empty["uv_cache_paths"], empty["empty_uv_cache_dirs"]) == ([], ["/root/.cache/uv/"])
    one = hygiene.scan_layer(io.BytesIO(_layer({"opt/x": b"1"}, mtime=1)), [])
    later = hygiene.scan_layer(io.BytesIO(_layer({"opt/x": b"1"}, mtime=2)), [])
    other = hygiene.scan_layer(io.BytesIO(_layer({"opt/x": b"2"}, mtime=1)), [])
    # a rebuild that differs only in timestamps: same content digest, another meta digest
    assert one["content_digest"] == later["content_digest"] != other["content_digest"]
    assert one["meta_digest"] != later["meta_digest"]
    assert one["uv_cache_paths"] == []


def test_cuda_images_spec_builds_on_the_cuda_template(tmp_path: Path) -> None:
    spec = load_spec(REPO / "matrix" / "cuda-images.toml")
    assert [c.id for c in spec.cells] == ["cu128", "cu130", "trap"]
    cuda_base = _load(REPO / "scripts" / "cuda-base.py")
    local_tags = {f.tag for f in cuda_base.FAMILIES.values()}
    for cell in spec.cells:
        assert cell.backend == "docker" and cell.base_image in local_tags
        if not all(Path(c).is_file() for c in cell.ca_certs):
            cell = dataclasses.replace(cell, ca_certs=())  # not a Debian host: no CA bundle
        ctx = _docker_context.render(
            cell, spec_dir=REPO / "matrix", dest=tmp_path / cell.id, buildkit=True
        )
        assert ctx.family == "cuda"
        assert ctx.dockerfile.read_text() == (REPO / "dockerfiles/cuda.Dockerfile").read_text()
        plan = json.loads((ctx.path / "stackmatrix" / "plan.json").read_text())
        assert plan["python"] == "3.11"  # Debian bookworm's python3, which the template uses
    trap = spec.cell("trap")
    assert "sgl-kernel==0.3.21" in trap.pins and "torch==2.11.0" in trap.pins
    # each family's base stands in for the nvidia/cuda release of that CUDA version
    for name, family in cuda_base.FAMILIES.items():
        assert family.cuda_version.startswith(name + ".")
        assert re.search(r"nvidia/cuda:" + re.escape(family.cuda_version), family.tag)


def _run_system_step(tmp_path: Path) -> list[list[str]]:
    """dockerfiles/system-python.sh run with apt-get and rm replaced by recorders: the
    argv of every apt-get call it makes, as the image build would make them."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.jsonl"
    bin_dir.mkdir()
    for tool in ("apt-get", "rm"):
        (bin_dir / tool).write_text(
            f"#!{sys.executable}\nimport json, sys\n"
            f"with open({str(log)!r}, 'a') as fh:\n"
            f"    fh.write(json.dumps([{tool!r}, *sys.argv[1:]]) + '\\n')\n"
        )
        (bin_dir / tool).chmod(0o755)
    step = tmp_path / "stackmatrix" / "system-python.sh"
    step.parent.mkdir()
    step.write_text((REPO / "dockerfiles" / "system-python.sh").read_text())
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    subprocess.run(["/bin/sh", str(step)], env=env, check=True, timeout=60)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(c[0] == "rm" for c in calls)  # the recorder, not the real rm, was run
    return [c[1:] for c in calls if c[0] == "apt-get"]


def test_the_cuda_template_installs_what_the_serving_engine_loads(tmp_path: Path) -> None:
    """As sglang's own Dockerfile does: libnuma1 (sgl-kernel's common_ops) and the RDMA
    userland, each the package the check names for its library."""
    update, install = _run_system_step(tmp_path)
    assert update == ["update"]
    assert install[:4] == ["install", "-y", "--no-install-recommends", "python3"]
    packages = install[4:]
    table = missinglibs.system_packages()
    for soname in (
        "libnuma.so.1",
        "libibverbs.so.1",
        "librdmacm.so.1",
        "libmlx5.so.1",
        "libnl-3.so.200",
        "libnl-route-3.so.200",
    ):
        assert table[soname] in packages, soname
    assert set(packages) - set(table.values()) == {"ca-certificates"}
