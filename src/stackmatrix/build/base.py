"""What every backend hands to the later phases: an `Environment` description.

It is saved in build.json (`data.environment`) so the check and bench phases read
it from the results directory instead of asking the backend again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix.findings import Finding
from stackmatrix.results import Status


@dataclass(frozen=True, kw_only=True)
class Environment:
    backend: str
    # argv prefix that runs the environment's interpreter from this host, e.g.
    # ["/work/envs/cu128-1a2b/bin/python"] or ["docker", "run", "--rm", IMAGE, "python3"].
    python: tuple[str, ...]
    # host path of sys.prefix (None when the environment lives in an image)
    prefix: Path | None = None
    # host paths of the site-packages directories to scan statically
    site_packages: tuple[Path, ...] = ()
    # host path of the filesystem root whose system libraries the loader would see
    # ("/" for venv/current; an exported image rootfs for docker)
    root: Path = Path("/")
    image: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "python": list(self.python),
            "prefix": str(self.prefix) if self.prefix else None,
            "site_packages": [str(p) for p in self.site_packages],
            "root": str(self.root),
            "image": self.image,
            "env": dict(self.env),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Environment:
        return cls(
            backend=str(raw["backend"]),
            python=tuple(raw["python"]),
            prefix=Path(raw["prefix"]) if raw.get("prefix") else None,
            site_packages=tuple(Path(p) for p in raw.get("site_packages", [])),
            root=Path(raw.get("root") or "/"),
            image=raw.get("image"),
            env=dict(raw.get("env") or {}),
        )


@dataclass(frozen=True, kw_only=True)
class LockEntry:
    """One installed distribution as the resolver left it."""

    name: str  # canonical (PEP 503) name
    version: str
    # "registry:<index url>", "find-links:<dir or url>", "url:<url>", "path:<p>", "unknown"
    source: str
    requested: bool = False  # installed because the cell asked for it (not as a dependency)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "requested": self.requested,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LockEntry:
        return cls(
            name=str(raw["name"]),
            version=str(raw["version"]),
            source=str(raw.get("source", "unknown")),
            requested=bool(raw.get("requested", False)),
        )


@dataclass(frozen=True, kw_only=True)
class BuildOutcome:
    """What a backend's build returns; the pipeline turns it into build.json."""

    status: Status
    environment: Environment | None
    code: str | None = None  # e.g. "resolution_failed", "index_unreachable", "build_failed"
    message: str = ""
    lock: tuple[LockEntry, ...] = ()
    findings: tuple[Finding, ...] = ()
    reused: bool = False  # an existing environment with this content hash verified and was kept
    data: dict[str, Any] = field(default_factory=dict)  # backend extras (image id, timings...)
