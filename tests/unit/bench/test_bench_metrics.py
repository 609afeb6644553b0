from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stackmatrix.bench.client import RequestRecord
from stackmatrix.bench.metrics import cell_summary, launch_summary, percentile, round_metrics


def _rec(
    i: int,
    ttft: float,
    gaps: list[float],
    tokens: int,
    *,
    wait: float = 0.0,
    error: str | None = None,
) -> RequestRecord:
    e2e = ttft + sum(gaps)
    return RequestRecord(
        index=i,
        ttft_s=ttft,
        itl_s=list(gaps),
        e2e_s=e2e,
        output_tokens=tokens,
        output_tokens_source="usage",
        queue_wait_s=wait,
        error=error,
        prompt_tokens=10,
    )


def test_percentile_interpolates_like_numpy():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)
    assert percentile([5], 99) == 5
    with pytest.raises(ValueError):
        percentile([], 50)


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_is_within_range_and_monotone(values, q):
    p = percentile(values, q)
    assert min(values) <= p <= max(values)
    assert percentile(values, min(100.0, q + 1)) >= p


def test_round_metrics_definitions():
    records = [
        _rec(0, 0.1, [0.02, 0.02, 0.02], 4, wait=0.0),
        _rec(1, 0.3, [0.04, 0.04], 3, wait=0.5),
        _rec(2, 0.0, [], 0, error="HTTP 500: x"),
    ]
    m = round_metrics(records, duration_s=2.0)
    assert (m["completed"], m["errors"]) == (2, 1)
    assert m["total_output_tokens"] == 7
    assert m["output_throughput"] == pytest.approx(3.5)
    assert m["request_throughput"] == pytest.approx(1.0)
    assert m["ttft_mean_ms"] == pytest.approx(200.0)
    assert m["ttft_median_ms"] == pytest.approx(200.0)
    # ITL pools every gap of every successful request
    assert m["itl_mean_ms"] == pytest.approx((3 * 20 + 2 * 40) / 5)
    assert m["itl_median_ms"] == pytest.approx(20.0)
    # TPOT = (e2e - ttft) / (tokens - 1) per request: 20 ms and 40 ms
    assert m["tpot_mean_ms"] == pytest.approx(30.0)
    # single-stream decode: median of per-request 1/TPOT = median(50, 25)
    assert m["decode_tok_s"] == pytest.approx(37.5)
    assert m["e2e_mean_ms"] == pytest.approx((160 + 380) / 2)
    assert m["queue_wait_mean_ms"] == pytest.approx(500 / 3)
    assert m["queue_wait_max_ms"] == pytest.approx(500)
    assert m["concurrency"] == pytest.approx(0.54 / 2)


def test_single_token_requests_have_no_tpot():
    m = round_metrics([_rec(0, 0.1, [], 1)], duration_s=1.0)
    assert m["tpot_mean_ms"] is None and m["decode_tok_s"] is None
    assert m["ttft_p99_ms"] == pytest.approx(100.0)


def test_all_failed_round():
    m = round_metrics([_rec(0, 0, [], 0, error="boom")], duration_s=1.0)
    assert m["completed"] == 0 and m["output_throughput"] == 0.0
    assert m["ttft_mean_ms"] is None


def test_summaries_are_medians_over_rounds_then_launches():
    l1 = launch_summary([{"metrics": {"x": 1.0}}, {"metrics": {"x": 3.0}}, {"metrics": {"x": 2.0}}])
    l2 = launch_summary([{"metrics": {"x": 10.0}}, {"metrics": {"x": None}}])
    l3 = launch_summary([{"metrics": {"x": 4.0}}])
    assert (l1["x"], l2["x"], l3["x"]) == (2.0, 10.0, 4.0)
    assert cell_summary([l1, l2, l3])["x"] == 4.0
