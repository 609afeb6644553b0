"""What a backend's build returns (`BuildOutcome`, with its `LockEntry`s); the
`Environment` it describes is `built_environment.py`'s, re-exported here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stackmatrix.built_environment import Environment as Environment
from stackmatrix.findings import Finding
from stackmatrix.jsontypes import JSONObject
from stackmatrix.results import Status


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
