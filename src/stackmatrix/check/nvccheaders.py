"""nvcc, the CUDA headers it compiles against, and the CCCL headers that compare them.

CCCL (libcu++, CUB, Thrust) checks in `cuda/std/__cccl/cuda_toolkit.h` that the compiling
nvcc's major.minor equals the toolkit headers' `CUDART_VERSION` (cuda_runtime_api.h), and
stops the build otherwise with "CUDA compiler and CUDA toolkit headers are incompatible,
please check your include paths" (unless `CCCL_DISABLE_CTK_COMPATIBILITY_CHECK` is
defined). NVIDIA's wheels version nvcc and the runtime headers apart: a resolver that
brings nvidia-cuda-nvcc 13.3 next to nvidia-cuda-runtime 13.0 in `nvidia/cu13` makes
every JIT build of flashinfer fail that way (flashinfer#3493), while nothing is missing
and every major agrees.

The versions are read from the files the JIT would use: nvcc's banner, `CUDART_VERSION`
in the include directory of nvcc's toolkit (`$CUDA_HOME/include`, where flashinfer points
`-isystem`), and the CCCL headers included first: flashinfer's vendored copy
(`flashinfer/data/cccl/libcudacxx/include`, put on `-I` before the toolkit's) when there
is one, else the toolkit's (`include/cccl` in CUDA 13, `include` in CUDA 12, or the
`nvidia/cuda_cccl` wheel). Whether that CCCL refuses a mismatch is read from its own
`cuda_toolkit.h`, and its `CCCL_VERSION` from `cuda/std/__cccl/version.h`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

from stackmatrix.check.nvcc import JIT_USERS, Nvcc, resolve
from stackmatrix.findings import Finding, Severity

__all__ = ["CcclHeaders", "RuntimeHeader", "find_cccl", "find_runtime_header", "headers_check"]

CHECK_MESSAGE = "CUDA compiler and CUDA toolkit headers are incompatible"
DISABLE_DEFINE = "CCCL_DISABLE_CTK_COMPATIBILITY_CHECK"
_CUDART = re.compile(rb"^\s*#\s*define\s+CUDART_VERSION\s+(\d+)", re.MULTILINE)
_CCCL = re.compile(rb"^\s*#\s*define\s+CCCL_VERSION\s+(\d+)", re.MULTILINE)
_MAX_HEADER = 4 << 20  # cuda_runtime_api.h is ~0.5 MB; a larger file is not a header
_VERSION_H = "cuda/std/__cccl/version.h"
_TOOLKIT_H = "cuda/std/__cccl/cuda_toolkit.h"
_VENDORED = "flashinfer/data/cccl/libcudacxx/include"
_FLAGS_VARS = ("FLASHINFER_EXTRA_CUDAFLAGS", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS")


class RuntimeHeader(NamedTuple):
    path: Path
    cudart: int  # 13000 is CUDA 13.0

    @property
    def release(self) -> tuple[int, int]:
        return self.cudart // 1000, (self.cudart % 1000) // 10


class CcclHeaders(NamedTuple):
    include: Path  # the directory holding cuda/std/
    version: int | None  # 3003002 is CCCL 3.3.2
    checks: bool  # its cuda_toolkit.h refuses an nvcc of another release than the headers

    @property
    def version_text(self) -> str | None:
        v = self.version
        return None if v is None else f"{v // 1000000}.{(v // 1000) % 1000}.{v % 1000}"


def _read(path: Path) -> bytes | None:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_HEADER:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _define(path: Path, pattern: re.Pattern[bytes]) -> int | None:
    text = _read(path)
    m = pattern.search(text) if text is not None else None
    return int(m.group(1)) if m else None


def _toolkit_includes(toolkit: Path) -> list[Path]:
    return [toolkit / "include", *sorted(toolkit.glob("targets/*/include"))]


def find_runtime_header(toolkit: Path) -> RuntimeHeader | None:
    """The cuda_runtime_api.h nvcc of `toolkit` compiles against, with its CUDART_VERSION."""
    dirs = _toolkit_includes(toolkit)
    if toolkit.name == "cuda_nvcc":  # CUDA 12 wheels: the runtime is its own wheel
        dirs.append(toolkit.parent / "cuda_runtime" / "include")
    for d in dirs:
        version = _define(d / "cuda_runtime_api.h", _CUDART)
        if version is not None:
            return RuntimeHeader(path=d / "cuda_runtime_api.h", cudart=version)
    return None


def find_cccl(toolkit: Path, site: Sequence[Path], vendored: bool) -> CcclHeaders | None:
    """The CCCL headers a JIT build includes first."""
    dirs = [sp / _VENDORED for sp in site] if vendored else []
    for inc in _toolkit_includes(toolkit):
        dirs += [inc / "cccl", inc]
    dirs += [sp / "nvidia" / "cuda_cccl" / "include" for sp in site]
    for d in dirs:
        if (d / _VERSION_H).is_file():
            text = _read(d / _TOOLKIT_H) or b""
            return CcclHeaders(
                include=d,
                version=_define(d / _VERSION_H, _CCCL),
                checks=CHECK_MESSAGE.encode() in text,
            )
    return None


def _disabled(env: Mapping[str, str]) -> str | None:
    """The variable whose flags define CCCL's opt-out, if any."""
    return next((v for v in _FLAGS_VARS if DISABLE_DEFINE in env.get(v, "")), None)


def headers_check(
    root: Path,
    found: Nvcc | None,
    site: Sequence[Path],
    env: Mapping[str, str],
    *,
    installed: Mapping[str, str],
    cell: str | None,
) -> tuple[dict[str, Any] | None, list[Finding]]:
    """`data["nvcc"]["headers"]` and SM-NVCC-HEADERS-MISMATCH, for the nvcc found."""
    users = [u for u in JIT_USERS if u in installed]
    # the toolkit is the directory above nvcc's bin/ as found (CUDA_HOME, or `which nvcc`'s
    # parent: flashinfer/jit/cpp_ext.py get_cuda_path), not where a linked nvcc points
    toolkit = resolve(root, str(PurePosixPath(found.path).parent.parent)) if found else None
    if found is None or found.release is None or toolkit is None:
        return None, []
    runtime = find_runtime_header(toolkit)
    cccl = find_cccl(toolkit, site, vendored="flashinfer-python" in installed)
    merged = {**os.environ, **env} if root == Path("/") else dict(env)
    disabled_by = _disabled(merged)
    data = {
        "runtime_header": str(runtime.path) if runtime else None,
        "cudart_version": runtime.cudart if runtime else None,
        "cccl": str(cccl.include) if cccl else None,
        "cccl_version": cccl.version_text if cccl else None,
        "cccl_checks": cccl.checks if cccl else None,
        "check_disabled_by": disabled_by,
    }
    nvcc_release = tuple(int(p) for p in found.release.split(".")[:2])
    if not users or runtime is None or runtime.release == nvcc_release:
        return data, []
    return data, [_finding(found, runtime, cccl, disabled_by, users, cell)]


def _finding(
    found: Nvcc,
    runtime: RuntimeHeader,
    cccl: CcclHeaders | None,
    disabled_by: str | None,
    users: Sequence[str],
    cell: str | None,
) -> Finding:
    headers = f"{runtime.release[0]}.{runtime.release[1]}"
    what = (
        f"nvcc {found.version} (CUDA {found.release}) at {found.path} compiles against "
        f"CUDA {headers} headers (CUDART_VERSION {runtime.cudart} in {runtime.path})"
    )
    fix = (
        f"install the nvcc of the headers' release (nvidia-cuda-nvcc=={headers}.*) or the "
        f"headers of nvcc's (nvidia-cuda-runtime=={found.release}.*), or point CUDA_HOME at "
        "one toolkit"
    )
    where = f"CCCL {cccl.version_text or '(version unread)'} at {cccl.include}" if cccl else ""
    if cccl is not None and cccl.checks and disabled_by is None:
        severity = Severity.FAIL
        message = (
            f"{what}: the CCCL headers included first ({where}) stop every JIT build of "
            f'{", ".join(users)} with "{CHECK_MESSAGE}, please check your include paths" '
            f"(flashinfer#3493); {fix}"
        )
    elif disabled_by is not None:
        severity = Severity.INFO
        message = f"{what}; CCCL's check is turned off by {DISABLE_DEFINE} in ${disabled_by}"
    else:
        severity = Severity.WARN
        found_cccl = f"the CCCL headers found ({where}) do not" if cccl else "no CCCL header"
        message = (
            f"{what}; {found_cccl} refuse that, but the compiler and the headers are of two "
            f"CUDA releases; {fix}"
        )
    details = {
        **found.to_dict(),
        "runtime_header": str(runtime.path),
        "cudart_version": runtime.cudart,
        "cccl": str(cccl.include) if cccl else None,
        "cccl_version": cccl.version_text if cccl else None,
        "public_message": CHECK_MESSAGE if severity is Severity.FAIL else None,
    }
    return Finding(
        code="SM-NVCC-HEADERS-MISMATCH",
        severity=severity,
        cell=cell,
        subject=found.path,
        message=message,
        details=details,
    )
