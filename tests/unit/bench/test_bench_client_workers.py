"""The client over worker processes (`bench.client_workers`) against a local
streaming server in a thread of this process, which counts what it really saw: every
request exactly once, never more in flight than `max_concurrency`, in the workload's
order, and the records merged as one round's."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from stackmatrix.bench import _workers
from stackmatrix.bench.client import ClientOptions, RoundOutcome, run_round
from stackmatrix.bench.metrics import round_metrics
from stackmatrix.bench.workload import BenchRequest

SEEN = web.AppKey("seen", object)


@dataclass
class Seen:
    """What the server saw, under its own loop (one thread: no lock needed)."""

    order: list[int] = field(default_factory=list)  # request indices as they came
    in_flight: int = 0
    max_in_flight: int = 0


async def _completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    seen: Seen = request.app[SEEN]  # type: ignore[assignment]
    seen.order.append(int(body["prompt"].split()[0]))
    seen.in_flight += 1
    seen.max_in_flight = max(seen.max_in_flight, seen.in_flight)
    try:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for _ in range(body["max_tokens"]):
            await asyncio.sleep(0.005)
            await resp.write(b'data: {"choices":[{"text":"x"}]}\n\n')
        usage = b'{"completion_tokens":%d,"prompt_tokens":2}' % body["max_tokens"]
        await resp.write(
            b'data: {"choices":[{"text":"","finish_reason":"length"}],"usage":' + usage + b"}\n\n"
        )
        await resp.write(b"data: [DONE]\n\n")
        return resp
    finally:
        seen.in_flight -= 1


@pytest.fixture
def server() -> Iterator[tuple[str, Seen]]:
    """The base URL of a streaming server running in a thread, and what it saw."""
    seen = Seen()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    ports: list[int] = []
    ready = threading.Event()

    async def serve() -> None:
        app = web.Application()
        app[SEEN] = seen
        app.router.add_post("/v1/completions", _completions)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        ports.append(runner.addresses[0][1])
        ready.set()
        await stop.wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{ports[0]}", seen
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


def _reqs(n: int, gap_s: float = 0.0) -> list[BenchRequest]:
    return [
        BenchRequest(
            index=i, prompt=f"{i} words", input_len=2, max_tokens=4 + i % 3, arrival_s=i * gap_s
        )
        for i in range(n)
    ]


def _check_merged(outcome: RoundOutcome, n: int, workers: int) -> None:
    assert [r.index for r in outcome.records] == list(range(n))  # each once, merged
    assert all(r.ok for r in outcome.records), [r.error for r in outcome.records]
    assert len(outcome.worker_cpu_s) == workers and all(c > 0 for c in outcome.worker_cpu_s)
    assert outcome.cpu_s == pytest.approx(sum(outcome.worker_cpu_s))
    ends = [r.start_s + (r.e2e_s or 0.0) for r in outcome.records]
    assert max(ends) <= outcome.duration_s  # one round: one t0, one duration
    figures = round_metrics(outcome.records, outcome.duration_s)
    assert figures["completed"] == n and figures["usage_reported"] == n


def test_three_workers_send_each_request_once_within_the_concurrency(
    server: tuple[str, Seen],
) -> None:
    url, seen = server
    opts = ClientOptions(base_url=url, model="m", max_concurrency=5, workers=3)
    outcome = run_round(_reqs(40), opts)
    _check_merged(outcome, 40, workers=3)
    assert sorted(seen.order) == list(range(40))  # every request reached it once
    assert seen.max_in_flight <= 5
    # a free slot, in any worker, takes the next request: the ones taken together at
    # the start may cross on the way, never by more than the slots
    assert all(abs(pos - i) < 5 for pos, i in enumerate(seen.order)), seen.order
    assert all(r.queue_wait_s >= 0 for r in outcome.records)


def test_arrival_times_keep_the_schedules_order_and_rate(server: tuple[str, Seen]) -> None:
    url, seen = server
    gap = 0.03
    opts = ClientOptions(base_url=url, model="m", max_concurrency=8, workers=2)
    outcome = run_round(_reqs(16, gap_s=gap), opts)
    _check_merged(outcome, 16, workers=2)
    assert seen.order == list(range(16))  # 30 ms apart: exactly the schedule's order
    for rec in outcome.records:
        # never before its arrival time, on the clock all workers share (how soon after
        # it is the machine's speed: a benchmark's business, not a test's)
        assert rec.start_s >= rec.scheduled_s >= rec.index * gap
    assert outcome.duration_s >= 15 * gap


def test_one_worker_or_one_slot_runs_in_this_process(server: tuple[str, Seen]) -> None:
    url, seen = server
    one_slot = ClientOptions(base_url=url, model="m", max_concurrency=1, workers=4)
    outcome = run_round(_reqs(3), one_slot)
    assert outcome.worker_cpu_s == () and [r.index for r in outcome.records] == [0, 1, 2]
    assert seen.max_in_flight == 1


def test_slots_and_cores_and_auto() -> None:
    assert _workers.split_slots(5, 3) == [2, 2, 1]
    assert sum(_workers.split_slots(2000, 7)) == 2000
    cores = _workers.worker_cores(1)
    assert cores == [None] or cores[0] in os.sched_getaffinity(0)
    assert _workers.worker_cores(10_000) == [None] * 10_000
    assert _workers.auto_workers(1) == 1
    assert 1 <= _workers.auto_workers(100_000) < max(2, len(os.sched_getaffinity(0)))


def test_a_worker_that_fails_fails_the_round() -> None:
    # no server at all: the requests fail as records, not as a crash
    opts = ClientOptions(base_url="http://127.0.0.1:9", model="m", max_concurrency=2, workers=2)
    started = time.monotonic()
    outcome = run_round(_reqs(4), opts)
    assert time.monotonic() - started < 30
    assert [r.index for r in outcome.records] == [0, 1, 2, 3]
    assert all(r.error for r in outcome.records)


def test_a_worker_makes_room_for_its_sockets() -> None:
    """A worker whose slots need more open files than its soft limit raises it (never
    past the hard limit); here in a child, so this process's limit stays as it is."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        soft, hard = pool.apply(_limits_after, (400,))
    assert soft == (464 if hard == resource.RLIM_INFINITY else min(464, hard))


def _limits_after(slots: int) -> tuple[int, int]:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    _workers._room_for_sockets(slots)
    return resource.getrlimit(resource.RLIMIT_NOFILE)
