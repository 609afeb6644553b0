"""The distributions installed in an environment, read from *.dist-info directly.

Reading the files (not `importlib.metadata` in the cell's interpreter) works the
same for a venv, the current interpreter and an exported image rootfs.

packaging, email and csv are imported where a *.dist-info is read: `inspect` of a
directory of extensions reads none, and they were a fifth of its start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from stackmatrix import _log
from stackmatrix.check._elffile import ELFFile
from stackmatrix.check._elftypes import ELFError
from stackmatrix.check.libs import cuda_major_of_soname

log = _log.Logger(__name__)

_LOCAL_CUDA = re.compile(r"^cu(\d{2,3})$")
_SUFFIX_CUDA = re.compile(r"-cu(\d{2})$")
# distributions versioned by the CUDA release they belong to (13.0.96 -> CUDA 13)
_CUDA_VERSIONED = re.compile(
    r"^(?:nvidia-cuda-runtime|nvidia-cuda-nvrtc|nvidia-cublas|cuda-toolkit)$"
)


class Distribution(NamedTuple):
    name: str  # canonical (PEP 503)
    version: str
    local: str | None  # "cu128" of 2.9.1+cu128
    requires: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # RECORD paths relative to site-packages
    site_packages: Path = Path()
    cuda_major: int | None = None
    cuda_evidence: tuple[str, ...] = ()
    sonames_needed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "local": self.local,
            "cuda_major": self.cuda_major,
            "cuda_evidence": list(self.cuda_evidence),
            "requires": list(self.requires),
        }


class Inventory(NamedTuple):
    owners: dict[str, str]  # site-relative file -> dist name
    distributions: tuple[Distribution, ...] = ()

    def get(self, name: str) -> Distribution | None:
        if not self.distributions:
            return None  # no name to canonicalize: packaging stays unimported
        from packaging.utils import canonicalize_name

        key = canonicalize_name(name)
        return next((d for d in self.distributions if d.name == key), None)

    def owner_of(self, relpath: str) -> str | None:
        return self.owners.get(relpath)


def read_inventory(site_packages: Sequence[Path], *, scan_binaries: bool = True) -> Inventory:
    dists: list[Distribution] = []
    owners: dict[str, str] = {}
    for sp in site_packages:
        for info in sorted(sp.glob("*.dist-info")):
            dist = _read_dist(info, sp, scan_binaries=scan_binaries)
            if dist is None or any(d.name == dist.name for d in dists):
                continue  # unreadable, or shadowed by an earlier directory of sys.path
            dists.append(dist)
            for f in dist.files:
                owners.setdefault(f, dist.name)
    return Inventory(distributions=tuple(dists), owners=owners)


def _read_dist(info: Path, sp: Path, *, scan_binaries: bool) -> Distribution | None:
    from email.parser import HeaderParser

    from packaging.utils import canonicalize_name

    meta_path = info / "METADATA"
    if not meta_path.is_file():
        return None
    with meta_path.open(encoding="utf-8", errors="replace") as fh:
        meta = HeaderParser().parse(fh)
    name, version = meta.get("Name"), meta.get("Version")
    if not name or not version:
        log.warning("%s: METADATA without Name/Version; ignored", info)
        return None
    requires = tuple(meta.get_all("Requires-Dist") or ())
    files = _record_files(info)
    sonames = _needed_sonames(sp, files) if scan_binaries else ()
    local = version.split("+", 1)[1] if "+" in version else None
    major, evidence = cuda_major(canonicalize_name(name), version, local, requires, sonames)
    return Distribution(
        name=canonicalize_name(name),
        version=version,
        local=local,
        requires=requires,
        files=files,
        site_packages=sp,
        cuda_major=major,
        cuda_evidence=evidence,
        sonames_needed=sonames,
    )


def _record_files(info: Path) -> tuple[str, ...]:
    import csv

    record = info / "RECORD"
    if not record.is_file():
        return ()
    with record.open(encoding="utf-8", errors="replace", newline="") as fh:
        try:
            return tuple(row[0] for row in csv.reader(fh) if row)
        except csv.Error:  # a field over csv's size limit: no usable RECORD
            return ()


def _needed_sonames(sp: Path, files: Iterable[str]) -> tuple[str, ...]:
    out: set[str] = set()
    for rel in files:
        if not (rel.endswith(".so") or ".so." in rel) or not (sp / rel).is_file():
            continue  # a FIFO or device named in RECORD would block or never end
        try:
            with ELFFile(sp / rel) as elf:
                out.update(elf.dynamic().needed)
        except (OSError, ELFError):
            continue
    return tuple(sorted(out))


def _major_of_version(text: str) -> int | None:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text).major
    except InvalidVersion:
        return None


def _requirement_majors(requires: Iterable[str]) -> list[tuple[int, str]]:
    from packaging.markers import InvalidMarker, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    found: list[tuple[int, str]] = []
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        try:
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
        except (InvalidMarker, UndefinedEnvironmentName):
            continue
        name = canonicalize_name(req.name)
        m = _SUFFIX_CUDA.search(name)
        if m and name.startswith("nvidia-"):
            found.append((int(m.group(1)), f"requires {text}"))
        elif _CUDA_VERSIONED.match(name):
            pinned = [s.version for s in req.specifier if s.operator in ("==", "~=", ">=")]
            majors = {_major_of_version(v.rstrip(".*")) for v in pinned} - {None}
            if len(majors) == 1:
                found.append((int(majors.pop() or 0), f"requires {text}"))
    return found


def cuda_major(
    name: str,
    version: str,
    local: str | None,
    requires: Iterable[str],
    sonames: Iterable[str],
) -> tuple[int | None, tuple[str, ...]]:
    """The CUDA major a distribution is built for, with the evidence; sonames win."""
    evidence: list[tuple[int, str]] = []
    for so in sonames:
        major = cuda_major_of_soname(so)
        if major is not None:
            evidence.append((major, f"needs {so}"))
    if local and (m := _LOCAL_CUDA.match(local)):
        digits = m.group(1)
        evidence.append(
            (int(digits[:-1] if len(digits) == 3 else digits), f"local version +{local}")
        )
    if m := _SUFFIX_CUDA.search(name):
        if name.startswith("nvidia-"):
            evidence.append((int(m.group(1)), f"distribution {name}"))
    elif _CUDA_VERSIONED.match(name) and (major := _major_of_version(version)) is not None:
        evidence.append((major, f"distribution {name} {version}"))
    evidence.extend(_requirement_majors(requires))
    if not evidence:
        return None, ()
    return evidence[0][0], tuple(sorted({f"{text} -> CUDA {m}" for m, text in evidence}))
