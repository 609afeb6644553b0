"""build.json's and check.json's data, as far as later phases and the report read them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stackmatrix.findings import Severity
from stackmatrix.records._read import JSONObject, JSONValue, decode, written
from stackmatrix.results import PhaseResult


@dataclass(frozen=True, kw_only=True)
class BuildData:
    """build.json's `data`: the environment built (backend, interpreter, prefix, env) and
    its resolved lock, one {name, version, source, requested} per package."""

    environment: JSONObject | None = None  # Environment.from_dict reads it
    lock: tuple[JSONObject, ...] | None = None
    lock_digest: str | None = None
    python_version: str | None = None  # results of earlier versions
    extra: JSONObject = field(default_factory=dict)  # reused, content_hash, timings...

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> BuildData:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        return written(self)


@dataclass(frozen=True, kw_only=True)
class CheckData:
    """check.json's `data`: the verdict, each target's coverage and what the runtime
    probe and the driver said (the check's inventory and analyses stay in `extra`)."""

    verdict: str | None = None
    target_summary: JSONObject | None = None  # target -> native | ptx | none | n/a
    probe: JSONObject | None = None
    driver: JSONObject | None = None
    timing: JSONObject | None = None  # "static_scan": "hit" when the scan came from the cache
    extra: JSONObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> CheckData:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        return written(self)


def check_verdict(check: PhaseResult) -> str | None:
    """The check's verdict, said once for the report and the bench: its own,
    or for a check.json without one, "incompatible" when a finding fails; None when
    nothing says."""
    verdict = CheckData.from_dict(check.data).verdict
    if verdict is None and any(f.severity is Severity.FAIL for f in check.findings):
        return "incompatible"
    return verdict
