"""build.json's and check.json's data, as far as later phases and the report read them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stackmatrix.findings import Severity
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.records.bench import BenchData
from stackmatrix.records.decode import decode, problem, written
from stackmatrix.results import PhaseResult
from stackmatrix.spec_model import MAX_LAUNCHES


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


# keys a record keeps in `extra` (a field would move them in the file it writes) that
# must still hold these JSON types: a path, "a list" or "an object"
_EXTRA_KINDS: dict[type, dict[str, type]] = {
    CheckData: {"inventory": list, "extensions": list, "coverage": dict, "probe.env": dict},
    BenchData: {"server_info": dict, "launch_argv": list},
}
_RECORDS: dict[str, type] = {"build": BuildData, "check": CheckData, "bench": BenchData}


def data_problem(phase: str, raw: object, where: str = "data") -> str | None:
    """Where a phase result's `data` first departs from its record (see `problem`), or
    from the JSON types the keys its record keeps in `extra` must have; None when it fits."""
    record = _RECORDS.get(phase)
    if record is None:  # a phase without a record of its data
        return None
    found = problem(record, raw, where)
    if found is not None or not isinstance(raw, dict):
        return found
    for path, kind in _EXTRA_KINDS.get(record, {}).items():
        value: object = raw
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None and not isinstance(value, kind):
            said = "a list" if kind is list else "an object"
            shown = "" if isinstance(value, dict | list) else f" {value!r:.40}"
            return f"{where}.{path} is {type(value).__name__}{shown}, not {said}"
    return _launch_plan_problem(raw, where) if record is BenchData else None


def _launch_plan_problem(raw: Mapping[str, object], where: str) -> str | None:
    """An adaptive plan's `min` and `max` launches are counts a spec allows (1 to
    MAX_LAUNCHES): 2**60 would make a look count no loop should run to."""
    plan = raw.get("launch_plan")
    for key in ("min", "max"):
        value = plan.get(key) if isinstance(plan, dict) else None
        ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_LAUNCHES
        if value is not None and not ok:
            shown = f"{value!r:.40}"
            return f"{where}.launch_plan.{key} is {shown}, not a count from 1 to {MAX_LAUNCHES}"
    return None


def check_verdict(check: PhaseResult) -> str | None:
    """The check's verdict, said once for the report and the bench: its own,
    or for a check.json without one, "incompatible" when a finding fails; None when
    nothing says."""
    verdict = CheckData.from_dict(check.data).verdict
    if verdict is None and any(f.severity is Severity.FAIL for f in check.findings):
        return "incompatible"
    return verdict
