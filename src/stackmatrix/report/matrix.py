"""The report as data: `MatrixReport`, its cells, launches and load points.

Every output (matrix.md, matrix.html, matrix.json, junit.xml) renders this one model,
so they cannot disagree; `report.model.build_model` makes it from a results directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stackmatrix import __version__
from stackmatrix.findings import Finding
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.records.decode import plain
from stackmatrix.report import config_drift as drift_mod
from stackmatrix.report.compat_why import CompatWhy
from stackmatrix.report.failures import failure_text
from stackmatrix.report.frontier import CellFrontier, Load
from stackmatrix.report.latency import LatencyRow
from stackmatrix.report.mapped import LiveMapped
from stackmatrix.report.protocol import Protocol
from stackmatrix.results import Status
from stackmatrix.spec_model import SloBound
from stackmatrix.stats.power import Calibration
from stackmatrix.stats.verdict import Comparison, Interval, Thresholds, Verdict

SCHEMA_VERSION = 1


MISSING = "missing"


UNREADABLE = "unreadable"  # the phase's file exists but is corrupt


@dataclass(frozen=True, kw_only=True)
class PhaseSummary:
    phase: str
    status: str  # a results Status value, "missing" or "unreadable"
    code: str | None = None
    message: str = ""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == Status.OK.value

    def to_dict(self) -> JSONObject:
        return {
            "phase": self.phase,
            "status": self.status,
            "code": self.code,
            "message": self.message,
            "duration_s": self.duration_s,
        }


@dataclass(frozen=True, kw_only=True)
class LaunchRow:
    index: int
    status: str
    value: float | None  # median of the headline over its rounds
    rounds: tuple[float, ...]
    outlier: bool
    env_facts: JSONObject
    warmup: bool = False  # a discarded warm-up launch, in no statistic
    ready_s: float | None = None  # its server's start-up: from start to ready
    # where the launch ran in the whole run: its 1-based slot in the schedule (None or 0
    # in files that predate it), and its start time, the fallback order
    sequence: int | None = None
    started: str | None = None

    @property
    def label(self) -> str:
        return f"W{self.index} (warm-up, discarded)" if self.warmup else f"L{self.index}"

    def to_dict(self) -> JSONObject:
        return {
            "index": self.index,
            "status": self.status,
            "value": self.value,
            "rounds": list(self.rounds),
            "outlier": self.outlier,
            "env_facts": self.env_facts,
            "warmup": self.warmup,
            **({"ready_s": self.ready_s} if self.ready_s is not None else {}),
            "sequence": self.sequence,
            "started": self.started,
        }


@dataclass(frozen=True, kw_only=True)
class HistoryNote:
    """This cell (same content hash, same spec) in earlier reports."""

    previous_value: float | None
    previous_created: str
    change: float | None  # relative, this run vs the previous one
    trend: tuple[float, ...]  # headline medians, oldest first, this run last

    def to_dict(self) -> JSONObject:
        return {
            "previous_value": self.previous_value,
            "previous_created": self.previous_created,
            "change": self.change,
            "trend": list(self.trend),
        }


@dataclass(frozen=True, kw_only=True)
class CellReport:
    id: str
    is_baseline: bool
    content_hash: str | None
    definition: JSONObject
    phases: tuple[PhaseSummary, ...]
    compat: str  # compatible | warnings | incompatible | build failed | not checked ...
    targets: dict[str, str]  # target -> native | ptx | none | n/a | unknown
    findings_by_phase: dict[str, tuple[Finding, ...]]  # phase -> its findings, worst first
    problems: tuple[str, ...]
    headline: Interval | None
    launches: tuple[LaunchRow, ...]  # measured launches only
    summary: dict[str, float]  # bench summary metrics
    comparison: Comparison | None
    drift: drift_mod.Drift | None
    distributions: dict[str, dict[str, float]]  # metric -> quantile label -> value
    versions: dict[str, str]
    history: HistoryNote | None = None
    warmup_launches: tuple[LaunchRow, ...] = ()  # discarded, shown for the record
    mapped: LiveMapped | None = None  # what the live server mapped (report/mapped.py)
    why: CompatWhy | None = None  # the deciding findings of a "warnings"/"incompatible" check
    # which files the check judged as the serving path, in words (report/cells.py)
    judged_on: str | None = None
    # every load of its launches, goodput and the SLO's verdicts (report/frontier.py)
    frontier: CellFrontier | None = None
    # what sets it apart from the baseline, one sentence (report/apart.py)
    set_apart: str | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for group in self.findings_by_phase.values() for f in group)

    @property
    def verdict(self) -> Verdict:
        if self.is_baseline:
            return Verdict.BASELINE
        return self.comparison.verdict if self.comparison else Verdict.NOT_MEASURED

    @property
    def reason(self) -> str:
        """Why the verdict is what it is, in one sentence."""
        if self.is_baseline:
            return "the baseline"
        if self.comparison is not None:
            return self.comparison.reason
        for p in self.phases:
            if not p.ok:
                detail = (p.message or p.code or "").split("\n", 1)[0]
                detail = failure_text(detail, p.message or "", self.findings, code=p.code)
                return f"{p.phase} {p.status}" + (f": {detail}" if detail else "")
        return "no benchmark rounds recorded"

    def phase(self, name: str) -> PhaseSummary:
        return next(p for p in self.phases if p.phase == name)

    def to_dict(self) -> JSONObject:
        return {
            "id": self.id,
            "is_baseline": self.is_baseline,
            "content_hash": self.content_hash,
            "definition": self.definition,
            "phases": {p.phase: p.to_dict() for p in self.phases},
            "compat": self.compat,
            "compat_why": self.why.to_dict() if self.why else None,
            "judged_on": self.judged_on,
            "targets": plain(self.targets),
            "verdict": self.verdict.value,
            "reason": self.reason,
            "set_apart": self.set_apart,
            "headline": self.headline.to_dict() if self.headline else None,
            "launches": [launch.to_dict() for launch in self.launches],
            "warmup_launches": [launch.to_dict() for launch in self.warmup_launches],
            "summary": plain(self.summary),
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "drift": self.drift.to_dict() if self.drift else None,
            "findings": [
                {"phase": phase, **f.to_dict()}
                for phase, group in self.findings_by_phase.items()
                for f in group
            ],
            "problems": list(self.problems),
            "distributions": plain(self.distributions),
            "versions": plain(self.versions),
            "history": self.history.to_dict() if self.history else None,
            **({"mapped": self.mapped.to_dict()} if self.mapped else {}),
            **self._frontier_dict(),
        }

    def _frontier_dict(self) -> JSONObject:
        """`frontier` and `goodput`, where the report has loads (absent otherwise)."""
        f = self.frontier
        if f is None:
            return {}
        points: list[JSONValue] = [p.to_dict(f.gpus) for p in f.points]
        return {"frontier": points, "goodput": f.goodput_dict() if f.slo else None}


@dataclass(frozen=True, kw_only=True)
class PointRow:
    cell: str
    value: Interval | None  # the geometric mean of launches, with its interval
    launches: int
    comparison: Comparison | None  # against the baseline at the same point

    def to_dict(self) -> JSONObject:
        return {
            "cell": self.cell,
            "value": self.value.to_dict() if self.value else None,
            "launches": self.launches,
            "comparison": self.comparison.to_dict() if self.comparison else None,
        }


@dataclass(frozen=True, kw_only=True)
class LoadPointReport:
    """One `[[bench.points]]` load, every cell at it: shown beside the headline,
    never deciding a verdict (the headline does)."""

    name: str
    metric: str
    max_concurrency: int | None
    num_prompts: int | None
    rows: tuple[PointRow, ...]
    latency: tuple[LatencyRow, ...] = ()  # percentiles with sample counts (report/latency.py)

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "name": self.name,
            "metric": self.metric,
            "max_concurrency": self.max_concurrency,
            "num_prompts": self.num_prompts,
            "rows": [r.to_dict() for r in self.rows],
        }
        if self.latency:
            out["latency"] = [r.to_dict() for r in self.latency]
        return out


@dataclass(frozen=True, kw_only=True)
class MatrixReport:
    spec_name: str
    spec_hash: str
    created: str
    baseline: str
    targets: tuple[str, ...]
    headline: str
    thresholds: Thresholds
    fail_on: tuple[str, ...]
    order: str
    cells: tuple[CellReport, ...]
    spec_text: str | None
    notes: tuple[str, ...]
    calibration: tuple[str, Calibration] | None  # (cell it was estimated from, estimate)
    sample_unit: str  # "launch" when every comparison used launches, else "round"
    stackmatrix_version: str = __version__
    history: dict[str, HistoryNote] = field(default_factory=dict)
    # RUN/explain/<cell>/explanation.json of `stackmatrix explain`, one per explained cell
    explanations: tuple[JSONObject, ...] = ()  # read loosely by the renderers
    points: tuple[LoadPointReport, ...] = ()  # [[bench.points]], in the spec's order
    protocol: Protocol | None = None  # the launch plan, GPU time, drift over time
    # the headline load's TTFT/ITL/TPOT percentiles with sample counts (report/latency.py)
    latency: tuple[LatencyRow, ...] = ()
    slo: tuple[SloBound, ...] = ()  # [report] slo (or `report --slo`); empty: none
    # the frontier's loads, by rate then concurrency: the headline's and the load points'
    # (empty where there are neither load points nor an SLO)
    loads: tuple[Load, ...] = ()

    def cell(self, cell_id: str) -> CellReport:
        return next(c for c in self.cells if c.id == cell_id)

    def to_dict(self) -> JSONObject:
        out: JSONObject = {
            "schema_version": SCHEMA_VERSION,
            "stackmatrix_version": self.stackmatrix_version,
            "spec_name": self.spec_name,
            "spec_hash": self.spec_hash,
            "created": self.created,
            "baseline": self.baseline,
            "targets": list(self.targets),
            "headline": self.headline,
            "thresholds": {
                "confidence": self.thresholds.confidence,
                "min_effect": self.thresholds.min_effect,
                "max_halfwidth": self.thresholds.max_halfwidth,
            },
            "fail_on": list(self.fail_on),
            "order": self.order,
            "sample_unit": self.sample_unit,
            "notes": list(self.notes),
            "calibration": (
                {"cell": self.calibration[0], **self.calibration[1].to_dict()}
                if self.calibration
                else None
            ),
            "cells": [c.to_dict() for c in self.cells],
            "spec": self.spec_text,
        }
        if self.explanations:
            out["explanations"] = list(self.explanations)
        if self.points:
            out["points"] = [pt.to_dict() for pt in self.points]
        if self.latency:
            out["latency"] = [r.to_dict() for r in self.latency]
        if self.protocol:
            out["protocol"] = self.protocol.to_dict()
        if self.loads:
            out["slo"] = {b.key: b.ms for b in self.slo} or None
        return out
