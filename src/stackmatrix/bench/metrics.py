"""Per-round figures from per-request records, with sglang.bench_serving's definitions.

See docs/bench.md for each definition. Percentiles interpolate linearly between
order statistics (numpy's default, which bench_serving uses). Every name a round has
is a metric of metric_registry.py, which says which way is better and how the report
labels it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from stackmatrix.bench.client import RequestRecord
from stackmatrix.bench.workload import BenchRequest
from stackmatrix.jsontypes import JSONObject
from stackmatrix.metric_registry import LATENCY_STATS


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def describe(values_ms: Sequence[float], name: str) -> dict[str, float | None]:
    """Mean and percentiles of one round's samples, and how many there are
    (`<name>_samples`: a p99.9 of fewer than 1000 is little more than the largest)."""
    if not values_ms:
        return {f"{name}_{s}_ms": None for s in LATENCY_STATS} | {f"{name}_samples": 0}
    return {
        f"{name}_mean_ms": statistics.fmean(values_ms),
        f"{name}_median_ms": percentile(values_ms, 50),
        f"{name}_p90_ms": percentile(values_ms, 90),
        f"{name}_p99_ms": percentile(values_ms, 99),
        f"{name}_p999_ms": percentile(values_ms, 99.9),
        f"{name}_samples": len(values_ms),
    }


def tpot_s(rec: RequestRecord) -> float | None:
    """(e2e - ttft) / (output_tokens - 1), for requests with more than one token."""
    if rec.ttft_s is None or rec.e2e_s is None or rec.output_tokens <= 1:
        return None
    return (rec.e2e_s - rec.ttft_s) / (rec.output_tokens - 1)


def round_metrics(records: Sequence[RequestRecord], duration_s: float) -> dict[str, float | None]:
    """The figures of one measured round."""
    ok = [r for r in records if r.ok]
    total_out = sum(r.output_tokens for r in ok)
    tpots = [t for t in (tpot_s(r) for r in ok) if t is not None and t > 0]
    decode = [1.0 / t for t in tpots]
    metrics: dict[str, float | None] = {
        "completed": len(ok),
        "errors": len(records) - len(ok),
        "total_output_tokens": total_out,
        "total_input_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "duration_s": duration_s,
        "output_throughput": total_out / duration_s if duration_s > 0 else 0.0,
        "request_throughput": len(ok) / duration_s if duration_s > 0 else 0.0,
        "decode_tok_s": percentile(decode, 50) if decode else None,
        "concurrency": sum(r.e2e_s or 0.0 for r in ok) / duration_s if duration_s > 0 else 0.0,
        "queue_wait_mean_ms": (
            statistics.fmean(r.queue_wait_s for r in records) * 1e3 if records else 0.0
        ),
        "queue_wait_max_ms": max((r.queue_wait_s for r in records), default=0.0) * 1e3,
        "usage_reported": sum(r.output_tokens_source == "usage" for r in ok),
    }
    cached = [r.cached_tokens for r in ok if r.cached_tokens is not None]
    if cached:  # only where the server says (a round's record is otherwise unchanged)
        metrics["cached_input_tokens"] = sum(cached)
    metrics |= describe([r.ttft_s * 1e3 for r in ok if r.ttft_s is not None], "ttft")
    metrics |= describe([g * 1e3 for r in ok for g in r.itl_s], "itl")
    metrics |= describe([t * 1e3 for t in tpots], "tpot")
    metrics |= describe([r.e2e_s * 1e3 for r in ok if r.e2e_s is not None], "e2e")
    return metrics


def prompt_mismatches(
    records: Sequence[RequestRecord], requests: Sequence[BenchRequest]
) -> list[tuple[RequestRecord, int]]:
    """The completed requests whose prompt reached the server (its usage.prompt_tokens)
    with another length than the workload's input_len, each with that input_len."""
    wanted = {r.index: r.input_len for r in requests}
    return [
        (rec, wanted[rec.index])
        for rec in records
        if rec.ok and rec.prompt_tokens is not None and rec.prompt_tokens != wanted[rec.index]
    ]


def prompt_check(records: Sequence[RequestRecord], requests: Sequence[BenchRequest]) -> JSONObject:
    """A round's check of exact prompt lengths: requests whose length the server told
    (`checked`), those of another length (`mismatched`) and the first of them."""
    checked = sum(rec.ok and rec.prompt_tokens is not None for rec in records)
    bad = prompt_mismatches(records, requests)
    out: JSONObject = {"checked": checked, "mismatched": len(bad)}
    if bad:
        rec, want = bad[0]
        out["first"] = {"index": rec.index, "input_len": want, "prompt_tokens": rec.prompt_tokens}
    return out


def launch_summary(rounds: Sequence[Mapping[str, Mapping[str, object]]]) -> dict[str, float]:
    """Each metric's median over the rounds of one launch."""
    return _median_by_key([r["metrics"] for r in rounds])


def cell_summary(launch_medians: Sequence[Mapping[str, object]]) -> dict[str, float]:
    """Each metric's median over launches (of the per-launch medians over rounds)."""
    return _median_by_key(launch_medians)


def _median_by_key(rows: Sequence[Mapping[str, object]]) -> dict[str, float]:
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    out: dict[str, float] = {}
    for key in keys:
        values = [
            float(value)
            for row in rows
            if isinstance(value := row.get(key), int | float) and not isinstance(value, bool)
        ]
        if values:
            out[key] = statistics.median(values)
    return out
