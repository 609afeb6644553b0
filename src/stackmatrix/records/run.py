"""run.json: what was run, by which stackmatrix, when; merge adds where it came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from stackmatrix._cellid import refuse_unsafe
from stackmatrix._validate import Problems
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.records.decode import decode, plain, problem
from stackmatrix.results import RunDir
from stackmatrix.spec_model import CONFIDENCE_RANGE, MIN_EFFECT_RANGE
from stackmatrix.specfile.report import parse_slo


@dataclass(frozen=True, kw_only=True)
class ReportPolicyRecord:
    """run.json's `report`: how the spec's [report] (spec_model.ReportPolicy) asked to
    judge the cells, as recorded: null where unknown, keys no field names in `extra`."""

    headline: str | None = None
    confidence: float | None = None
    min_effect: float | None = None
    fail_on: tuple[str, ...] = ()
    slo: dict[str, float] | None = None  # [report] slo as written (specfile/report.py reads it)
    extra: JSONObject = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> ReportPolicyRecord:
        return decode(cls, raw)

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "headline": self.headline,
            "confidence": self.confidence,
            "min_effect": self.min_effect,
            "fail_on": [*self.fail_on],
        }
        if self.slo is not None:  # absent, as before the key existed, where none is set
            out["slo"] = plain(self.slo)
        return out | self.extra


# written by every run (null when unknown); the others only when they apply
_RUN_ALWAYS = (
    "spec_name",
    "spec_path",
    "spec_hash",
    "baseline",
    "targets",
    "driver",
    "cells",
    "order",
    "order_seed",
    "created",
    "updated",
    "stackmatrix_version",
    "run_id",
    "argv",
    "report",
)


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """run.json: what was run (the spec, its cells, the order, the report policy), by
    which stackmatrix, when; `merge` adds where the pieces came from."""

    spec_name: str = ""
    spec_path: str | None = None
    spec_hash: str = ""
    baseline: str = ""
    targets: tuple[str, ...] = ()
    driver: str | None = None
    cells: tuple[str, ...] = ()
    order: str = ""
    order_seed: int | None = None
    created: str = ""
    updated: str | None = None
    stackmatrix_version: str | None = None
    run_id: str | None = None
    argv: tuple[str, ...] = ()
    report: ReportPolicyRecord = field(default_factory=ReportPolicyRecord)
    finished: str | None = None  # set when the invocation's phases ended
    synthetic: str | None = None  # a note: the results are made up (examples, tests)
    merged_from: tuple[str, ...] | None = None  # set by `stackmatrix merge`
    merge_skipped: tuple[str, ...] | None = None
    extra: JSONObject = field(default_factory=dict)

    @classmethod
    def read(cls, run: RunDir) -> RunRecord:
        """RUN/run.json; raises Unreadable when it is absent or of the wrong shape."""
        return cls.from_dict(read_run_json(run))

    @classmethod
    def from_dict(cls, raw: Mapping[str, JSONValue]) -> RunRecord:
        return decode(cls, {k: v for k, v in raw.items() if k != "schema_version"})

    def to_dict(self) -> JSONObject:
        """run.json as `RunDir.write_json` writes it (it adds the schema version)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        values["report"] = self.report.to_dict()
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}
        return {k: v for k, v in out.items() if k in _RUN_ALWAYS or v is not None} | self.extra


def _out_of_range(report: object) -> str | None:
    """A `report` value outside the bounds a spec's [report] has (confidence 1.0 or NaN
    would make no interval, min_effect -1 divides by zero, an SLO bound of NaN ms holds
    for nothing)."""
    if not isinstance(report, dict):
        return None
    for key, (low, high) in (("confidence", CONFIDENCE_RANGE), ("min_effect", MIN_EFFECT_RANGE)):
        value = report.get(key)
        if isinstance(value, int | float) and not low <= value <= high:
            return f"report.{key} is {value!r:.40}, outside {low} to {high} (a spec's bounds)"
    if (slo := report.get("slo")) is not None:
        p = Problems()
        parse_slo(slo, "report.slo", p)
        return p.items[0] if p else None
    return None


def read_run_json(run: RunDir) -> JSONObject:
    """RUN/run.json as read; raises Unreadable when it is absent, a value does not
    fit its RunRecord field (a corrupt or hand-edited file) or a cell id is not one a
    spec could define (it would be a path outside the results)."""
    raw = run.read_run()
    why = problem(RunRecord, raw) or _out_of_range(raw.get("report"))
    if why:
        raise run.corrupt_run(why)
    cells = raw.get("cells")
    refuse_unsafe(cells if isinstance(cells, list) else [], run.run_json)
    return raw
