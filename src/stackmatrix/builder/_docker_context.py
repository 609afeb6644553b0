"""Rendering a cell's docker build context: a Dockerfile from dockerfiles/ and the files
that carry the cell's values (pins, indexes, CA bundle, env) into the build."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from stackmatrix import _atomic
from stackmatrix._secrets import is_secret_name
from stackmatrix.builder._docker_install import Plan
from stackmatrix.spec_model import Cell

Family = Literal["cuda", "python"]

VENV_PATH = "/opt/stackmatrix/venv"
IMAGE_PYTHON = f"{VENV_PATH}/bin/python"
COMPILED_NAME = "stackmatrix-compiled.txt"  # the resolved lock, kept inside the venv
BUILD_DIR_IN_IMAGE = "/opt/stackmatrix/build"  # where the build files appear during the build
DOCKERFILES_ENV = "STACKMATRIX_DOCKERFILES"  # a directory of templates replacing ours
UV_BIN_ENV = "STACKMATRIX_UV_BIN"  # a Linux uv binary to put into images
# the NVIDIA images the migration spec builds on; any cell may name its own base_image
CUDA_BASES: dict[str, str] = {
    "12.8": "nvidia/cuda:12.8.1-cudnn-devel-ubuntu24.04",
    "13.0": "nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04",
}


class ContextError(Exception):
    """The build context cannot be rendered (a missing file, no uv binary...)."""


@dataclass(frozen=True, kw_only=True)
class DockerContext:
    path: Path
    dockerfile: Path
    base_image: str
    family: Family
    buildkit: bool


def base_image(cell: Cell) -> str:
    if cell.base_image:
        return cell.base_image
    if cell.cuda:
        major_minor = ".".join(cell.cuda.split(".")[:2])
        if major_minor in CUDA_BASES:
            return CUDA_BASES[major_minor]
        raise ContextError(
            f"cell {cell.id!r}: no default base image for cuda = {cell.cuda!r} (known: "
            f"{', '.join(sorted(CUDA_BASES))}); set base_image for this cell"
        )
    return f"python:{cell.python}-slim-bookworm"


def family(base: str) -> Family:
    """NVIDIA CUDA bases have no python3, so their template installs the distro's."""
    repo = base.split("@", 1)[0].rsplit(":", 1)[0]
    return "cuda" if repo.endswith("nvidia/cuda") else "python"


def dockerfiles_dir() -> Path:
    chosen = os.environ.get(DOCKERFILES_ENV)
    candidates = [Path(chosen)] if chosen else []
    # a source checkout keeps them at the repository root; a wheel may ship them inside
    candidates.append(Path(__file__).resolve().parents[3] / "dockerfiles")
    candidates.append(Path(str(resources.files("stackmatrix").joinpath("_dockerfiles"))))
    for c in candidates:
        if (c / "python.Dockerfile").is_file():
            return c
    raise ContextError(
        "the Dockerfile templates were not found (looked in "
        f"{', '.join(str(c) for c in candidates)}); set {DOCKERFILES_ENV} to the "
        "dockerfiles/ directory of the stackmatrix source"
    )


def template(fam: Family, *, buildkit: bool) -> Path:
    name = f"{fam}.Dockerfile" if buildkit else f"{fam}.legacy.Dockerfile"
    return dockerfiles_dir() / name


def find_uv_binary() -> Path:
    """A Linux uv executable to copy into the image (the one that runs here)."""
    chosen = os.environ.get(UV_BIN_ENV)
    candidates: list[str] = [chosen] if chosen else []
    try:
        import uv  # the PyPI package that ships the binary

        candidates.append(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass
    which = shutil.which("uv")
    if which:
        candidates.append(which)
    for c in candidates:
        if _is_elf(Path(c)):
            return Path(c)
    raise ContextError(
        "no Linux uv executable found to put into the image (a pyenv shim or a macOS "
        f"binary does not count); `pip install uv` or set {UV_BIN_ENV} to a Linux uv binary"
    )


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def render(cell: Cell, *, spec_dir: Path, dest: Path, buildkit: bool) -> DockerContext:
    """Write the build context for `cell` into `dest` (replacing what was there)."""
    base = base_image(cell)
    fam = family(base)
    if dest.exists():
        shutil.rmtree(dest)
    files = dest / "stackmatrix"
    files.mkdir(parents=True)
    dockerfile = dest / "Dockerfile"
    shutil.copyfile(template(fam, buildkit=buildkit), dockerfile)
    shutil.copyfile(Path(__file__).with_name("_docker_install.py"), files / "install.py")
    shutil.copyfile(dockerfiles_dir() / "system-python.sh", files / "system-python.sh")
    shutil.copy2(find_uv_binary(), files / "uv")
    (files / "uv").chmod(0o755)
    _atomic.write_text(files / "requirements.txt", "".join(f"{p}\n" for p in cell.pins))
    has_ca = _write_ca_bundle(cell, spec_dir, files / "ca-bundle.crt")
    find_links = _copy_find_links(cell, spec_dir, files / "find-links")
    _atomic.write_json(files / "plan.json", _plan(cell, has_ca=has_ca, find_links=find_links))
    return DockerContext(
        path=dest, dockerfile=dockerfile, base_image=base, family=fam, buildkit=buildkit
    )


def _plan(cell: Cell, *, has_ca: bool, find_links: list[str]) -> Plan:
    return {
        "schema_version": 1,
        "cell": cell.id,
        "python": cell.python,
        "venv": VENV_PATH,
        "requirements": "requirements.txt",
        "compiled": COMPILED_NAME,
        "index_url": cell.index_url,
        "extra_index_urls": list(cell.extra_index_urls),
        "find_links": find_links,
        "torch_backend": cell.torch_backend,
        "ca_bundle": "ca-bundle.crt" if has_ca else None,
        # secrets stay out of the build: the plan may end up in a build-stage layer
        "env": {k: v for k, v in cell.env if not is_secret_name(k)},
    }


def _write_ca_bundle(cell: Cell, spec_dir: Path, dest: Path) -> bool:
    """The cell's CA certificates as one PEM file (empty when the cell names none)."""
    parts: list[bytes] = []
    for cert in cell.ca_certs:
        path = spec_dir / cert
        try:
            parts.append(path.read_bytes().rstrip(b"\n") + b"\n")
        except OSError as exc:
            raise ContextError(
                f"cell {cell.id!r}: ca_certs entry {cert!r} cannot be read ({exc.strerror}: "
                f"{path}); give the path of a PEM bundle, relative to the spec file"
            ) from exc
    _atomic.write_bytes(dest, b"".join(parts))
    return bool(parts)


def _copy_find_links(cell: Cell, spec_dir: Path, dest: Path) -> list[str]:
    """Local find-links directories travel in the context; URLs pass through."""
    out: list[str] = []
    for i, link in enumerate(cell.find_links):
        if "://" in link:
            out.append(link)
            continue
        src = spec_dir / link
        if not src.is_dir():
            raise ContextError(
                f"cell {cell.id!r}: find_links entry {link!r} is not a directory ({src}); "
                "give a URL or a directory of wheels relative to the spec file"
            )
        shutil.copytree(src, dest / str(i))
        out.append(f"{BUILD_DIR_IN_IMAGE}/find-links/{i}")
    return out
