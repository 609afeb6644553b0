"""plan.json: the cells a spec expands to, as the run planned them (plan.py writes it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stackmatrix.records._read import JSONObject, JSONValue, extra_keys, obj, string, written


@dataclass(frozen=True, kw_only=True)
class PlanCell:
    """One planned cell: its content hash, its definition, and each field it changes
    against the baseline, as [the baseline's value, this cell's value]."""

    id: str
    content_hash: str | None = None
    run_hash: str | None = None
    baseline: bool | None = None
    definition: JSONObject = field(default_factory=dict)
    differs_from_baseline: JSONObject = field(default_factory=dict)
    extra: JSONObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> PlanCell:
        baseline = raw.get("baseline")
        return cls(
            id=str(raw.get("id")),
            content_hash=string(raw.get("content_hash")),
            run_hash=string(raw.get("run_hash")),
            baseline=baseline if isinstance(baseline, bool) else None,
            definition=obj(raw.get("definition")),
            differs_from_baseline=obj(raw.get("differs_from_baseline")),
            extra=extra_keys(raw, cls),
        )

    def to_dict(self) -> JSONObject:
        return written(self)
