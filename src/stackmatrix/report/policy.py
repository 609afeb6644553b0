"""The exit-status policy: which report outcomes fail the command (`--fail-on`)."""

from __future__ import annotations

from collections.abc import Sequence

from stackmatrix.report.matrix import MatrixReport
from stackmatrix.report.stats import Verdict
from stackmatrix.spec import parse_fail_on
from stackmatrix.spec_model import FAIL_ON

POLICIES = FAIL_ON
__all__ = ["POLICIES", "failures", "parse_fail_on"]
_FAILED_PHASE = ("failed", "interrupted", "unreadable")


def failures(report: MatrixReport, fail_on: Sequence[str]) -> list[str]:
    """One sentence per cell and policy that matched."""
    out: list[str] = []
    for cell in report.cells:
        if "incompatible" in fail_on and cell.compat == "incompatible":
            out.append(f"{cell.id}: incompatible (see its check findings)")
        if "regression" in fail_on and cell.verdict is Verdict.SLOWER:
            reason = cell.comparison.reason if cell.comparison else ""
            out.append(f"{cell.id}: slower than {report.baseline} on {report.headline}: {reason}")
        if "failed" in fail_on:
            out += [
                f"{cell.id}: {p.phase} {p.status}" + (f" ({p.code})" if p.code else "")
                for p in cell.phases
                if p.status in _FAILED_PHASE
            ]
    return out
