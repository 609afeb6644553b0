"""The rejection rule for a bad launch: one cold or disturbed server launch neither
decides nor hides a verdict.

Rule (docs/report.md, "One bad launch"): among a cell's launch values (at least 3), a
launch is rejected when its log value lies further from the median of the cell's log
values than both `MAD_UNITS` robust standard deviations (1.4826 x the median absolute
deviation) and a floor of 4 x min_effect (8% for a 2% min_effect; cold launches on
the H200 were 15-29% slow). The floor keeps a tight cluster of launches (SGLang on
an H200 repeats within 0.1%) from rejecting an ordinary one; the robust spread keeps
a noisy server's ordinary launches. The rule applies only to a quiet cell, whose
robust spread is at most 1.5 x min_effect: there a cold launch is unmistakable, and
on a noisy server rejecting its farthest ordinary launch would narrow the interval
and raise the false-alarm rate. Its error rates are measured by simulation in
tests/unit/report/test_verdict_rates.py and tests/unit/stats/test_stats.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MAD_UNITS = 8.0
FLOOR_TIMES_MIN_EFFECT = 4.0
MIN_LAUNCHES = 3
QUIET_TIMES_MIN_EFFECT = 1.5  # the rule applies when the robust spread is at most this


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
    if spread > QUIET_TIMES_MIN_EFFECT * min_effect:
        # a noisy server: its ordinary launches reach far, and dropping the farthest
        # one would narrow the interval and raise the false alarms; its interval is
        # wide and says so
        return []
    limit = max(MAD_UNITS * spread, math.log1p(FLOOR_TIMES_MIN_EFFECT * min_effect))
    out = []
    for i, x in enumerate(logs):
        if abs(x - center) > limit:
            out.append(
                Rejection(
                    position=i, value=values[i], median=math.exp(center), off=math.expm1(x - center)
                )
            )
    # never more than a minority: a cell split in two is a bimodal server, not outliers
    return out if 2 * len(out) < len(logs) else []
