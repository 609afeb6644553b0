"""uv command lines for a cell (argv lists only) and reading uv's failures."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from stackmatrix.spec_model import Cell

_URL_RE = re.compile(r"https?://[^\s`'\")]+")
_NET_MARKERS = ("dns error", "Failed to fetch", "error sending request", "Connect", "timed out")


def uv_binary() -> str | None:
    return shutil.which("uv")


def find_python(version: str) -> str:
    """An interpreter for `version` ("3.12"): a path when one is found, else the version.

    uv looks on PATH, where pyenv's shims answer only for the active version and fail
    for the others (exit 127); pyenv's own version directories hold the real ones.
    """
    major_minor = ".".join(version.split(".")[:2])
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    dirs = sorted(pyenv.glob(f"{major_minor}*"), reverse=True) if pyenv.is_dir() else []
    candidates = [
        d / "bin" / f"python{major_minor}"
        for d in dirs
        if d.name == version or d.name.startswith(version + ".")
    ]
    candidates += [Path(d) / f"python{major_minor}" for d in ("/usr/local/bin", "/usr/bin")]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return version


def uv_env(extra_ca: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    # uv can't download Python builds on machines that reach only PyPI; use the
    # machine's interpreters unless the user asked otherwise.
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    env.pop("VIRTUAL_ENV", None)
    if extra_ca is not None:
        env["SSL_CERT_FILE"] = str(extra_ca)
    return env


def _resolve_local(value: str, spec_dir: Path) -> str:
    if value.startswith(("./", "../")):
        return str((spec_dir / value).resolve())
    return value


def index_args(cell: Cell, spec_dir: Path) -> list[str]:
    args: list[str] = []
    if cell.index_url:
        args += ["--index-url", _resolve_local(cell.index_url, spec_dir)]
    for url in cell.extra_index_urls:
        args += ["--extra-index-url", _resolve_local(url, spec_dir)]
    for link in cell.find_links:
        args += ["--find-links", _resolve_local(link, spec_dir)]
    if cell.torch_backend:
        args += ["--torch-backend", cell.torch_backend]
    if cell.offline:
        # an air-gapped host: nothing but the wheel directories, no network at all
        args += ["--offline", "--no-index"]
    return args


def unreachable_index(output: str, cell: Cell) -> str | None:
    """The index URL uv could not reach, when that is why it failed."""
    if not any(m in output for m in _NET_MARKERS):
        return None
    declared = [u for u in (cell.index_url, *cell.extra_index_urls, *cell.find_links) if u]
    for url in _URL_RE.findall(output):
        for candidate in declared:
            if url.startswith(candidate.rstrip("/")):
                return candidate
    urls = _URL_RE.findall(output)
    return urls[0] if urls else (declared[0] if declared else "https://pypi.org/simple")


def combined_ca_bundle(cell: Cell, spec_dir: Path, dest: Path) -> Path | None:
    """System bundle + the cell's extra CA certificates, as one file for uv/pip."""
    if not cell.ca_certs:
        return None
    system = os.environ.get("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
    parts = [Path(system)] if Path(system).is_file() else []
    parts += [spec_dir / c for c in cell.ca_certs]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(b"\n".join(p.read_bytes() for p in parts))
    return dest
