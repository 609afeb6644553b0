"""The client against an in-process streaming server whose timing we control."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from stackmatrix.bench.client import ClientOptions, RoundOutcome, run_round_async
from stackmatrix.bench.workload import BenchRequest

GAP = 0.02
FIRST = 0.05
SEEN = web.AppKey("seen", list)


def _reqs(n: int, max_tokens: int = 5) -> list[BenchRequest]:
    return [
        BenchRequest(index=i, prompt="a b c", input_len=3, max_tokens=max_tokens, arrival_s=0.0)
        for i in range(n)
    ]


async def _serve(
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    fn: Callable[[str], Awaitable[RoundOutcome]],
) -> tuple[RoundOutcome, list[dict[str, Any]]]:
    app = web.Application()
    seen: list[dict[str, Any]] = []
    app[SEEN] = seen
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        return await fn(f"http://127.0.0.1:{port}"), seen
    finally:
        await runner.cleanup()


async def _timed(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    request.app[SEEN].append(body)
    resp = web.StreamResponse()
    await resp.prepare(request)
    await asyncio.sleep(FIRST)
    for i in range(body["max_tokens"]):
        if i:
            await asyncio.sleep(GAP)
        await resp.write(b'data: {"choices":[{"text":"x"}]}\n\n')
    await resp.write(b": keep-alive comment\n\n")
    usage = {"completion_tokens": body["max_tokens"], "prompt_tokens": 3}
    final = {"choices": [{"text": "", "finish_reason": "length"}], "usage": usage}
    await resp.write(b"data: " + json.dumps(final).encode() + b"\n\n")
    return resp


def test_measures_ttft_and_gaps_and_uses_usage():
    async def go(url):
        opts = ClientOptions(base_url=url, model="m", max_concurrency=2)
        return await run_round_async(_reqs(2), opts)

    outcome, seen = asyncio.run(_serve(_timed, go))
    assert len(outcome.records) == 2
    for rec in outcome.records:
        assert rec.ok, rec.error
        assert rec.output_tokens == 5 and rec.output_tokens_source == "usage"
        assert rec.ttft_s == pytest.approx(FIRST, abs=0.015)
        assert len(rec.itl_s) == 4
        assert all(g == pytest.approx(GAP, abs=0.015) for g in rec.itl_s)
        assert rec.e2e_s == pytest.approx(FIRST + 4 * GAP, abs=0.03)
        assert rec.queue_wait_s < 0.01
    # no [DONE]: a finish_reason ends the stream cleanly (transformers serve does this)
    assert all(body["stream"] and "ignore_eos" not in body for body in seen)
    assert seen[0]["stream_options"] == {"include_usage": True}


def test_concurrency_limit_wait_is_reported_separately():
    async def go(url):
        opts = ClientOptions(base_url=url, model="m", max_concurrency=1, ignore_eos=True)
        return await run_round_async(_reqs(3, max_tokens=2), opts)

    outcome, seen = asyncio.run(_serve(_timed, go))
    waits = sorted(r.queue_wait_s for r in outcome.records)
    one = FIRST + GAP
    assert waits[0] < 0.01
    assert waits[1] == pytest.approx(one, abs=0.03) and waits[2] == pytest.approx(2 * one, abs=0.05)
    # latency excludes the wait
    assert all(r.ttft_s is not None and r.ttft_s < FIRST + 0.02 for r in outcome.records)
    assert all(body["ignore_eos"] is True for body in seen)


def test_arrival_times_are_honoured():
    reqs = [
        BenchRequest(index=i, prompt="p", input_len=1, max_tokens=1, arrival_s=t)
        for i, t in enumerate((0.0, 0.1, 0.2))
    ]

    async def go(url):
        return await run_round_async(
            reqs, ClientOptions(base_url=url, model="m", max_concurrency=4)
        )

    outcome, _ = asyncio.run(_serve(_timed, go))
    starts = [r.start_s for r in outcome.records]
    assert starts == pytest.approx([0.0, 0.1, 0.2], abs=0.02)


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

    outcome, _ = asyncio.run(_serve(handler, go))
    (rec,) = outcome.records
    assert not rec.ok and rec.error is not None and rec.error.startswith(expected), rec.error
    assert rec.to_dict()["ok"] is False


def test_connection_refused_is_a_recorded_error():
    from stackmatrix.bench.server import free_port

    opts = ClientOptions(base_url=f"http://127.0.0.1:{free_port()}", model="m")
    outcome = asyncio.run(run_round_async(_reqs(2), opts))
    assert all(not r.ok and "Connect" in (r.error or "") for r in outcome.records)
