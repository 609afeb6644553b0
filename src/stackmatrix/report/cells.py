"""One cell of the report from its results: phases, compatibility, targets, launches
(with outliers marked), latency distributions and the versions it ran."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TypeGuard

from stackmatrix import engine_registry, layout
from stackmatrix.records import check_verdict
from stackmatrix.report import config_drift as drift_mod
from stackmatrix.report.apart import set_apart
from stackmatrix.report.compat_why import compat_why, finding_order
from stackmatrix.report.load import CellResults, RunResults, read_requests
from stackmatrix.report.mapped import live_mapped
from stackmatrix.report.matrix import MISSING, UNREADABLE, CellReport, LaunchRow, PhaseSummary
from stackmatrix.report.versions import cell_versions
from stackmatrix.results import PHASES, Status
from stackmatrix.stats.verdict import Comparison, Thresholds, interval, launch_samples

_GAP_RANK = {"none": 0, "ptx": 1, "native": 2, "n/a": 3}  # n/a: no GPU code, no gap
_QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
# the distributions whose versions a cell shows: torch, each engine's stack, triton
_KEY_PACKAGES = ("torch", *engine_registry.report_distributions(), "triton")


def cell_report(
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
        p: tuple(sorted(r.findings, key=finding_order))
        for p in PHASES
        if (r := cell.phase(p)) is not None and r.findings
    }
    compat = _compat(cell)
    return CellReport(
        id=cell.id,
        is_baseline=cell.id == results.baseline,
        content_hash=cell.content_hash,
        definition=cell.definition,
        phases=tuple(_phase(cell, p) for p in PHASES),
        compat=compat,
        why=compat_why(compat, findings.get("check", ())),
        judged_on=judged_on(cell),
        targets=_targets(cell, results.targets),
        findings_by_phase=findings,
        problems=cell.problems,
        headline=interval(samples, confidence=thresholds.confidence) if samples.values else None,
        launches=_launch_rows(cell, headline),
        warmup_launches=_launch_rows(cell, headline, warmup=True),
        summary=dict(cell.bench.summary or {}),
        comparison=comparison,
        drift=drift,
        set_apart=_set_apart(cell, results, drift),
        distributions=_distributions(cell),
        versions=_versions(cell),
        mapped=live_mapped(cell, tuple(f for group in findings.values() for f in group)),
    )


def _set_apart(cell: CellResults, results: RunResults, drift: drift_mod.Drift | None) -> str | None:
    """None for the baseline, and where the cell or the baseline was never built here (a
    cell of another job of a per-cell run): with nothing of one side recorded, every fact
    of the other would read as a difference."""
    base = results.cell(results.baseline)
    if cell.id == results.baseline or base is None:
        return None
    if cell.phase("build") is None or base.phase("build") is None:
        return None
    return set_apart(drift, results.baseline)


def _phase(cell: CellResults, phase: str) -> PhaseSummary:
    result = cell.phase(phase)
    if result is None and phase in cell.unreadable:
        file, why = cell.path / layout.phase_result(phase), cell.unreadable[phase]
        message = why if str(file) in why else f"{file}: {why}"
        return PhaseSummary(phase=phase, status=UNREADABLE, message=message)
    if result is None:
        return PhaseSummary(phase=phase, status=MISSING, message=f"no {layout.phase_result(phase)}")
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
    return check_verdict(check) or "unknown"


# how the probe reached the serving path (check/probe.py judged_on), in words
_REACHED = {
    "entry": "",
    "entry with stub libcuda": ", with the CUDA toolkit's stub libcuda in place of a driver",
    "fallback": ", a lighter module, as the server's entry failed to import",
}


def judged_on(cell: CellResults) -> str | None:
    """`judged on the files mapped by the probe's import of M, with the CUDA toolkit's
    stub libcuda in place of a driver, plus 1 file by loader rule`: what the check's
    verdict was judged on; None where no serving path is known (no probe, or none)."""
    serving = cell.check.extra.get("serving_path")
    if not isinstance(serving, dict) or serving.get("known") is not True:
        return None
    note = serving.get("judged_on_note")
    if not isinstance(note, str) or not note:
        return None
    module = serving.get("module")
    reached = _REACHED.get(str(serving.get("judged_on")), "")
    if not reached or not isinstance(module, str) or f" of {module}" not in note:
        return note
    head, _, rest = note.partition(f" of {module}")
    return f"{head} of {module}{reached}{',' if rest else ''}{rest}"


def _targets(cell: CellResults, targets: Sequence[str]) -> dict[str, str]:
    """Each target's coverage; where the worst of it is only in files the server does
    not load (check/relevance.py), that of the loaded files, "(latent gaps)" beside."""
    summary = cell.check.target_summary or {}
    serving = cell.check.extra.get("serving_path")
    known = isinstance(serving, dict) and serving.get("known") is True
    loaded = serving.get("target_summary") if known and isinstance(serving, dict) else None
    out = {}
    for t in targets:
        full = str(summary.get(t, "unknown"))
        mine = loaded.get(t) if isinstance(loaded, dict) else None
        worse = full in ("none", "ptx") and _GAP_RANK[full] < _GAP_RANK.get(str(mine), -1)
        out[t] = f"{mine} (latent gaps)" if worse else full
    return out


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
                ready_s=launch.ready_s,
                sequence=launch.sequence,
                started=launch.started,
            )
        )
    return tuple(rows) if warmup else _mark_outliers(rows)


def _mark_outliers(rows: list[LaunchRow]) -> tuple[LaunchRow, ...]:
    """A launch far from the others (robust z > 3.5 on the log scale, and > 2% off): the
    report's mark and the cold-start notes. The verdict's own rejection rule is stricter
    (stats/outliers.py); what it left out is listed with the comparison."""
    values = [math.log(r.value) for r in rows if r.value and r.value > 0]
    if len(values) < 3:
        return tuple(rows)
    center = statistics.median(values)
    mad = statistics.median(abs(v - center) for v in values) * 1.4826
    out = []
    for row in rows:
        off = abs(math.log(row.value) - center) if row.value and row.value > 0 else 0.0
        outlier = off > 0.02 and (mad == 0 or off / mad > 3.5)
        out.append(replace(row, outlier=outlier))
    return tuple(out)


def _distributions(cell: CellResults) -> dict[str, dict[str, float]]:
    values: dict[str, list[float]] = {"ttft_ms": [], "itl_ms": [], "tpot_ms": []}
    for path in cell.request_files():
        for record in read_requests(path):
            if record.get("error"):
                continue
            # the client's records (bench/client.py) hold seconds; the plots show ms
            if _real(ttft := record.get("ttft_s")):
                values["ttft_ms"].append(float(ttft) * 1e3)
            itl = record.get("itl_s")  # another value than a list holds no latency
            if isinstance(itl, list):
                values["itl_ms"] += [float(x) * 1e3 for x in itl if _real(x)]
            if (tpot := _tpot_s(record)) is not None:
                values["tpot_ms"].append(tpot * 1e3)
    return {name: _quantiles(vals) for name, vals in values.items() if vals}


def _real(value: object) -> TypeGuard[int | float]:
    # JSON's true and false are ints to Python, not times or counts
    return isinstance(value, int | float) and not isinstance(value, bool)


def _tpot_s(record: Mapping[str, object]) -> float | None:
    """bench/metrics.py's definition, (e2e - ttft) / (tokens - 1), over a raw record."""
    ttft, e2e, tokens = record.get("ttft_s"), record.get("e2e_s"), record.get("output_tokens")
    if not (_real(ttft) and _real(e2e) and _real(tokens)) or tokens <= 1:
        return None
    tpot = (e2e - ttft) / (tokens - 1)
    # the round figures (tpot_median_ms) leave non-positive values out; so does the plot
    return tpot if tpot > 0 and math.isfinite(tpot) else None


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
    # what the server's interpreter imports, not what the lock lists (versions.py)
    return cell_versions(cell, _KEY_PACKAGES)
