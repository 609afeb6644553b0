"""Steady state inside one server launch: warm-up batches, judged one against the one
before, until the server answers the same way twice (docs/bench.md, "Steady state").

A fixed count of warm-up requests is no proof of a warm server: on an H200 with
SGLang, the first measured launch after a warm-up launch still had its first two
requests at TTFT 0.64 s and 0.21 s against 0.03 s later, and ran 29% slow."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from stackmatrix.bench import metrics
from stackmatrix.bench.client import RequestRecord
from stackmatrix.jsontypes import JSONObject

# A batch's largest TTFT may be this many times the previous batch's median TTFT, plus
# TTFT_SLACK_S: a single cold request (0.64 s against 0.03 s) is far beyond it, while
# the scheduling jitter of a warm server (a few ms) is not.
TTFT_FACTOR = 2.0
TTFT_SLACK_S = 0.005
# warm-up requests per batch when the workload has none of its own
FALLBACK_BATCH = 4


@dataclass(frozen=True, kw_only=True)
class BatchFigures:
    """What the steady rule reads of one warm-up batch (seconds; None: not measurable)."""

    requests: int
    errors: int
    tpot_median_s: float | None
    ttft_median_s: float | None
    ttft_max_s: float | None


@dataclass(frozen=True, kw_only=True)
class SteadyVerdict:
    steady: bool
    reason: str


def batch_figures(records: Sequence[RequestRecord]) -> BatchFigures:
    """One batch's figures, from its successful requests (as round_metrics counts)."""
    ok = [r for r in records if r.ok]
    tpots = [t for t in (metrics.tpot_s(r) for r in ok) if t is not None and t > 0]
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    return BatchFigures(
        requests=len(records),
        errors=len(records) - len(ok),
        tpot_median_s=statistics.median(tpots) if tpots else None,
        # the lower median: of a batch of two, one cold request must not set the reference
        # (H200: TTFT 10.4 s, then 2.6 s and 25 ms in the next batch of two)
        ttft_median_s=statistics.median_low(ttfts) if ttfts else None,
        ttft_max_s=max(ttfts) if ttfts else None,
    )


def judge(cur: BatchFigures, prev: BatchFigures | None, tolerance: float) -> SteadyVerdict:
    """Whether batch `cur` shows a steady server, given the batch before it.

    A batch is steady when it had no failed request, its median TPOT is within
    `tolerance` (relative) of the previous batch's median TPOT, and its largest TTFT
    is at most 2 x the smaller of its own and the previous batch's (lower) median TTFT
    + 5 ms. The first batch is never
    steady on its own (there is nothing to compare it with). Where either batch has
    no measurable TPOT (1-token outputs), TTFT alone decides."""
    if cur.errors:
        return SteadyVerdict(
            steady=False, reason=f"{cur.errors} of {cur.requests} request(s) failed"
        )
    if prev is None:
        return SteadyVerdict(steady=False, reason="first batch: nothing to compare it with")
    if cur.ttft_max_s is None or prev.ttft_median_s is None:
        return SteadyVerdict(steady=False, reason="no TTFT measured in this batch or the previous")
    reference = min(prev.ttft_median_s, cur.ttft_median_s or prev.ttft_median_s)
    limit = TTFT_FACTOR * reference + TTFT_SLACK_S
    if cur.ttft_max_s > limit:
        return SteadyVerdict(
            steady=False,
            reason=(
                f"largest TTFT {_ms(cur.ttft_max_s)} ms > 2 x the median {_ms(reference)} ms + 5 ms"
            ),
        )
    return _judge_tpot(cur, prev, tolerance)


def _judge_tpot(cur: BatchFigures, prev: BatchFigures, tolerance: float) -> SteadyVerdict:
    if cur.tpot_median_s is None or prev.tpot_median_s is None:
        return SteadyVerdict(steady=True, reason="TTFT steady; no TPOT measurable (TTFT alone)")
    change = abs(cur.tpot_median_s - prev.tpot_median_s) / prev.tpot_median_s
    if change > tolerance:
        return SteadyVerdict(
            steady=False,
            reason=(
                f"median TPOT {_ms(cur.tpot_median_s)} ms vs {_ms(prev.tpot_median_s)} ms "
                f"before: {change:.1%} > {tolerance:.1%}"
            ),
        )
    return SteadyVerdict(steady=True, reason=f"TTFT steady; median TPOT within {change:.1%}")


def judge_all(batches: Sequence[Sequence[RequestRecord]], tolerance: float) -> list[SteadyVerdict]:
    """Each batch judged against the one before it, in order."""
    out: list[SteadyVerdict] = []
    prev: BatchFigures | None = None
    for batch in batches:
        cur = batch_figures(batch)
        out.append(judge(cur, prev, tolerance))
        prev = cur
    return out


@dataclass(kw_only=True)
class SteadyLog:
    """The warm-up batches of one launch as they are judged (a server that dies
    mid-warm-up keeps the batches it answered); the launch record's "steady" entry."""

    max_batches: int
    tolerance: float
    batches: list[tuple[BatchFigures, SteadyVerdict]] = field(default_factory=list)

    @property
    def steady_after(self) -> int | None:
        """The batch count at the first steady batch; None if none was."""
        return next((i for i, (_, v) in enumerate(self.batches, 1) if v.steady), None)

    def to_dict(self) -> JSONObject:
        after = self.steady_after
        head: JSONObject = {"steady": after is not None}
        if after is not None:
            head["steady_after"] = after
        return head | {
            "max_batches": self.max_batches,
            "tolerance": self.tolerance,
            "batches": [_batch_dict(f, v) for f, v in self.batches],
        }


def _batch_dict(f: BatchFigures, v: SteadyVerdict) -> JSONObject:
    return {
        "requests": f.requests,
        "errors": f.errors,
        "tpot_median_ms": _ms(f.tpot_median_s),
        "ttft_median_ms": _ms(f.ttft_median_s),
        "ttft_max_ms": _ms(f.ttft_max_s),
        "steady": v.steady,
        "reason": v.reason,
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 3)
