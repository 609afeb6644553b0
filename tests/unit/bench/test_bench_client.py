"""The client against an in-process streaming server whose timing we control.

Timing is asserted as behaviour, never as the machine's speed: the server
records when it sent each chunk on the client's clock (`time.perf_counter`, same
process), and every time the client records must fall where causality puts it, e.g.
a chunk is stamped no earlier than it was sent and before the next one was sent (one
event loop serves both: the client reads chunk k before the server wakes to send
k + 1, however busy the machine). How close the stamps are is a benchmark
(benchmarks/bench_client.py), not a unit test.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from stackmatrix.bench.client import ClientOptions, RequestRecord, RoundOutcome, run_round_async
from stackmatrix.bench.workload import BenchRequest
from stackmatrix.jsontypes import JSONObject

GAP = 0.02
FIRST = 0.05
# perf_counter read before a stamp the client converts from CLOCK_REALTIME: margin
# for that conversion only (it can make a stamp late, never early)
EPS = 0.001
SEEN = web.AppKey("seen", list)
SENT = web.AppKey("sent", dict)  # prompt -> perf_counter() just before each chunk's write


def _reqs(n: int, max_tokens: int = 5) -> list[BenchRequest]:
    return [
        BenchRequest(index=i, prompt=f"p{i}", input_len=3, max_tokens=max_tokens, arrival_s=0.0)
        for i in range(n)
    ]


async def _serve(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    fn: Callable[[str], Awaitable[RoundOutcome]],
) -> tuple[RoundOutcome, list[JSONObject], dict[str, list[float]]]:
    """The round's outcome, the request bodies the server saw, and its send times."""
    app = web.Application()
    seen: list[JSONObject] = []
    app[SEEN] = seen
    app[SENT] = {}
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        return await fn(f"http://127.0.0.1:{port}"), seen, app[SENT]
    finally:
        await runner.cleanup()


async def _timed(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    request.app[SEEN].append(body)
    sent = request.app[SENT].setdefault(body["prompt"], [])
    resp = web.StreamResponse()
    await resp.prepare(request)
    await asyncio.sleep(FIRST)
    for i in range(body["max_tokens"]):
        if i:
            await asyncio.sleep(GAP)
        sent.append(time.perf_counter())
        await resp.write(b'data: {"choices":[{"text":"x"}]}\n\n')
    await resp.write(b": keep-alive comment\n\n")
    usage = {"completion_tokens": body["max_tokens"], "prompt_tokens": 3}
    final = {"choices": [{"text": "", "finish_reason": "length"}], "usage": usage}
    await resp.write(b"data: " + json.dumps(final).encode() + b"\n\n")
    return resp


def _arrivals(outcome: RoundOutcome, rec: RequestRecord) -> list[float]:
    """perf_counter() times at which the client says each content chunk arrived."""
    assert rec.ttft_s is not None
    first = outcome.t0 + rec.start_s + rec.ttft_s
    return [first + sum(rec.itl_s[:k]) for k in range(len(rec.itl_s) + 1)]


def _assert_stamped_between_sends(arrivals: list[float], sent: list[float]) -> None:
    """Chunk k is stamped after the server sent it and before it sent chunk k + 1."""
    assert len(arrivals) == len(sent)
    for k, (arrived, sent_at) in enumerate(zip(arrivals, sent, strict=True)):
        assert arrived >= sent_at - EPS, (k, arrived - sent_at)
        if k + 1 < len(sent):
            assert arrived <= sent[k + 1] + EPS, (k, arrived - sent[k + 1])


def test_measures_ttft_and_gaps_and_uses_usage():
    async def go(url):
        opts = ClientOptions(base_url=url, model="m", max_concurrency=2)
        return await run_round_async(_reqs(2), opts)

    outcome, seen, sent = asyncio.run(_serve(_timed, go))
    assert len(outcome.records) == 2
    for rec in outcome.records:
        assert rec.ok, rec.error
        assert rec.output_tokens == 5 and rec.output_tokens_source == "usage"
        assert len(rec.itl_s) == 4
        assert rec.ttft_s is not None and rec.ttft_s >= FIRST - EPS  # the server waited FIRST
        assert all(g > 0 for g in rec.itl_s)
        arrivals = _arrivals(outcome, rec)
        _assert_stamped_between_sends(arrivals, sent[f"p{rec.index}"])
        assert rec.e2e_s is not None and outcome.t0 + rec.start_s + rec.e2e_s >= arrivals[-1]
        assert 0 <= rec.queue_wait_s < rec.e2e_s  # 2 requests, 2 slots: nobody waited for one
    # no [DONE]: a finish_reason ends the stream cleanly (transformers serve does this)
    assert all(body["stream"] and "ignore_eos" not in body for body in seen)
    assert seen[0]["stream_options"] == {"include_usage": True}


def test_concurrency_limit_wait_is_reported_separately():
    async def go(url):
        opts = ClientOptions(base_url=url, model="m", max_concurrency=1, ignore_eos=True)
        return await run_round_async(_reqs(3, max_tokens=2), opts)

    outcome, seen, sent = asyncio.run(_serve(_timed, go))
    served = sorted(outcome.records, key=lambda r: r.start_s)
    one = FIRST + GAP  # the shortest a request can take
    # one slot: each request starts after the one before it ended, and reports that wait
    assert served[0].queue_wait_s < one  # it waited for no other request
    for before, after in itertools.pairwise(served):
        assert before.e2e_s is not None
        assert after.start_s >= before.start_s + before.e2e_s
    for k, rec in enumerate(served):
        assert rec.queue_wait_s == pytest.approx(rec.start_s - rec.scheduled_s)
        assert rec.queue_wait_s >= k * one - EPS
        # latency excludes the wait: chunks are stamped from the request's own start
        _assert_stamped_between_sends(_arrivals(outcome, rec), sent[f"p{rec.index}"])
    assert all(body["ignore_eos"] is True for body in seen)


def test_arrival_times_are_honoured():
    arrival = (0.0, 0.1, 0.2)
    reqs = [
        BenchRequest(index=i, prompt=f"p{i}", input_len=1, max_tokens=1, arrival_s=t)
        for i, t in enumerate(arrival)
    ]

    async def go(url):
        return await run_round_async(
            reqs, ClientOptions(base_url=url, model="m", max_concurrency=4)
        )

    outcome, _, _ = asyncio.run(_serve(_timed, go))
    starts = [r.start_s for r in outcome.records]
    # never sent before its arrival time, in arrival order (how late is the machine's speed)
    assert all(start >= t - EPS for start, t in zip(starts, arrival, strict=True)), starts
    assert starts == sorted(starts)
    assert all(r.queue_wait_s < FIRST for r in outcome.records)  # 4 slots: none waited


async def _status(request: web.Request) -> web.Response:
    return web.Response(status=422, text='{"detail":"Unexpected fields: ignore_eos"}')


async def _slow(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)
    await asyncio.sleep(1)
    return resp


async def _sse_error(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)
    await resp.write(b'data: {"error": {"message": "out of memory"}}\n\n')
    return resp


async def _not_sse(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse()
    await resp.prepare(request)
    await resp.write(b"<html>proxy error</html>\n")
    return resp


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (_status, "HTTP 422: "),
        (_slow, "timed out after 0.3 s"),
        (_sse_error, "server error in stream: {'message': 'out of memory'}"),
        (_not_sse, "malformed SSE line"),
    ],
)
def test_errors_become_records(handler, expected):
    async def go(url):
        opts = ClientOptions(base_url=url, model="m", request_timeout_s=0.3)
        return await run_round_async(_reqs(1), opts)

    outcome, _, _ = asyncio.run(_serve(handler, go))
    (rec,) = outcome.records
    assert not rec.ok and rec.error is not None and rec.error.startswith(expected), rec.error
    assert rec.to_dict()["ok"] is False


def test_connection_refused_is_a_recorded_error():
    from stackmatrix.bench.server import free_port

    opts = ClientOptions(base_url=f"http://127.0.0.1:{free_port()}", model="m")
    outcome = asyncio.run(run_round_async(_reqs(2), opts))
    assert all(not r.ok and "Connect" in (r.error or "") for r in outcome.records)


BAD_EVENTS = {
    "p0": b'{"choices": 5}',
    "p1": b'{"choices": ["x"]}',
    "p2": b'{"choices": [{"text": "x"}], "usage": {"completion_tokens": [1, 2]}}',
    "p3": b'{"choices": [{"text": "x"}], "usage": {"completion_tokens": 1e400}}',
    "p4": b'{"choices": [{"text": "x"}], "usage": {"completion_tokens": 3, "prompt_tokens": -1}}',
    "p5": b'{"choices": [{"text": "x"}], "usage": {"completion_tokens": true}}',
}


async def _bad_event(request: web.Request) -> web.StreamResponse:
    """One request of the round gets a well-formed answer, each other one bad event."""
    body = await request.json()
    if body["prompt"] not in BAD_EVENTS:
        return await _timed(request)
    resp = web.StreamResponse()
    await resp.prepare(request)
    await resp.write(b"data: " + BAD_EVENTS[body["prompt"]] + b"\n\ndata: [DONE]\n\n")
    return resp


def test_a_bad_event_fails_its_request_not_the_round():
    async def go(url):
        opts = ClientOptions(base_url=url, model="m", max_concurrency=8)
        return await run_round_async(_reqs(len(BAD_EVENTS) + 1), opts)

    outcome, _, _ = asyncio.run(_serve(_bad_event, go))
    *bad, good = sorted(outcome.records, key=lambda r: r.index)
    assert good.ok and good.output_tokens == 5, good.error
    for rec in bad:
        assert not rec.ok and (rec.error or "").startswith("malformed SSE data"), rec.error


def test_token_ids_are_sent_as_the_prompt():
    """A request with prompt_ids sends them, a list of ints, as the completion's prompt."""
    reqs = [
        BenchRequest(
            index=1, prompt="a b", input_len=3, max_tokens=2, arrival_s=0.0, prompt_ids=(1, 7, 9)
        ),
        *_reqs(1),
    ]

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        request.app[SEEN].append(body)
        resp = web.StreamResponse()
        await resp.prepare(request)
        usage = {"completion_tokens": 1, "prompt_tokens": len(body["prompt"])}
        final = {"choices": [{"text": "x", "finish_reason": "length"}], "usage": usage}
        await resp.write(b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n")
        return resp

    async def go(url):
        return await run_round_async(reqs, ClientOptions(base_url=url, model="m"))

    outcome, seen, _ = asyncio.run(_serve(handler, go))
    assert sorted(json.dumps(b["prompt"]) for b in seen) == ['"p0"', "[1, 7, 9]"]
    by_index = {r.index: r for r in outcome.records}
    assert by_index[1].prompt_tokens == 3  # the server counted the ids
    assert by_index[0].prompt_tokens == 2  # the text's characters, by this server
