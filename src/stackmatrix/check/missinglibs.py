"""What an extension's needed closure lacks, said for where the cell's server runs.

A missing library belongs to one of four owners, and each owner has its own remedy:
- the NVIDIA driver (`libcuda.so.1`): a GPU host provides it;
- a wheel of the CUDA/torch stack (`libcudart.so.12`): install the right wheels;
- another wheel (`libtvm_ffi.so`: some installed wheel ships a file of that name, or
  the needing object's RPATH/RUNPATH looks for it in site-packages): a broken install,
  which no system package can fix;
- the operating system (`libnuma.so.1`): a package of the distribution, named from
  compat/system_libs.toml.

Where a system library must come from depends on the cell. A venv's server runs on
this host, which its owner can install the library in (a warning). An image cell's
server runs in the image's container, and the image is its whole userland: a system
library the image lacks keeps the extension from loading wherever the image runs, so
the cell is incompatible.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from stackmatrix.check import data as _data
from stackmatrix.check.inventory import Inventory
from stackmatrix.check.libs import DRIVER_LIBS, Closure, cuda_major_of_soname, is_stack_lib
from stackmatrix.findings import Finding, Severity

# "host": the server runs on this machine (venv, current); "image": in the cell's image
Userland = Literal["host", "image"]
_SHARED_OBJECT = re.compile(r"\.so(?:\.[0-9.]+)?$")


class Owners(NamedTuple):
    """What tells a wheel's library from a system one, read once per environment (a
    named tuple: `inspect` of a directory does not import dataclasses)."""

    userland: Userland = "host"
    # file name of every shared object an installed wheel ships -> (distribution, its path)
    wheel_files: Mapping[str, tuple[str, str]] = {}
    site_packages: tuple[Path, ...] = ()

    @classmethod
    def of(cls, inventory: Inventory, site: Sequence[Path], userland: Userland) -> Owners:
        files: dict[str, tuple[str, str]] = {}
        for dist in inventory.distributions:
            for rel in dist.files:
                name = rel.rsplit("/", 1)[-1]
                if _SHARED_OBJECT.search(name):
                    files.setdefault(name, (dist.name, rel))
        return cls(userland=userland, wheel_files=files, site_packages=tuple(site))

    def in_site_packages(self, directory: Path) -> bool:
        return any(directory == sp or sp in directory.parents for sp in self.site_packages)


@functools.cache
def system_packages() -> dict[str, str]:
    """soname -> the Debian/Ubuntu package that provides it (compat/system_libs.toml)."""
    return {str(k): str(v) for k, v in _data.load("system_libs.toml")["library"].items()}


def lib_findings(
    closure: Closure,
    relpath: str,
    cell: str | None,
    *,
    host_has_driver: bool,
    owners: Owners | None = None,
) -> list[Finding]:
    """One finding per library the closure of the extension `relpath` lacks."""
    owners = owners or Owners()
    out: list[Finding] = []
    for name, by in sorted(closure.missing.items()):
        code, severity, message, extra = _missing(
            name, relpath, closure.looked_in.get(name, ()), owners, host_has_driver
        )
        details = {"library": name, "needed_by": str(by), "extension": relpath, **extra}
        out.append(
            Finding(
                code=code,
                severity=severity,
                message=message,
                cell=cell,
                subject=relpath,
                details=details,
            )
        )
    return out


_Said = tuple[str, Severity, str, dict[str, str]]


def _missing(
    name: str, relpath: str, looked_in: Sequence[Path], owners: Owners, host_has_driver: bool
) -> _Said:
    if name in DRIVER_LIBS:
        return _driver(name, host_has_driver)
    if is_stack_lib(name):
        msg = f"{relpath} needs {name}, which no package of this environment provides"
        return "SM-LIB-MISSING", Severity.FAIL, msg + _cuda_hint(name), {}
    if name not in system_packages():
        if name in owners.wheel_files:
            return _wheel_off_path(name, relpath, *owners.wheel_files[name])
        into_site = [d for d in looked_in if owners.in_site_packages(d)]
        if into_site:
            return _wheel_missing(name, relpath, into_site[0])
    return _system(name, relpath, owners.userland)


def _driver(name: str, host_has_driver: bool) -> _Said:
    sev = Severity.WARN if host_has_driver else Severity.INFO
    msg = f"{name} (the NVIDIA driver's library) is not on this " + (
        "root although a driver is loaded; mount the driver libraries into it"
        if host_has_driver
        else "machine, which has no NVIDIA driver; it is provided by the driver on a GPU host"
    )
    return "SM-DRIVER-LIB-ABSENT", sev, msg, {}


def _wheel_off_path(name: str, relpath: str, dist: str, path: str) -> _Said:
    msg = (
        f"{relpath} needs {name}, a library of the wheel {dist} ({path}), which neither its "
        "RPATH/RUNPATH nor a system directory reaches: it loads only in a process where "
        f"{dist}'s own import loaded that library first, and otherwise the install is broken "
        f"(reinstall the package of {relpath} with {dist} at the version it was built for)"
    )
    return "SM-LIB-WHEEL-MISSING", Severity.WARN, msg, {"owner": "wheel", "provided_by": dist}


def _wheel_missing(name: str, relpath: str, looked: Path) -> _Said:
    msg = (
        f"{relpath} needs {name}, a library of a wheel (it is looked for in {looked}), which "
        "no installed package provides: a broken install, which no system package can "
        f"fix; reinstall the package of {relpath} with its dependencies"
    )
    return "SM-LIB-WHEEL-MISSING", Severity.FAIL, msg, {"owner": "wheel"}


def _system(name: str, relpath: str, userland: Userland) -> _Said:
    package = system_packages().get(name)
    extra = {"owner": "system", "userland": userland, **({"package": package} if package else {})}
    unknown = "no Debian package for it is listed in compat/system_libs.toml"
    if userland == "image":
        fix = f"install {package} in the image" if package else f"install it there ({unknown})"
        msg = (
            f"{relpath} needs the system library {name}, which the image lacks; the image is "
            f"the server's whole userland, so {relpath} cannot load wherever it runs: {fix}"
        )
        return "SM-LIB-IMAGE-MISSING", Severity.FAIL, msg, extra
    fix = f"install {package} (Debian/Ubuntu)" if package else f"install it ({unknown})"
    msg = (
        f"{relpath} needs the system library {name}, which this host lacks; on the host "
        f"that runs the server, {fix}"
    )
    return "SM-LIB-HOST-MISSING", Severity.WARN, msg, extra


def _cuda_hint(name: str) -> str:
    major = cuda_major_of_soname(name)
    if major is None:
        return ""
    return (
        f" (a CUDA {major} library: install the CUDA {major} wheels, e.g. "
        f"nvidia-cuda-runtime-cu{major}, or use a build of this package for the CUDA major "
        "of the rest of the stack)"
    )
