"""Run inside the local CUDA base's build (dockerfiles/cuda-base.Dockerfile): installs the
CUDA wheels named in plan.json into a staging directory with uv, then lays them out as
an NVIDIA toolkit: /usr/local/cuda-<major.minor>/{bin,include,lib64,nvvm}, the
/usr/local/cuda link, an ld.so.conf.d entry and version.json.

Standard library only, Python 3.8+ (it runs on the base's own python3).
usage: python3 install.py PLAN.json
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# inside the build container, removed in the same RUN step (never in a layer)
STAGING = Path("/tmp/stackmatrix-cuda-wheels")  # noqa: S108
# the version.json component of each wheel, as NVIDIA's toolkit names it
COMPONENTS = {
    "nvidia-cuda-runtime": "cuda_cudart",
    "nvidia-cuda-nvcc": "cuda_nvcc",
    "nvidia-cuda-cccl": "cuda_cccl",
    "nvidia-cuda-crt": "cuda_crt",
    "nvidia-nvvm": "libnvvm",
}


def host_compiler() -> None:
    """g++ for nvcc (and for torch's and flashinfer's JIT), as the devel images have it."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "g++"],
    ):
        print("cuda-base: $ " + " ".join(argv), flush=True)
        if subprocess.call(argv, env=env) != 0:
            sys.exit("cuda-base: apt-get failed")
    # lists and apt's binary caches (~78 MB): registry images drop them with a
    # docker-clean hook, which a debootstrap base lacks
    shutil.rmtree("/var/lib/apt/lists", ignore_errors=True)
    Path("/var/lib/apt/lists/partial").mkdir(parents=True)
    for cached in [
        *Path("/var/cache/apt").glob("*.bin"),
        *Path("/var/cache/apt/archives").glob("*.deb"),
    ]:
        cached.unlink()


def install(plan: dict, here: Path) -> None:
    env = dict(os.environ, UV_NO_CACHE="1", UV_PYTHON_DOWNLOADS="never")
    bundle = here / "ca-bundle.crt"
    if bundle.is_file() and bundle.stat().st_size:
        env["SSL_CERT_FILE"] = str(bundle)
    argv = [
        str(here / "uv"),
        "pip",
        "install",
        "--no-cache",
        "--python",
        sys.executable,
        "--target",
        str(STAGING),
        *plan["pins"],
    ]
    print("cuda-base: $ " + " ".join(argv), flush=True)
    if subprocess.call(argv, env=env) != 0:
        sys.exit("cuda-base: uv pip install failed")


def merge(src: Path, dest: Path) -> None:
    """Copy a wheel's component tree into the toolkit, without Python package files."""
    for path in sorted(src.rglob("*")):
        if path.name == "__init__.py" or "__pycache__" in path.parts or path.is_dir():
            continue
        rel = path.relative_to(src)
        if rel.parts[0] == "lib":
            rel = Path("lib64", *rel.parts[1:])
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target, follow_symlinks=False)


def dev_links(lib64: Path) -> None:
    """libX.so -> libX.so.N, as the toolkit's -dev packages provide (the linker needs it)."""
    for lib in sorted(lib64.glob("*.so.*")):
        plain = lib64 / (lib.name.split(".so.")[0] + ".so")
        if not plain.exists():
            plain.symlink_to(lib.name)


# cuda.h's driver API: each function, and the versioned names its macros map them to
# (`#define cuMemAlloc cuMemAlloc_v2`); a stub that exports all of them loads wherever
# the driver's libcuda.so.1 would
_DECLARED = re.compile(r"\bCUresult\s+CUDAAPI\s+(cu[A-Za-z0-9_]+)\s*\(")
_VERSIONED = re.compile(r"^\s*#\s*define\s+(cu[A-Za-z0-9_]+)\s+(cu[A-Za-z0-9_]+)\s*$", re.M)
STUB_RESULT = 34  # CUDA_ERROR_STUB_LIBRARY, what NVIDIA's own stub answers


def driver_api_names(cuda_h: str) -> list:
    names = set(_DECLARED.findall(cuda_h))
    for plain, versioned in _VERSIONED.findall(cuda_h):
        names.update((plain, versioned))
    return sorted(names)


def driver_stub(toolkit: Path, cc: str = "gcc") -> Path:
    """lib64/stubs/libcuda.so, as NVIDIA's toolkit ships it: the driver API of the
    toolkit's own cuda.h, every function answering CUDA_ERROR_STUB_LIBRARY, soname
    libcuda.so.1, no other library needed. Never on the loader's path: a process without
    the driver links against it (the linker) or loads it only where told to (the check's
    probe, to import what needs libcuda.so.1 on a machine without a GPU)."""
    header = toolkit / "include" / "cuda.h"
    names = driver_api_names(header.read_text(encoding="utf-8", errors="replace"))
    if not names:
        sys.exit(f"cuda-base: no driver API declarations in {header}")
    stubs = toolkit / "lib64" / "stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    source = stubs / "libcuda-stub.c"
    source.write_text("".join(f"int {n}(void) {{ return {STUB_RESULT}; }}\n" for n in names))
    out = stubs / "libcuda.so"
    argv = [
        cc,
        "-shared",
        "-fPIC",
        "-nostdlib",
        "-O1",
        "-Wl,-soname,libcuda.so.1",
        "-o",
        str(out),
        str(source),
    ]
    print(f"cuda-base: $ {' '.join(argv)} ({len(names)} functions)", flush=True)
    if subprocess.call(argv) != 0:
        sys.exit("cuda-base: building the driver stub failed")
    source.unlink()
    return out


def wheel_versions() -> dict:
    out = {}
    for info in sorted(STAGING.glob("*.dist-info")):
        name, _, version = info.name[: -len(".dist-info")].rpartition("-")
        out[name.replace("_", "-").lower()] = version
    return out


def version_json(plan: dict, wheels: dict) -> dict:
    doc = {"cuda": {"name": "CUDA SDK", "version": plan["cuda_version"]}}
    for dist, version in wheels.items():
        key = COMPONENTS.get(dist.replace("-cu12", "").replace("-cu13", ""))
        if key:
            doc[key] = {"name": dist, "version": version}
    doc["stackmatrix"] = {"source": "PyPI wheels", "wheels": wheels}
    return doc


def main() -> None:
    plan_path = Path(sys.argv[1]).resolve()
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    host_compiler()
    install(plan, plan_path.parent)
    short = ".".join(plan["cuda_version"].split(".")[:2])
    dest = Path("/usr/local") / f"cuda-{short}"
    for component in sorted((STAGING / "nvidia").iterdir()):
        if component.is_dir() and component.name != "__pycache__":
            merge(component, dest)
    dev_links(dest / "lib64")
    driver_stub(dest)
    (dest / "lib").symlink_to("lib64")  # the wheels' own layout, which nvcc.profile may name
    wheels = wheel_versions()
    (dest / "version.json").write_text(json.dumps(version_json(plan, wheels), indent=2) + "\n")
    Path("/usr/local/cuda").symlink_to(dest.name)
    conf = Path("/etc/ld.so.conf.d") / f"988_cuda-{short.replace('.', '-')}.conf"
    conf.write_text(f"{dest}/lib64\n")
    subprocess.check_call(["ldconfig"])
    shutil.rmtree(STAGING)
    nvcc = dest / "bin" / "nvcc"
    print(f"cuda-base: {dest} from {wheels}; nvcc: {'yes' if nvcc.exists() else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
