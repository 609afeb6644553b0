"""The matrix report: compatibility x throughput, verdicts, and unintended differences."""

from __future__ import annotations

from stackmatrix.report.build import DEFAULT_HISTORY, ReportOutcome, build_report
from stackmatrix.report.policy import POLICIES, parse_fail_on
from stackmatrix.stats.power import Calibration, calibrate
from stackmatrix.stats.verdict import Comparison, Thresholds, Verdict

__all__ = [
    "DEFAULT_HISTORY",
    "POLICIES",
    "Calibration",
    "Comparison",
    "ReportOutcome",
    "Thresholds",
    "Verdict",
    "build_report",
    "calibrate",
    "parse_fail_on",
]
