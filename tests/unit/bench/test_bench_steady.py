"""Steady state inside one launch: the rule (bench/_steady.py), the warm-up loop and the
minimum measured duration (bench/_launch.py _Rounds), with a fake client."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest

from stackmatrix.bench import _launch, workload
from stackmatrix.bench._steady import SteadyLog, batch_figures, judge, judge_all
from stackmatrix.bench.client import ClientOptions, RequestRecord, RoundOutcome
from stackmatrix.bench.engines import get_engine
from stackmatrix.bench.phase import inputs_hash
from stackmatrix.built_environment import Environment
from stackmatrix.records import RoundRecord
from stackmatrix.results import RunDir
from stackmatrix.spec_model import Bench, Cell, Spec, Workload


def req(
    ttft: float, tpot: float | None = 0.01, tokens: int = 11, error: str | None = None
) -> RequestRecord:
    """A request with this TTFT and TPOT (seconds); tpot None: a 1-token output."""
    if tpot is None:
        return RequestRecord(index=0, ttft_s=ttft, e2e_s=ttft, output_tokens=1, error=error)
    e2e = ttft + tpot * (tokens - 1)
    return RequestRecord(index=0, ttft_s=ttft, e2e_s=e2e, output_tokens=tokens, error=error)


def batch(*ttfts: float, tpot: float | None = 0.01) -> list[RequestRecord]:
    return [req(t, tpot) for t in ttfts]


WARM = batch(0.03, 0.03, 0.031, 0.029)


def test_the_first_batch_is_never_steady_on_its_own():
    [first] = judge_all([WARM], 0.05)
    assert not first.steady and "first batch" in first.reason


def test_a_cold_request_after_a_warm_looking_batch_is_caught():
    """The H200 case: TTFT 0.64 s and 0.21 s on the first requests, 0.03 s later."""
    cold = batch(0.64, 0.03, 0.03, 0.03)
    colder = batch(0.21, 0.03, 0.03, 0.03)
    verdicts = judge_all([cold, colder, WARM, WARM], 0.05)
    assert [v.steady for v in verdicts] == [False, False, True, True]
    assert "largest TTFT 210.0 ms > 2 x the median 30.0 ms + 5 ms" in verdicts[1].reason
    # a batch right after the cold ones, judged by their median, not their outliers
    assert judge_all([batch(0.64, 0.21, 0.03, 0.03), WARM], 0.05)[1].steady


def test_a_cold_request_in_a_batch_of_two_sets_no_reference():
    """H200, triton's first launch: TTFT 10.4 s, then 2.6 s and 25 ms in a batch of two."""
    verdicts = judge_all([batch(10.4, 10.3), batch(2.6, 0.025), batch(0.026, 0.025)], 0.05)
    assert [v.steady for v in verdicts] == [False, False, True]


def test_ttft_bound_is_twice_the_median_plus_five_ms():
    prev = batch_figures(WARM)  # median 30 ms: bound 65 ms
    assert judge(batch_figures(batch(0.03, 0.065)), prev, 0.05).steady
    assert not judge(batch_figures(batch(0.03, 0.0651)), prev, 0.05).steady


def test_median_tpot_must_stay_within_the_tolerance():
    prev = batch_figures(batch(0.03, 0.03, tpot=0.010))
    assert judge(batch_figures(batch(0.03, 0.03, tpot=0.0104)), prev, 0.05).steady
    slow = judge(batch_figures(batch(0.03, 0.03, tpot=0.0106)), prev, 0.05)
    assert not slow.steady and "median TPOT 10.6 ms vs 10.0 ms before: 6.0% > 5.0%" in slow.reason
    assert judge(batch_figures(batch(0.03, 0.03, tpot=0.0106)), prev, 0.1).steady


def test_without_measurable_tpot_ttft_alone_decides():
    one_token = batch(0.03, 0.03, tpot=None)
    assert batch_figures(one_token).tpot_median_s is None
    verdict = judge(batch_figures(one_token), batch_figures(one_token), 0.05)
    assert verdict.steady and "TTFT alone" in verdict.reason
    assert not judge(batch_figures(batch(0.5, tpot=None)), batch_figures(one_token), 0.05).steady


def test_errors_are_never_steady():
    failed = [*WARM, req(0.03, error="HTTP 500")]
    verdict = judge(batch_figures(failed), batch_figures(WARM), 0.05)
    assert not verdict.steady and verdict.reason == "1 of 5 request(s) failed"
    nothing = judge(batch_figures([req(0.03, error="x")]), None, 0.05)
    assert not nothing.steady


def test_the_log_says_what_was_discarded_and_why():
    log = SteadyLog(max_batches=8, tolerance=0.05)
    prev = None
    for b in (batch(0.64, 0.03), WARM):
        cur = batch_figures(b)
        log.batches.append((cur, judge(cur, prev, 0.05)))
        prev = cur
    d = cast(Any, log.to_dict())
    assert d["steady"] is True and d["steady_after"] == 2
    assert d["batches"][0] == {
        "requests": 2,
        "errors": 0,
        "tpot_median_ms": 10.0,
        "ttft_median_ms": 30.0,
        "ttft_max_ms": 640.0,
        "steady": False,
        "reason": "first batch: nothing to compare it with",
    }
    never = SteadyLog(max_batches=1, tolerance=0.05, batches=log.batches[:1]).to_dict()
    assert never["steady"] is False and "steady_after" not in never


# --- the loop in a launch, with a fake client ------------------------------------


def _rounds(tmp_path: Any, **bench: Any) -> _launch._Rounds:
    st = SimpleNamespace(cell_dir=RunDir(tmp_path).cell("a"))
    srv = SimpleNamespace(base_url="http://127.0.0.1:1", alive=lambda: True)
    return _launch._Rounds(
        bench=Bench(model="m", **bench),
        engine=get_engine("transformers"),
        st=st,  # type: ignore[arg-type]
        srv=srv,  # type: ignore[arg-type]
        model="m",
        k=1,
    )


def _wl(warmup: int = 2, measured: int = 6) -> workload.WorkloadSet:
    def r(i: int, warm: bool) -> workload.BenchRequest:
        return workload.BenchRequest(
            index=i, prompt="p", input_len=1, max_tokens=11, arrival_s=0.0, warmup=warm
        )

    return workload.WorkloadSet(
        measured=tuple(r(i, False) for i in range(measured)),
        warmup=tuple(r(i, True) for i in range(warmup)),
    )


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, bool]]]:
    """The fake client: each call's (request count, warm-up?); the first two warm-up
    requests it answers are cold (0.64 s, 0.21 s), every later one warm; a measured
    round lasts 2 s."""
    calls: list[tuple[int, bool]] = []
    cold = [0.64, 0.21]

    def run_round(requests: Sequence[workload.BenchRequest], opts: ClientOptions) -> RoundOutcome:
        warm = not opts.use_arrivals
        calls.append((len(requests), warm))
        records = [req(cold.pop(0) if cold else 0.03) for _ in requests]
        return RoundOutcome(records=records, duration_s=2.0, t0=0.0, cpu_s=0.0)

    monkeypatch.setattr(_launch, "run_round", run_round)
    yield calls


def test_warm_up_batches_run_until_steady_in_place_of_round_ones_warmup(tmp_path, sent):
    out: list[RoundRecord] = []
    log = SteadyLog(max_batches=8, tolerance=0.05)
    _rounds(tmp_path, rounds=2).run(Workload(), _wl(), None, out, log)
    # batches [0.64, 0.21], [0.03, 0.03] (steady), then round 1, warm-up + round 2
    assert sent == [(2, True), (2, True), (6, False), (2, True), (6, False)]
    assert log.steady_after == 2 and len(out) == 2


def test_a_workload_without_warmup_uses_its_first_measured_requests(tmp_path, sent):
    log = SteadyLog(max_batches=8, tolerance=0.05)
    _rounds(tmp_path, rounds=1).run(Workload(), _wl(warmup=0), None, [], log)
    assert sent[:2] == [(4, True), (4, True)] and sent[-1] == (6, False)


def test_a_server_never_steady_is_measured_and_says_so(tmp_path, sent):
    log = SteadyLog(max_batches=1, tolerance=0.05)
    _rounds(tmp_path, rounds=1).run(Workload(), _wl(), None, [], log)
    assert sent == [(2, True), (6, False)]
    assert log.to_dict()["steady"] is False


def test_without_a_log_each_round_has_its_fixed_warmup_as_before(tmp_path, sent):
    _rounds(tmp_path, rounds=2).run(Workload(), _wl(), None, [])
    assert sent == [(2, True), (6, False), (2, True), (6, False)]


def test_more_headline_rounds_until_the_minimum_duration(tmp_path, sent):
    out: list[RoundRecord] = []
    _rounds(tmp_path, rounds=2, min_duration_s=7.0).run(Workload(), _wl(), None, out)
    assert [r.index for r in out] == [1, 2, 3, 4]  # 2 s each: 8 s >= 7 s
    points: list[RoundRecord] = []
    _rounds(tmp_path, rounds=2, min_duration_s=7.0).run(Workload(), _wl(), "p", points)
    assert len(points) == 2  # load points are unaffected


def test_new_keys_hash_as_before_at_their_defaults():
    spec = Spec(name="s", path="", baseline="a", cells=(Cell(id="a"),), bench=Bench(model="m"))
    assert spec.bench is not None
    env = Environment(backend="venv", python=("/nowhere/python",))
    h = inputs_hash(spec, spec.bench, "a", env, "w")
    changes = (
        {"steady_warmup": False},
        {"warmup_max_batches": 3},
        {"steady_tolerance": 0.1},
        {"min_duration_s": 30.0},
    )
    for change in changes:
        other = dataclasses.replace(spec.bench, **change)
        assert inputs_hash(spec, other, "a", env, "w") != h, change
