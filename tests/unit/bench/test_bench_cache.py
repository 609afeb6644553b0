"""The prefix cache between rounds: the engine's flush endpoint (bench/engines.py
post_until_ok), the flush before each round (bench/_launch.py _Rounds), the cached
tokens a server reports, and the report's notes on both (report/cache.py)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from tests.support.synthetic import story_cells, write_run

from stackmatrix.bench import _http, _launch, metrics, workload
from stackmatrix.bench._http import call as _http_call
from stackmatrix.bench._steady import SteadyLog
from stackmatrix.bench.client import ClientOptions, RequestRecord, RoundOutcome, run_round_async
from stackmatrix.bench.engines import get_engine, post_until_ok
from stackmatrix.bench.phase import inputs_hash
from stackmatrix.built_environment import Environment
from stackmatrix.errors import SpecError
from stackmatrix.records import RoundRecord
from stackmatrix.report.load import load_run
from stackmatrix.report.model import build_model
from stackmatrix.results import RunDir
from stackmatrix.spec_model import Bench, Workload
from stackmatrix.specfile import parse_spec


@pytest.fixture
def flush_server() -> Iterator[tuple[str, list[str], list[int]]]:
    """A local server for the engines' flush endpoints: each POST takes the next status
    of `answers` (200 once they run out) and is logged with its path."""
    posts: list[str] = []
    answers: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            posts.append(self.path)
            status = answers.pop(0) if answers else 200
            body = b"Cache flushed.\n" if status == 200 else b"Cache not flushed: busy\nmore"
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", posts, answers
    finally:
        srv.shutdown()
        srv.server_close()


def test_sglang_flushes_with_a_wait_for_idle_and_vllm_with_its_reset(flush_server):
    url, posts, _ = flush_server
    assert get_engine("sglang").flush_cache(url) is None
    assert get_engine("vllm").flush_cache(url) is None
    assert posts == ["/flush_cache?timeout=30", "/reset_prefix_cache"]
    assert get_engine("transformers").flush_cache(url) == "the engine has no cache to flush"
    assert get_engine("external").cache_flush_path is None and len(posts) == 2


def test_a_busy_server_is_asked_again_until_it_flushes(flush_server):
    url, posts, answers = flush_server
    answers += [400, 400]
    assert post_until_ok(url + "/flush_cache", pause_s=0.01) is None
    assert len(posts) == 3


def test_a_flush_that_never_succeeds_says_why(flush_server):
    url, posts, answers = flush_server
    answers += [400] * 5
    why = post_until_ok(url + "/flush_cache", attempts=3, pause_s=0.01)
    assert why == "POST /flush_cache: HTTP 400: Cache not flushed: busy"
    assert len(posts) == 3
    answers[:] = [404]  # no such endpoint (vLLM without its dev mode): not asked again
    why = post_until_ok(url + "/reset_prefix_cache", pause_s=0.01)
    assert why == "POST /reset_prefix_cache: HTTP 404: Cache not flushed: busy" and len(posts) == 4


def test_a_server_that_does_not_answer_is_named_and_not_asked_again(monkeypatch):
    calls: list[str] = []

    def call(url: str, method: str, *, timeout_s: float = 5.0) -> tuple[int, bytes]:
        calls.append(url)
        return _http_call(url, method, timeout_s=timeout_s)

    monkeypatch.setattr(_http, "call", call)
    dead = "http://127.0.0.1:1/flush_cache"
    assert post_until_ok(dead, attempts=3, pause_s=0.01) == "POST /flush_cache: no answer"
    assert calls == [dead]  # a hung server would cost 60 s per attempt


# --- the flush before every round --------------------------------------------------


def _wl() -> workload.WorkloadSet:
    def r(i: int, warm: bool) -> workload.BenchRequest:
        return workload.BenchRequest(
            index=i, prompt=f"p{i}", input_len=1, max_tokens=3, arrival_s=0.0, warmup=warm
        )

    return workload.WorkloadSet(
        measured=tuple(r(i, False) for i in range(4)), warmup=tuple(r(i, True) for i in range(2))
    )


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the server saw, in order: "flush", "warm" (a warm-up batch), "round"."""
    seen: list[str] = []

    def run_round(requests: Sequence[workload.BenchRequest], opts: ClientOptions) -> RoundOutcome:
        seen.append("warm" if not opts.use_arrivals else "round")
        records = [
            RequestRecord(index=r.index, ttft_s=0.03, e2e_s=0.05, output_tokens=3) for r in requests
        ]
        return RoundOutcome(records=records, duration_s=1.0, t0=0.0, cpu_s=0.0)

    monkeypatch.setattr(_launch, "run_round", run_round)
    return seen


def _rounds(
    tmp_path: Path, engine: str, flush: str | None, seen: list[str], **bench: Any
) -> _launch._Rounds:
    eng = get_engine(engine)

    def flush_cache(base_url: str) -> str | None:
        seen.append("flush")
        return flush

    eng.flush_cache = flush_cache  # type: ignore[method-assign]
    st = SimpleNamespace(cell_dir=RunDir(tmp_path).cell("a"))
    srv = SimpleNamespace(base_url="http://127.0.0.1:1", alive=lambda: True)
    return _launch._Rounds(
        bench=Bench(model="m", **bench),
        engine=eng,
        st=st,  # type: ignore[arg-type]
        srv=srv,  # type: ignore[arg-type]
        model="m",
        k=1,
    )


def test_every_round_starts_from_an_emptied_cache_before_its_warmup(tmp_path, events):
    out: list[RoundRecord] = []
    _rounds(tmp_path, "sglang", None, events, rounds=3).run(Workload(), _wl(), None, out)
    assert events == ["flush", "warm", "round"] * 3
    assert [r.extra["prefix_cache"] for r in out] == ["flushed"] * 3
    # with the steady warm-up, the flush comes before its batches too
    events.clear()
    steady = SteadyLog(max_batches=8, tolerance=0.05)
    _rounds(tmp_path, "sglang", None, events, rounds=2).run(Workload(), _wl(), None, [], steady)
    assert events == ["flush", "warm", "warm", "round", "flush", "warm", "round"]
    # a load point's rounds too
    events.clear()
    _rounds(tmp_path, "sglang", None, events, rounds=1).run(Workload(), _wl(), "c8", [])
    assert events == ["flush", "warm", "round"]


def test_a_failed_flush_is_recorded_and_the_round_measured(tmp_path, events):
    out: list[RoundRecord] = []
    why = "POST /flush_cache: HTTP 400: busy"
    _rounds(tmp_path, "sglang", why, events, rounds=2).run(Workload(), _wl(), None, out)
    assert events == ["flush", "warm", "round"] * 2
    assert out[0].extra["prefix_cache"] == f"not flushed: {why}"
    assert out[0].to_dict()["prefix_cache"] == f"not flushed: {why}"  # kept in bench.json


def test_no_flush_when_off_or_where_there_is_nothing_of_ours_to_flush(tmp_path, events):
    for engine, bench in (
        ("sglang", {"flush_cache": False}),
        ("transformers", {}),
        ("external", {"url": "http://127.0.0.1:1"}),
    ):
        events.clear()
        out: list[RoundRecord] = []
        _rounds(tmp_path, engine, None, events, rounds=2, **bench).run(Workload(), _wl(), None, out)
        assert events == ["warm", "round"] * 2, engine
        assert all("prefix_cache" not in r.to_dict() for r in out)


def test_the_key_is_read_and_changes_the_cells_inputs():
    raw: dict[str, Any] = {"name": "s", "cell": [{"id": "a"}], "bench": {"model": "/m"}}
    spec = parse_spec(raw)
    assert spec.bench is not None and spec.bench.flush_cache is True
    off = parse_spec({**raw, "bench": {"model": "/m", "flush_cache": False}})
    assert off.bench is not None and off.bench.flush_cache is False
    with pytest.raises(SpecError, match=r"bench\.flush_cache: expected true or false"):
        parse_spec({**raw, "bench": {"model": "/m", "flush_cache": "yes"}})
    env = Environment(backend="venv", python=("/nowhere/python",))
    on = inputs_hash(spec, spec.bench, "a", env, "w")
    # rounds measured on a cache left full are other measurements: not resumed into
    assert inputs_hash(off, off.bench, "a", env, "w") != on


# --- cached tokens, as the server reports them --------------------------------------


async def _cached_reply(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    resp = web.StreamResponse()
    await resp.prepare(request)
    await resp.write(b'data: {"choices":[{"text":"x"}]}\n\n')
    usage: dict[str, Any] = {"completion_tokens": 1, "prompt_tokens": 10}
    if body["prompt"] != "p0":
        usage["prompt_tokens_details"] = {"cached_tokens": 8}
    final = {"choices": [{"text": "", "finish_reason": "length"}], "usage": usage}
    await resp.write(b"data: " + json.dumps(final).encode() + b"\n\n")
    return resp


def _round_on(handler: Any, prompts: Sequence[str]) -> RoundOutcome:
    async def go() -> RoundOutcome:
        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        opts = ClientOptions(base_url=f"http://127.0.0.1:{runner.addresses[0][1]}", model="m")
        reqs = [
            workload.BenchRequest(index=i, prompt=p, input_len=10, max_tokens=1, arrival_s=0.0)
            for i, p in enumerate(prompts)
        ]
        try:
            return await run_round_async(reqs, opts)
        finally:
            await runner.cleanup()

    return asyncio.run(go())


def test_cached_tokens_are_recorded_where_the_server_reports_them():
    outcome = _round_on(_cached_reply, ["p0", "p1", "p2"])
    recs = sorted(outcome.records, key=lambda r: r.index)
    assert [r.cached_tokens for r in recs] == [None, 8, 8]
    assert "cached_tokens" not in recs[0].to_dict() and recs[1].to_dict()["cached_tokens"] == 8
    figures = metrics.round_metrics(recs, 1.0)
    assert figures["cached_input_tokens"] == 16 and figures["total_input_tokens"] == 30
    # a server that never says: the round's figures are as before
    assert "cached_input_tokens" not in metrics.round_metrics(recs[:1], 1.0)


# --- the report's notes -------------------------------------------------------------


def _run_with(tmp_path: Path, cell: str, **round_extra: Any) -> Path:
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    path = run / "cells" / cell / "bench.json"
    doc = json.loads(path.read_text())
    for launch in doc["data"]["launches"]:
        for rnd in launch["rounds"]:
            for key, value in round_extra.items():
                if key in ("cached_input_tokens", "total_input_tokens"):
                    rnd["metrics"][key] = value
                else:
                    rnd[key] = value
    path.write_text(json.dumps(doc))
    return run


def test_rounds_measured_on_a_cache_not_emptied_are_a_note(tmp_path: Path) -> None:
    run = _run_with(tmp_path, "cu130", prefix_cache="not flushed: POST /flush_cache: HTTP 404")
    notes = [n for n in build_model(load_run(run)).notes if "prefix cache" in n]
    doc = json.loads((run / "cells/cu130/bench.json").read_text())
    rounds = sum(len(x["rounds"]) for x in doc["data"]["launches"])
    assert notes == [
        f"cu130: the prefix cache was not emptied before {rounds} of its {rounds} measured "
        "rounds (POST /flush_cache: HTTP 404): rounds after a launch's first replay its "
        "prompts and may be served from the cache (faster prefill, shorter TTFT)"
    ]
    flushed = _run_with(tmp_path / "b", "cu130", prefix_cache="flushed")
    assert not [n for n in build_model(load_run(flushed)).notes if "prefix cache" in n]


def test_prompt_tokens_served_from_the_cache_are_a_note(tmp_path: Path) -> None:
    run = _run_with(tmp_path, "cu130", cached_input_tokens=300, total_input_tokens=1000)
    [note] = [n for n in build_model(load_run(run)).notes if "prefix cache" in n]
    assert note.startswith("cu130: the server served 30% of the prompt tokens of ")
    cold = _run_with(tmp_path / "b", "cu130", cached_input_tokens=0, total_input_tokens=1000)
    assert not [n for n in build_model(load_run(cold)).notes if "prefix cache" in n]


def test_rounds_of_an_engine_with_a_cache_that_say_nothing_of_it_are_a_note(
    tmp_path: Path,
) -> None:
    """Results of a version without `bench.flush_cache` (every SGLang example before it),
    or measured with it off: their rounds have no `prefix_cache`."""
    run = write_run(
        tmp_path / "run",
        spec_name="kimi",
        baseline="cu128",
        cells=story_cells(),
        targets=["sm_120"],
        seed=7,
    )
    for bench in (run / "cells").glob("*/bench.json"):
        doc = json.loads(bench.read_text())
        for launch in doc["data"]["launches"]:
            for rnd in launch["rounds"]:
                del rnd["prefix_cache"]
        bench.write_text(json.dumps(doc))
    notes = [n for n in build_model(load_run(run)).notes if "prefix cache" in n]
    assert notes and all("without emptying sglang's prefix cache" in n for n in notes)
    assert {n.split(":")[0] for n in notes} == {
        c.id for c in story_cells() if c.build_status.value == "ok"
    }
