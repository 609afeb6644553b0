"""Build the local CUDA base images: Debian bookworm + CUDA wheels from PyPI.

usage: python scripts/cuda-base.py [12.8] [13.0] [--ca-bundle PEM] [--force]

For machines that reach PyPI and a Debian mirror but no container registry, where
nvidia/cuda:*-cudnn-devel-ubuntu24.04 cannot be pulled. Each family becomes
`stackmatrix-local/nvidia/cuda:<version>-pypi-devel-bookworm` (FAMILIES below), built from
dockerfiles/cuda-base.Dockerfile on the Debian base that the docker tests use
(debootstrap of bookworm minbase + python3, `docker import`ed; its tarball is cached in
~/.cache/stackmatrix-test/). The repository path ends in `nvidia/cuda`, so cells on it
get the same template (dockerfiles/cuda.Dockerfile) as cells on the real images.
docs/docker.md says what these bases have and lack. Every command is an argv list; the
only inputs are the family names, looked up in a fixed table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from stackmatrix import _atomic  # noqa: E402  (the checkout's own package, after sys.path)
from stackmatrix.builder import _docker_cli, _docker_context  # noqa: E402

DEBIAN_BASE = "stackmatrix-test/bookworm-python:1"  # the docker tests' base, shared
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stackmatrix-test"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


@dataclass(frozen=True, kw_only=True)
class Family:
    cuda_version: str  # the nvidia/cuda release it stands in for
    tag: str
    pins: tuple[str, ...]


FAMILIES: dict[str, Family] = {
    # PyPI's CUDA 12 compiler wheel ships ptxas, libnvvm and libdevice but no nvcc driver
    # (nor cicc, cudafe++, fatbinary, nvlink): this base has no `nvcc` (docs/docker.md)
    "12.8": Family(
        cuda_version="12.8.1",
        tag="stackmatrix-local/nvidia/cuda:12.8.1-pypi-devel-bookworm",
        pins=(
            "nvidia-cuda-runtime-cu12==12.8.*",
            "nvidia-cuda-nvcc-cu12==12.8.*",
            "nvidia-cuda-cccl-cu12==12.8.*",
        ),
    ),
    # CUDA 13's wheels are a whole compiler; crt and nvvm are pinned to 13.0 too, since
    # unpinned they resolve to the newest 13.x next to a 13.0 nvcc
    "13.0": Family(
        cuda_version="13.0.1",
        tag="stackmatrix-local/nvidia/cuda:13.0.1-pypi-devel-bookworm",
        pins=(
            "nvidia-cuda-runtime==13.0.*",
            "nvidia-cuda-nvcc==13.0.*",
            "nvidia-cuda-crt==13.0.*",
            "nvidia-nvvm==13.0.*",
            "nvidia-cuda-cccl==13.0.*",
        ),
    ),
}


def run(argv: list[str], **kw: object) -> None:
    print("cuda-base: $ " + " ".join(argv), flush=True)
    subprocess.run(argv, check=True, **kw)  # type: ignore[call-overload]


def image_exists(docker: str, ref: str) -> bool:
    return _docker_cli.inspect_image(docker, ref) is not None


def debian_base(docker: str) -> None:
    """The tests' bookworm image, from the cached debootstrap tarball (made if missing)."""
    if image_exists(docker, DEBIAN_BASE):
        return
    tarball = CACHE / "bookworm-python.tar"
    if not tarball.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            root = Path(tmp) / "root"
            run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    "--include=python3,ca-certificates",
                    "bookworm",
                    str(root),
                    DEBIAN_MIRROR,
                ]
            )
            partial = tarball.with_suffix(".partial")
            run(["tar", "-C", str(root), "-cf", str(partial), "."])
            partial.rename(tarball)
    run([docker, "import", str(tarball), DEBIAN_BASE])


def render(family: Family, dest: Path, ca_bundle: Path | None) -> None:
    files = dest / "cuda-base"
    files.mkdir(parents=True)
    shutil.copyfile(ROOT / "dockerfiles" / "cuda-base.Dockerfile", dest / "Dockerfile")
    shutil.copyfile(ROOT / "dockerfiles" / "cuda-base-install.py", files / "install.py")
    shutil.copy2(_docker_context.find_uv_binary(), files / "uv")
    (files / "uv").chmod(0o755)
    bundle = ca_bundle.read_bytes() if ca_bundle else b""
    _atomic.write_bytes(files / "ca-bundle.crt", bundle)
    plan = {"schema_version": 1, "cuda_version": family.cuda_version, "pins": list(family.pins)}
    _atomic.write_json(files / "plan.json", plan)


def build(engine: _docker_cli.Engine, name: str, ca_bundle: Path | None) -> None:
    family = FAMILIES[name]
    with tempfile.TemporaryDirectory(prefix="stackmatrix-cuda-base-") as tmp:
        ctx = Path(tmp)
        render(family, ctx, ca_bundle)
        run(
            [
                engine.docker,
                "build",
                "--network=host",
                "-t",
                family.tag,
                "--build-arg",
                f"DEBIAN_BASE={DEBIAN_BASE}",
                "--build-arg",
                f"CUDA_VERSION={family.cuda_version}",
                "--label",
                f"stackmatrix.cuda_base={name}",
                str(ctx),
            ],
            env=_docker_cli.build_env(engine),
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "family", nargs="*", help=f"CUDA families (default: all: {', '.join(FAMILIES)})"
    )
    ap.add_argument(
        "--ca-bundle",
        type=Path,
        default=HOST_CA if HOST_CA.is_file() else None,
        help="PEM bundle for uv in the build (default: the host's, if any)",
    )
    ap.add_argument("--force", action="store_true", help="rebuild images that exist")
    args = ap.parse_args()
    unknown = [f for f in args.family if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown CUDA family {unknown[0]!r}; known: {', '.join(FAMILIES)}")
    engine = _docker_cli.probe_engine()
    if isinstance(engine, _docker_cli.EngineProblem):
        print(f"cuda-base: {engine.message}", file=sys.stderr)
        return 1
    if not engine.buildkit:
        print(
            "cuda-base: this docker client cannot use BuildKit (bind mounts in RUN); "
            f"set {_docker_cli.DOCKER_ENV} to one that can (Debian's /usr/bin/docker "
            "20.10, or a client with buildx)",
            file=sys.stderr,
        )
        return 1
    debian_base(engine.docker)
    for name in args.family or list(FAMILIES):
        tag = FAMILIES[name].tag
        if image_exists(engine.docker, tag) and not args.force:
            print(f"cuda-base: {tag} exists (--force rebuilds it)")
            continue
        build(engine, name, args.ca_bundle)
        print(f"cuda-base: built {tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
