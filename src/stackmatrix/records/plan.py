"""plan.json: the cells a spec expands to, as the run planned them (plan.py writes it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.records.decode import decode, written


@dataclass(frozen=True, kw_only=True)
class PlanCell:
    """One planned cell: its content hash, its definition, and each field it changes
    against the baseline, as [the baseline's value, this cell's value]."""

    id: str = field(metadata={"read": str})  # "None" where a cell has none
    content_hash: str | None = None
    run_hash: str | None = None
    baseline: bool | None = None
    definition: JSONObject = field(default_factory=dict)
    differs_from_baseline: JSONObject = field(default_factory=dict)
    extra: JSONObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> PlanCell:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        return written(self)


@dataclass(frozen=True, kw_only=True)
class PlanRecord:
    """plan.json as the report reads it: the planned cells."""

    cells: tuple[PlanCell, ...] = ()
    extra: JSONObject = field(default_factory=dict)
