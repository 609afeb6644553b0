"""The report as data: one `MatrixReport` built from a results directory.

Every output (matrix.md, matrix.html, matrix.json, junit.xml) renders this one model,
so they cannot disagree.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackmatrix import __version__
from stackmatrix.findings import Finding, Severity
from stackmatrix.records import PointInfo, RunRecord
from stackmatrix.report import drift as drift_mod
from stackmatrix.report.compat_data import compat_dir
from stackmatrix.report.facts import collect, log_engine
from stackmatrix.report.load import CellResults, RunResults, read_explanations, read_requests
from stackmatrix.report.logfacts import LogPattern, load_patterns, read_facts, unread
from stackmatrix.report.stats import (
    Calibration,
    Comparison,
    Interval,
    Thresholds,
    Verdict,
    calibrate,
    compare,
    higher_is_better,
    interval,
    launch_samples,
)
from stackmatrix.results import PHASES, Status

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
MISSING = "missing"
UNREADABLE = "unreadable"  # the phase's file exists but is corrupt (issue 16, defect 15)
_SEVERITY_ORDER = {Severity.FAIL: 0, Severity.WARN: 1, Severity.INFO: 2}
_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
_KEY_PACKAGES = (
    "torch",
    "sglang",
    "sgl-kernel",
    "sglang-kernel",
    "flashinfer-python",
    "vllm",
    "transformers",
    "triton",
)


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

    def to_dict(self) -> dict[str, Any]:
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
    env_facts: dict[str, Any]
    warmup: bool = False  # a discarded warm-up launch, in no statistic

    @property
    def label(self) -> str:
        return f"W{self.index} (warm-up, discarded)" if self.warmup else f"L{self.index}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "status": self.status,
            "value": self.value,
            "rounds": list(self.rounds),
            "outlier": self.outlier,
            "env_facts": self.env_facts,
            "warmup": self.warmup,
        }


@dataclass(frozen=True, kw_only=True)
class HistoryNote:
    """This cell (same content hash, same spec) in earlier reports."""

    previous_value: float | None
    previous_created: str
    change: float | None  # relative, this run vs the previous one
    trend: tuple[float, ...]  # headline medians, oldest first, this run last

    def to_dict(self) -> dict[str, Any]:
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
    definition: dict[str, Any]
    phases: tuple[PhaseSummary, ...]
    compat: str  # compatible | warnings | incompatible | build failed | not checked ...
    targets: dict[str, str]  # target -> native | ptx | none | n/a | unknown
    findings_by_phase: dict[str, tuple[Finding, ...]]  # phase -> its findings, worst first
    problems: tuple[str, ...]
    headline: Interval | None
    launches: tuple[LaunchRow, ...]  # measured launches only
    summary: dict[str, Any]  # bench summary metrics
    comparison: Comparison | None
    drift: drift_mod.Drift | None
    distributions: dict[str, dict[str, float]]  # metric -> quantile label -> value
    versions: dict[str, str]
    history: HistoryNote | None = None
    warmup_launches: tuple[LaunchRow, ...] = ()  # discarded, shown for the record

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
                return f"{p.phase} {p.status}" + (f": {detail}" if detail else "")
        return "no benchmark rounds recorded"

    def phase(self, name: str) -> PhaseSummary:
        return next(p for p in self.phases if p.phase == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "is_baseline": self.is_baseline,
            "content_hash": self.content_hash,
            "definition": self.definition,
            "phases": {p.phase: p.to_dict() for p in self.phases},
            "compat": self.compat,
            "targets": self.targets,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "headline": self.headline.to_dict() if self.headline else None,
            "launches": [launch.to_dict() for launch in self.launches],
            "warmup_launches": [launch.to_dict() for launch in self.warmup_launches],
            "summary": self.summary,
            "comparison": self.comparison.to_dict() if self.comparison else None,
            "drift": self.drift.to_dict() if self.drift else None,
            "findings": [
                {"phase": phase, **f.to_dict()}
                for phase, group in self.findings_by_phase.items()
                for f in group
            ],
            "problems": list(self.problems),
            "distributions": self.distributions,
            "versions": self.versions,
            "history": self.history.to_dict() if self.history else None,
        }


@dataclass(frozen=True, kw_only=True)
class PointRow:
    cell: str
    value: Interval | None  # the geometric mean of launches, with its interval
    launches: int
    comparison: Comparison | None  # against the baseline at the same point

    def to_dict(self) -> dict[str, Any]:
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "max_concurrency": self.max_concurrency,
            "num_prompts": self.num_prompts,
            "rows": [r.to_dict() for r in self.rows],
        }


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
    explanations: tuple[dict[str, Any], ...] = ()
    points: tuple[LoadPointReport, ...] = ()  # [[bench.points]], in the spec's order

    def cell(self, cell_id: str) -> CellReport:
        return next(c for c in self.cells if c.id == cell_id)

    def to_dict(self) -> dict[str, Any]:
        return (
            {
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
            | ({"explanations": list(self.explanations)} if self.explanations else {})
            | ({"points": [pt.to_dict() for pt in self.points]} if self.points else {})
        )


def thresholds_from(run: RunRecord) -> tuple[str, Thresholds, tuple[str, ...]]:
    """The headline metric, thresholds and fail_on recorded in run.json (with defaults)."""
    policy = run.report
    defaults = Thresholds()
    thresholds = Thresholds(
        confidence=float(policy.confidence or defaults.confidence),
        min_effect=float(policy.min_effect or defaults.min_effect),
    )
    return policy.headline or "output_throughput", thresholds, policy.fail_on


def build_model(
    results: RunResults, *, compat: Path | None = None, headline: str | None = None
) -> MatrixReport:
    run = results.record
    spec_headline, thresholds, fail_on = thresholds_from(run)
    headline = headline or spec_headline
    notes = list(results.problems)
    if run.synthetic:
        notes.insert(0, run.synthetic)
    patterns, ranking = _rules(compat, notes)
    base = results.cell(results.baseline)
    if base is None:
        notes.append(f"baseline {results.baseline!r} has no results: no verdicts")
    base_facts = collect(base, patterns) if base else None
    cells = []
    for cell in results.cells:
        is_base = cell.id == results.baseline
        comparison = None
        drift = None
        if base is not None and not is_base:
            comparison = _compare(cell, base, headline, thresholds)
            if base_facts is not None:
                drift = drift_mod.diff(
                    collect(cell, patterns),
                    base_facts,
                    differs=cell.differs,
                    ranking=ranking,
                    cell_server_args=tuple(cell.definition.get("server_args") or ()),
                )
        cells.append(_cell_report(cell, results, headline, thresholds, comparison, drift))
    notes += _unread_notes(results.cells, patterns)
    notes += _cold_first_launch_notes(cells, headline)
    return MatrixReport(
        spec_name=run.spec_name,
        spec_hash=run.spec_hash,
        created=run.created,
        baseline=results.baseline,
        targets=results.targets,
        headline=headline,
        thresholds=thresholds,
        fail_on=fail_on,
        order=run.order,
        cells=tuple(cells),
        spec_text=results.spec_text,
        notes=tuple(notes),
        calibration=_calibration(results, headline, thresholds),
        sample_unit=_unit(cells),
        explanations=read_explanations(results.path, notes),
        points=_points(results, base, thresholds),
    )


def _points(
    results: RunResults, base: CellResults | None, thresholds: Thresholds
) -> tuple[LoadPointReport, ...]:
    described: dict[str, PointInfo] = {}
    for cell in results.cells:  # every cell's bench.json names the spec's points
        for name, info in cell.points().items():
            described.setdefault(name, info)
    out = []
    for name, info in described.items():
        metric = info.metric or "output_throughput"
        rows = []
        for cell in results.cells:
            launches = [r for r in cell.launches(metric, point=name) if r]
            samples = launch_samples(launches)
            comparison = None
            if base is not None and cell is not base and launches:
                comparison = _compare_at(cell, base, metric, name, thresholds)
            value = interval(samples, confidence=thresholds.confidence) if samples.values else None
            rows.append(PointRow(
                cell=cell.id,
                value=value,
                launches=len(launches),
                comparison=comparison,
            ))  # fmt: skip
        out.append(LoadPointReport(
            name=name, metric=metric,
            max_concurrency=info.max_concurrency,
            num_prompts=info.num_prompts,
            rows=tuple(rows),
        ))  # fmt: skip
    return tuple(out)


def _cold_first_launch_notes(cells: Sequence[CellReport], headline: str) -> list[str]:
    """A cell whose first measured launch is an outlier on the bad side paid for something
    the warm-up launches did not (a JIT's compiles, cold caches): the H200 upgrade run's
    first 0.5.12 launch was 23% slow after one warm-up launch, and made its noise 11.6%."""
    notes = []
    better_high = higher_is_better(headline)
    for cell in cells:
        measured = [r for r in cell.launches if r.value is not None]
        values = [r.value for r in measured if r.value is not None]
        if len(values) < 3 or not measured[0].outlier:
            continue
        first, median = values[0], statistics.median(values[1:])
        if (first < median) != better_high:
            continue  # an outlier on the good side is not a cold start
        warm = len(cell.warmup_launches)
        notes.append(
            f"{cell.id}: its first measured launch ({measured[0].label}, {first:.4g}) is an "
            f"outlier, {abs(first / median - 1):.0%} worse than its other launches' median "
            f"({median:.4g}); after {warm} warm-up launch(es) it still paid for a cold start "
            "(a JIT's compiles, cold caches): raise bench.warmup_launches"
        )
    return notes


def _unread_notes(cells: Sequence[CellResults], patterns: Sequence[LogPattern]) -> list[str]:
    """Facts every log of the cell's engine should state that none of its logs did."""
    out = []
    for cell in cells:
        logs = cell.server_logs()
        missing = unread(read_facts(logs, patterns, engine=log_engine(cell))) if logs else []
        if missing:
            out.append(
                f"{cell.id}: not read from its server logs (no line matched "
                f"compat/log_patterns.toml): {', '.join(missing)}"
            )
    return out


def _rules(compat: Path | None, notes: list[str]) -> tuple[Sequence[LogPattern], drift_mod.Ranking]:
    from stackmatrix.errors import ResultsError

    try:
        patterns: Sequence[LogPattern] = load_patterns(compat)
    except ResultsError as exc:
        notes.append(f"server logs not read: {exc.message}")
        patterns = ()
    try:
        ranking = drift_mod.load_ranking(compat)
    except ResultsError as exc:
        notes.append(f"differences not ranked: {exc.message}")
        ranking = drift_mod.Ranking(rules=())
    log.debug("rules from %s", compat or compat_dir())
    return patterns, ranking


def _compare(
    cell: CellResults, base: CellResults, headline: str, thresholds: Thresholds
) -> Comparison | None:
    return _compare_at(cell, base, headline, None, thresholds)


def _compare_at(
    cell: CellResults, base: CellResults, metric: str, point: str | None, thresholds: Thresholds
) -> Comparison | None:
    mine, theirs = cell.launches(metric, point), base.launches(metric, point)
    if not any(mine):
        return None
    if not any(theirs):
        where = f" at load point {point!r}" if point else ""
        return Comparison(
            metric=metric,
            verdict=Verdict.INCONCLUSIVE,
            reason=f"the baseline {base.id!r} has no {metric} measurements{where}",
            confidence=thresholds.confidence,
        )
    return compare(mine, theirs, metric=metric, thresholds=thresholds)


def _unit(cells: Sequence[CellReport]) -> str:
    units = {c.comparison.unit for c in cells if c.comparison and c.comparison.unit}
    return "round" if "round" in units else "launch"


def _calibration(
    results: RunResults, headline: str, thresholds: Thresholds
) -> tuple[str, Calibration] | None:
    """Noise estimate from the baseline's launches, else from the first cell with enough."""
    base = results.cell(results.baseline)
    others = [c for c in results.cells if c is not base]
    for cell in [base, *others] if base else others:
        launches = [r for r in cell.launches(headline) if r]
        if len(launches) >= 2:
            alpha = round(1 - thresholds.confidence, 9)
            return cell.id, calibrate(launches, alpha=alpha, power=thresholds.power)
    return None


def _cell_report(
    cell: CellResults,
    results: RunResults,
    headline: str,
    thresholds: Thresholds,
    comparison: Comparison | None,
    drift: drift_mod.Drift | None,
) -> CellReport:
    launches = cell.launches(headline)
    samples = launch_samples(launches)
    findings = {
        p: tuple(sorted(r.findings, key=lambda f: (_SEVERITY_ORDER[f.severity], f.code)))
        for p in PHASES
        if (r := cell.phase(p)) is not None and r.findings
    }
    return CellReport(
        id=cell.id,
        is_baseline=cell.id == results.baseline,
        content_hash=cell.content_hash,
        definition=cell.definition,
        phases=tuple(_phase(cell, p) for p in PHASES),
        compat=_compat(cell),
        targets=_targets(cell, results.targets),
        findings_by_phase=findings,
        problems=cell.problems,
        headline=interval(samples, confidence=thresholds.confidence) if samples.values else None,
        launches=_launch_rows(cell, headline),
        warmup_launches=_launch_rows(cell, headline, warmup=True),
        summary=dict(cell.bench.summary or {}),
        comparison=comparison,
        drift=drift,
        distributions=_distributions(cell),
        versions=_versions(cell),
    )


def _phase(cell: CellResults, phase: str) -> PhaseSummary:
    result = cell.phase(phase)
    if result is None and phase in cell.unreadable:
        file, why = cell.path / f"{phase}.json", cell.unreadable[phase]
        message = why if str(file) in why else f"{file}: {why}"
        return PhaseSummary(phase=phase, status=UNREADABLE, message=message)
    if result is None:
        return PhaseSummary(phase=phase, status=MISSING, message=f"no {phase}.json")
    return PhaseSummary(
        phase=phase,
        status=result.status.value,
        code=result.code,
        message=result.message,
        duration_s=result.duration_s,
    )


def _compat(cell: CellResults) -> str:
    build, check = cell.phase("build"), cell.phase("check")
    if build is not None and build.status is Status.FAILED:
        return "build failed"
    if check is None:
        return "not checked"
    if check.status is not Status.OK:
        return f"check {check.status.value}"
    verdict = check.data.get("verdict")
    if verdict is None and any(f.severity is Severity.FAIL for f in check.findings):
        return "incompatible"
    return str(verdict or "unknown")


def _targets(cell: CellResults, targets: Sequence[str]) -> dict[str, str]:
    summary = cell.data("check").get("target_summary") or {}
    return {t: str(summary.get(t, "unknown")) for t in targets}


def _launch_rows(
    cell: CellResults, headline: str, *, warmup: bool = False
) -> tuple[LaunchRow, ...]:
    rows = []
    records = cell.bench.warmup_launches if warmup else cell.bench.launches
    for i, launch in enumerate(records, start=1):
        rounds = tuple(launch.values(headline))
        index = launch.index if isinstance(launch.index, int) and not warmup else i
        rows.append(
            LaunchRow(
                index=index,
                status=launch.status or "ok",
                value=statistics.median(rounds) if rounds else None,
                rounds=rounds,
                outlier=False,
                env_facts=dict(launch.env_facts),
                warmup=warmup,
            )
        )
    return tuple(rows) if warmup else _mark_outliers(rows)


def _mark_outliers(rows: list[LaunchRow]) -> tuple[LaunchRow, ...]:
    """A launch far from the others (robust z > 3.5 on the log scale, and > 2% off)."""
    values = [math.log(r.value) for r in rows if r.value and r.value > 0]
    if len(values) < 3:
        return tuple(rows)
    center = statistics.median(values)
    mad = statistics.median(abs(v - center) for v in values) * 1.4826
    out = []
    for row in rows:
        off = abs(math.log(row.value) - center) if row.value and row.value > 0 else 0.0
        outlier = off > 0.02 and (mad == 0 or off / mad > 3.5)
        out.append(LaunchRow(**{**row.__dict__, "outlier": outlier}))
    return tuple(out)


def _distributions(cell: CellResults) -> dict[str, dict[str, float]]:
    ttft: list[float] = []
    itl: list[float] = []
    for path in cell.request_files():
        for record in read_requests(path):
            if record.get("error"):
                continue
            # the client's records (bench/client.py) hold seconds; the plots show ms
            if isinstance(record.get("ttft_s"), int | float):
                ttft.append(float(record["ttft_s"]) * 1e3)
            itl += [float(x) * 1e3 for x in record.get("itl_s") or [] if isinstance(x, int | float)]
    return {name: _quantiles(vals) for name, vals in (("ttft_ms", ttft), ("itl_ms", itl)) if vals}


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    out = {f"p{round(q * 100)}": _quantile(ordered, q) for q in _QUANTILES}
    out["n"] = float(len(ordered))
    return out


def _quantile(ordered: list[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _versions(cell: CellResults) -> dict[str, str]:
    build, bench, check = cell.data("build"), cell.bench, cell.data("check")
    out: dict[str, str] = {}
    if build.get("python_version"):
        out["python"] = str(build["python_version"])
    lock = {
        str(p.get("name", "")).lower(): str(p.get("version", "")) for p in build.get("lock") or []
    }
    out |= {name: lock[name] for name in _KEY_PACKAGES if name in lock}
    probe = check.get("probe") or {}
    if isinstance(probe, dict):
        out |= {k: str(probe[k]) for k in ("cuda", "cudnn", "nccl") if probe.get(k)}
    if bench.engine_version:
        out["engine"] = f"{bench.engine or ''} {bench.engine_version}".strip()
    return out
