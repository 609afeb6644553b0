"""The static scan of an environment, kept in the work dir.

What the check reads from an environment's files (the inventory, every extension's
libraries, symbols, CUDA majors and GPU-arch coverage) depends only on those files and
on what judges them, so an unchanged cell re-runs only the runtime probe. An entry is
keyed by everything the scan reads:

- the environment's identity: its content hash and the digest of its lock, and its
  description (interpreter, prefix, root, image, env);
- the interpreter's real import path, and a fingerprint of every directory on it: the
  names of its entries and the modification times of its files and of its
  `*.dist-info`/`*.egg-info` directories. Directories outside the environment's own (an
  image's site-packages a layered venv inherits, PYTHONPATH) change without its content
  hash changing; an install, upgrade or removal there rewrites a dist-info and so misses.
  Package directories' own times are left out: importing writes `__pycache__` into them;
- the system library directories the loader searches (their modification times: a
  library added, removed or replaced there changes them) and LD_LIBRARY_PATH;
- the cell, its targets and whether this host has an NVIDIA driver;
- the compatibility data (every compat/*.toml), the stackmatrix version and the code of
  the scanner itself (a development checkout changes code, not the version).

Entries live in `<work dir>/scan-cache/<key>.json`, are written atomically, and are read
without following links; a corrupt or foreign entry is ignored and rewritten. A
directory that is a link is not used at all; the newest KEEP entries are kept.
docs/compat.md, "Static scan cache".
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix import __version__, _atomic, _nofollow
from stackmatrix.built_environment import Environment
from stackmatrix.check import data as _data
from stackmatrix.check.inventory import Distribution, Inventory
from stackmatrix.check.libs import SearchContext
from stackmatrix.errors import Unreadable
from stackmatrix.findings import Finding

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
DIRNAME = "scan-cache"
_INSTALLER_DIRS = (".dist-info", ".egg-info")
KEEP = 256  # entries kept: a few MB each for a GPU stack


@dataclass(frozen=True, kw_only=True)
class ScanCache:
    """Where entries live, and what names the environment's files (content hash, lock)."""

    directory: Path
    identity: tuple[str, ...] = ()

    @classmethod
    def in_work_dir(cls, work_dir: Path, *, identity: Iterable[str | None]) -> ScanCache:
        return cls(directory=work_dir / DIRNAME, identity=tuple(str(i) for i in identity))


@dataclass(frozen=True, kw_only=True)
class StaticScan:
    """What the static part of the check found: reused whole on a hit."""

    inventory: Inventory
    findings: list[Finding] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


# --- the key ---------------------------------------------------------------------------


def scan_key(
    cache: ScanCache,
    *,
    environment: Environment,
    site: Sequence[Path],
    ctx: SearchContext,
    cell_id: str | None,
    targets: Sequence[str],
    host_has_driver: bool,
) -> str:
    parts = {
        "schema_version": SCHEMA_VERSION,
        "stackmatrix": __version__,
        "code": code_digest(),
        "compat_data": compat_data_digest(),
        "identity": list(cache.identity),
        "environment": environment.to_dict(),
        "import_path": [[str(d), dir_fingerprint(d)] for d in site],
        "libraries": [[str(d), _mtime(d)] for d in _library_dirs(ctx)],
        "cell": cell_id,
        "targets": list(targets),
        "host_has_driver": host_has_driver,
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def compat_data_digest() -> str:
    """Every compat/*.toml, names and bytes: any rule changed, added or removed."""
    return _files_digest(sorted(_data.data_dir().glob("*.toml")))


def code_digest() -> str:
    return _files_digest(sorted(Path(__file__).parent.glob("*.py")))


def _files_digest(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def dir_fingerprint(directory: Path) -> list[list[Any]]:
    """Entry names, with the times of files and installer metadata directories."""
    out: list[list[Any]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name == "__pycache__" or entry.name.endswith(".pyc"):
                    continue
                out.append([entry.name, _entry_time(entry)])
    except OSError as exc:
        return [["<unreadable>", str(exc)]]
    return sorted(out)


def _entry_time(entry: os.DirEntry[str]) -> int | None:
    try:
        if entry.is_dir(follow_symlinks=False) and not entry.name.endswith(_INSTALLER_DIRS):
            return None
        return entry.stat(follow_symlinks=False).st_mtime_ns
    except OSError:
        return None


def _library_dirs(ctx: SearchContext) -> list[Path]:
    return list(dict.fromkeys([*ctx.ld_library_path, *ctx.process_dirs, *ctx.system_dirs]))


def _mtime(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


# --- entries ---------------------------------------------------------------------------


def entry_path(cache: ScanCache, key: str) -> Path:
    return cache.directory / f"{key}.json"


def usable(cache: ScanCache) -> bool:
    """Never through a link: a cache directory that is one is not used."""
    if cache.directory.is_symlink():
        log.warning("not caching static scans: %s is a symbolic link", cache.directory)
        return False
    return True


def load(cache: ScanCache, key: str) -> StaticScan | None:
    """The entry of `key`, or None when there is none or it cannot be trusted."""
    path = entry_path(cache, key)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        raw = _nofollow.read_json(path)
        return _from_entry(raw, key)
    except (Unreadable, KeyError, TypeError, ValueError, AttributeError) as exc:
        log.warning("ignoring the corrupt static-scan cache entry %s: %s", path, exc)
        return None


def store(cache: ScanCache, key: str, scan: StaticScan) -> None:
    """Write the entry atomically; a failure to write costs the next run time, nothing else."""
    entry = {
        "schema_version": SCHEMA_VERSION,
        "key": key,
        "stackmatrix_version": __version__,
        "inventory": [_dist_to_entry(d) for d in scan.inventory.distributions],
        "findings": [f.to_dict() for f in scan.findings],
        "data": scan.data,
    }
    try:
        cache.directory.mkdir(parents=True, exist_ok=True)
        _atomic.write_json(entry_path(cache, key), entry)
        prune(cache)
    except OSError as exc:
        log.warning("could not cache the static scan in %s: %s", cache.directory, exc)


def prune(cache: ScanCache, keep: int = KEEP) -> None:
    """Keep the `keep` newest entries: every changed environment or rule file adds one."""
    entries = []
    for path in cache.directory.glob("*.json"):
        try:
            entries.append((path.lstat().st_mtime_ns, path))
        except OSError:
            continue  # removed meanwhile by another run
    for _, path in sorted(entries, reverse=True)[keep:]:
        path.unlink(missing_ok=True)


def _from_entry(raw: Any, key: str) -> StaticScan:
    if not isinstance(raw, dict) or raw.get("schema_version") != SCHEMA_VERSION:
        raise ValueError("not a schema_version 1 entry")
    if raw.get("key") != key:
        raise ValueError(f"written for key {raw.get('key')!r}")
    if not isinstance(raw["data"], dict):
        raise TypeError("data is not a table")
    dists = tuple(_dist_from_entry(d) for d in raw["inventory"])
    return StaticScan(
        inventory=_inventory(dists),
        findings=[Finding.from_dict(f) for f in raw["findings"]],
        data=raw["data"],
    )


def _inventory(dists: tuple[Distribution, ...]) -> Inventory:
    owners: dict[str, str] = {}
    for dist in dists:
        for f in dist.files:
            owners.setdefault(f, dist.name)  # as read_inventory: the earlier one owns it
    return Inventory(distributions=dists, owners=owners)


def _dist_to_entry(d: Distribution) -> dict[str, Any]:
    return {
        **d.to_dict(),
        "files": list(d.files),
        "site_packages": str(d.site_packages),
        "sonames_needed": list(d.sonames_needed),
    }


def _dist_from_entry(raw: dict[str, Any]) -> Distribution:
    return Distribution(
        name=str(raw["name"]),
        version=str(raw["version"]),
        local=None if raw["local"] is None else str(raw["local"]),
        requires=tuple(str(r) for r in raw["requires"]),
        files=tuple(str(f) for f in raw["files"]),
        site_packages=Path(raw["site_packages"]),
        cuda_major=None if raw["cuda_major"] is None else int(raw["cuda_major"]),
        cuda_evidence=tuple(str(e) for e in raw["cuda_evidence"]),
        sonames_needed=tuple(str(s) for s in raw["sonames_needed"]),
    )
