"""What every backend hands to the later phases: an `Environment` description.

It is saved in build.json (`data.environment`) so the check and bench phases read
it from the results directory instead of asking the backend again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix.findings import Finding
from stackmatrix.jsontypes import JSONObject
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

    def to_dict(self) -> JSONObject:
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
    def from_dict(cls, raw: Mapping[str, object]) -> Environment:
        """What to_dict wrote (build.json's `data.environment`, read loosely)."""
        backend, python = str(raw["backend"]), raw["python"]
        prefix, site_packages, root = raw.get("prefix"), raw.get("site_packages"), raw.get("root")
        image, env = raw.get("image"), raw.get("env")
        return cls(
            backend=backend,
            python=tuple(str(a) for a in python) if isinstance(python, list | tuple) else (),
            prefix=Path(prefix) if isinstance(prefix, str) and prefix else None,
            site_packages=tuple(
                Path(str(p))
                for p in (site_packages if isinstance(site_packages, list | tuple) else ())
            ),
            root=Path(root) if isinstance(root, str) and root else Path("/"),
            image=image if isinstance(image, str) else None,
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {},
        )


@dataclass(frozen=True, kw_only=True)
class LockEntry:
    """One installed distribution as the resolver left it."""

    name: str  # canonical (PEP 503) name
    version: str
    # "registry:<index url>", "find-links:<dir or url>", "url:<url>", "path:<p>", "unknown"
    source: str
    requested: bool = False  # installed because the cell asked for it (not as a dependency)

    def to_dict(self) -> JSONObject:
        return {
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "requested": self.requested,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> LockEntry:
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
    # backend extras (image id, timings...); what is in it is JSON (build.json's data), but
    # the pipeline and tests read its values loosely (`out.data["base_image"]["id"]`)
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def failed(
        cls,
        code: str,
        message: str,
        *,
        findings: tuple[Finding, ...] = (),
        data: Mapping[str, Any] | None = None,
    ) -> BuildOutcome:
        """No environment, and why (`builder/phase.py` makes it the cell's failed result)."""
        return cls(
            status=Status.FAILED,
            environment=None,
            code=code,
            message=message,
            findings=findings,
            data=dict(data or {}),
        )
