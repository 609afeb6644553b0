"""The load generator: one asyncio streaming client for OpenAI-compatible /v1/completions.

It runs in stackmatrix's own process, outside every cell, so each cell is measured
by the same instrument on the same bytes. Times come from `time.perf_counter`; a
chunk's time is when its bytes arrived (taken in the connection's `data_received`,
see `_sse`). Definitions of every figure are in docs/bench.md. One request's options,
record and sending live in `_request`; a round over worker processes in `_workers`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Sequence

from stackmatrix.bench import _workers
from stackmatrix.bench._arrival import stamping_loop
from stackmatrix.bench._request import (
    ERROR_TEXT_LIMIT,
    ClientOptions,
    RequestRecord,
    RoundOutcome,
    StreamError,
    send_one,
    worker_count,
)
from stackmatrix.bench.workload import BenchRequest

__all__ = [
    "ERROR_TEXT_LIMIT",
    "ClientOptions",
    "RequestRecord",
    "RoundOutcome",
    "StreamError",
    "run_round",
    "run_round_async",
    "send_one",
    "worker_count",
]

log = logging.getLogger(__name__)


def run_round(requests: Sequence[BenchRequest], options: ClientOptions) -> RoundOutcome:
    """Send `requests` with the options' concurrency and arrival times; blocking."""
    if worker_count(options, len(requests)) > 1:
        return _workers.run_round_workers(requests, options)
    # The stamping loop times each chunk when the selector saw it (see _sse); under
    # any other loop run_round_async times it when its connection is served.
    # No garbage collection during a round: a full collection stalls the loop for
    # milliseconds, and the round's records hold no cycles; collected right after.
    enabled = gc.isenabled()
    gc.disable()
    try:
        with asyncio.Runner(loop_factory=stamping_loop) as runner:
            return runner.run(run_round_async(requests, options))
    finally:
        if enabled:
            gc.enable()
        gc.collect()


async def run_round_async(requests: Sequence[BenchRequest], options: ClientOptions) -> RoundOutcome:
    sem = asyncio.Semaphore(max(1, options.max_concurrency))
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    tasks = [asyncio.create_task(_one(sem, req, options, t0)) for req in requests]
    records = list(await asyncio.gather(*tasks))
    duration = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return RoundOutcome(records=records, duration_s=duration, t0=t0, cpu_s=cpu)


async def _one(
    sem: asyncio.Semaphore, req: BenchRequest, options: ClientOptions, t0: float
) -> RequestRecord:
    if options.use_arrivals and req.arrival_s > 0:
        await asyncio.sleep(max(0.0, t0 + req.arrival_s - time.perf_counter()))
    scheduled = time.perf_counter()
    async with sem:
        return await send_one(req, options, t0, scheduled)
