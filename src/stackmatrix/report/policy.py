"""The exit-status policy: which report outcomes fail the command (`--fail-on`)."""

from __future__ import annotations

from collections.abc import Sequence

from stackmatrix.report import _frontier_text
from stackmatrix.report.frontier import CellFrontier
from stackmatrix.report.matrix import CellReport, MatrixReport
from stackmatrix.spec_model import FAIL_ON, SLO_FAIL_ON
from stackmatrix.specfile import parse_fail_on
from stackmatrix.verdict_registry import traits

POLICIES = FAIL_ON
__all__ = ["POLICIES", "failures", "parse_fail_on", "slo_failures"]
_FAILED_PHASE = ("failed", "interrupted", "unreadable")


def failures(report: MatrixReport, fail_on: Sequence[str]) -> list[str]:
    """One sentence per cell and policy that matched."""
    out: list[str] = []
    for cell in report.cells:
        if "incompatible" in fail_on and cell.compat == "incompatible":
            out.append(f"{cell.id}: incompatible (see its check findings)")
        if "regression" in fail_on and traits(cell.verdict).regression:
            reason = cell.comparison.reason if cell.comparison else ""
            out.append(f"{cell.id}: slower than {report.baseline} on {report.headline}: {reason}")
        if "failed" in fail_on:
            out += [
                f"{cell.id}: {p.phase} {p.status}" + (f" ({p.code})" if p.code else "")
                for p in cell.phases
                if p.status in _FAILED_PHASE
            ]
        out += [f"{cell.id}: {why}" for name, why in slo_failures(report, cell) if name in fail_on]
    return out + _unjudged(report, fail_on)


def slo_failures(report: MatrixReport, cell: CellReport) -> list[tuple[str, str]]:
    """(policy, sentence) for each of the cell's failures at the SLO: slower than the
    baseline in goodput at the headline load (`goodput-regression`), a largest load
    within the SLO below the baseline's (`slo-load-regression`). junit.xml's slo[...]
    cases fail on the same."""
    mine, base = cell.frontier, baseline_frontier(report)
    if mine is None or base is None or not mine.slo or cell.is_baseline:
        return []
    out: list[tuple[str, str]] = []
    if mine.goodput is not None and traits(mine.goodput.verdict).regression:
        why = f"slower than {report.baseline} in goodput at the headline load: "
        out.append(("goodput-regression", why + mine.goodput.reason))
    if mine.versus == "lower":
        text = _frontier_text.largest_text(mine, base, report.baseline)
        why = f"below the baseline's largest load within the SLO: {text}"
        out.append(("slo-load-regression", why))
    return out


def baseline_frontier(report: MatrixReport) -> CellFrontier | None:
    return next((c.frontier for c in report.cells if c.id == report.baseline), None)


def _unjudged(report: MatrixReport, fail_on: Sequence[str]) -> list[str]:
    """A policy at the SLO asked of a report that judges none: a gate that cannot close
    must not pass quietly."""
    if report.slo:
        return []
    return [
        f"{name}: this report judges no SLO ([report] slo in the spec, or report --slo)"
        for name in SLO_FAIL_ON
        if name in fail_on
    ]
