"""The rejection rule for a bad launch: one cold or disturbed server launch neither
decides nor hides a verdict.

Rule (docs/report.md, "One bad launch"): among a cell's launch values (at least 3), a
launch is rejected when its log value lies further from the median of the cell's log
values than both `MAD_UNITS` robust standard deviations (1.4826 x the median absolute
deviation) and `floor` (2.5 x min_effect by default, so 5% for a 2% min_effect). The
floor keeps a tight cluster of launches (SGLang on an H200 repeats within 0.1%) from
rejecting an ordinary one; the robust spread keeps a noisy server's ordinary launches.
Its error rates are measured by simulation in tests/unit/report/test_verdict_rates.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MAD_UNITS = 8.0
FLOOR_TIMES_MIN_EFFECT = 2.5
MIN_LAUNCHES = 3


@dataclass(frozen=True, kw_only=True)
class Rejection:
    """A launch left out of the verdict, and why."""

    position: int  # index into the values given
    value: float
    median: float
    off: float  # relative distance from the median of the cell's launches

    def reason(self) -> str:
        side = "below" if self.off < 0 else "above"
        return (
            f"{abs(self.off):.1%} {side} the median of its cell's launches "
            f"({self.value:.4g} against {self.median:.4g})"
        )


def rejected(values: Sequence[float], *, min_effect: float = 0.02) -> list[Rejection]:
    """The launches (positions in `values`) that the rule rejects; none below 3 values."""
    logs = [math.log(v) for v in values if v > 0]
    if len(logs) < MIN_LAUNCHES or len(logs) != len(values):
        return []
    center = statistics.median(logs)
    spread = 1.4826 * statistics.median(abs(x - center) for x in logs)
    limit = max(MAD_UNITS * spread, math.log1p(FLOOR_TIMES_MIN_EFFECT * min_effect))
    out = []
    for i, x in enumerate(logs):
        if abs(x - center) > limit:
            out.append(Rejection(position=i, value=values[i], median=math.exp(center),
                                 off=math.expm1(x - center)))  # fmt: skip
    # never more than a minority: a cell split in two is a bimodal server, not outliers
    return out if 2 * len(out) < len(logs) else []
