"""One round of the client spread over worker processes (`bench.client_workers`).

One process's event loop saturates a core at ~60,000 tokens/s (docs/bench.md), and a
saturated client measures itself. Here N processes share the round, each with its own
stamping loop and, where the machine has a core to spare for each, its own core.

The semantics are those of the in-process client, globally:

* **Concurrency**: `max_concurrency` slots split over the workers (worker k holds
  `c // n` slots, one more for the first `c % n`), so at most `max_concurrency`
  requests are ever in flight, all workers together.
* **Order**: a free slot, in any worker, claims the next request from one shared
  counter: requests are claimed in the workload's order, each exactly once, and
  every slot works as long as requests remain (as a free slot of the in-process
  semaphore takes the next waiting request).
* **Rate**: every worker times arrivals from one start `t0` on the monotonic clock
  that all processes of a Linux host share (`time.perf_counter`): a claimed request
  waits for `t0 + arrival_s` before it is sent, so the schedule's rate is the one
  the in-process client keeps.

Records are relative to that `t0`, so the merged records (sorted by index) have the
format and meaning of the in-process ones.
"""

from __future__ import annotations

import asyncio
import gc
import math
import multiprocessing
import os
import resource
import signal
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from stackmatrix.bench._arrival import stamping_loop
from stackmatrix.bench._request import (
    ClientOptions,
    RequestRecord,
    RoundOutcome,
    send_one,
    worker_count,
)
from stackmatrix.bench.workload import BenchRequest

# Streams one worker is given by `client_workers = "auto"`. On the GPU host a worker
# spends 28-49 us of CPU per token (the in-process client 16-22: spread over cores, each
# loop wakes for fewer chunks at a time), so 128 streams of ~60-80 tokens/s each keep
# it near half a core (docs/bench.md, "Worker processes").
AUTO_STREAMS_PER_WORKER = 128
# time between the last worker saying it is ready and the round's start: every worker
# is then waiting for t0, so none starts late
START_MARGIN_S = 0.05
STOP_WAIT_S = 5.0


def auto_workers(max_concurrency: int) -> int:
    """Workers for `client_workers = "auto"`: one per AUTO_STREAMS_PER_WORKER streams,
    at most one fewer than the cores this process may run on (at least 1)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    wanted = math.ceil(max_concurrency / AUTO_STREAMS_PER_WORKER)
    return max(1, min(wanted, cores - 1))


def split_slots(max_concurrency: int, workers: int) -> list[int]:
    """Each worker's share of the concurrency; they add up to `max_concurrency`."""
    base, extra = divmod(max_concurrency, workers)
    return [base + (k < extra) for k in range(workers)]


def worker_cores(workers: int) -> list[int | None]:
    """A core per worker (the last ones this process may run on) when there are more
    cores than workers, so one is left for the rest (the parent, often the server);
    else none is pinned: pinned workers could not move away from a busy core."""
    if not hasattr(os, "sched_getaffinity"):
        return [None] * workers
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) <= workers:
        return [None] * workers
    return list(cores[len(cores) - workers :])


def run_round_workers(requests: Sequence[BenchRequest], options: ClientOptions) -> RoundOutcome:
    """`run_round` over `worker_count(...)` worker processes; blocking."""
    n = worker_count(options, len(requests))
    # spawn, not fork: stackmatrix may have threads, which fork would copy half-way
    ctx = multiprocessing.get_context("spawn")
    claimed = ctx.Value("q", 0)
    slots, cores = split_slots(options.max_concurrency, n), worker_cores(n)
    procs: list[Any] = []
    conns: list[Connection] = []
    try:
        for k in range(n):
            mine, theirs = ctx.Pipe()
            args = (theirs, cores[k], claimed)
            proc = ctx.Process(target=_worker, args=args, name=f"stackmatrix-client-{k + 1}")
            proc.start()
            theirs.close()
            procs.append(proc)
            conns.append(mine)
        # The round's requests go through the pipes once every worker is starting: as
        # arguments of start() they made each start wait for the one before to read
        # them (a pipe holds 64 KiB): 11 workers took 2.3 s to start on the GPU host.
        for k, conn in enumerate(conns):
            conn.send((list(requests), options, slots[k]))
        for k, conn in enumerate(conns):
            _receive(conn, k, "ready")
        t0 = time.perf_counter() + START_MARGIN_S
        for conn in conns:
            conn.send(t0)
        results = [_receive(conn, k, "done") for k, conn in enumerate(conns)]
    finally:
        _stop(procs)
        for conn in conns:
            conn.close()
    return _merge(results, t0)


def _receive(conn: Connection, k: int, expected: str) -> tuple[Any, ...]:
    try:
        message: tuple[Any, ...] = conn.recv()
    except EOFError as exc:
        raise RuntimeError(f"client worker {k + 1} exited without a word") from exc
    if message[0] == "error":
        raise RuntimeError(f"client worker {k + 1} failed:\n{message[1]}")
    assert message[0] == expected, message[0]
    return message


def _stop(procs: Sequence[Any]) -> None:
    """Workers that are still running (an error, Ctrl-C) are stopped: ours, by pid."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(STOP_WAIT_S)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _merge(results: Sequence[tuple[Any, ...]], t0: float) -> RoundOutcome:
    records: list[RequestRecord] = sorted(
        (rec for _, recs, _, _ in results for rec in recs), key=lambda r: r.index
    )
    end = max(end for _, _, end, _ in results)
    cpu = tuple(float(c) for _, _, _, c in results)
    return RoundOutcome(
        records=records, duration_s=end - t0, t0=t0, cpu_s=sum(cpu), worker_cpu_s=cpu
    )


# --- in the worker process --------------------------------------------------------


def _worker(conn: Connection, core: int | None, claimed: Any) -> None:
    # Ctrl-C is the parent's to handle: it stops its workers (_stop)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if core is not None:
            os.sched_setaffinity(0, {core})
        requests, options, slots = conn.recv()
        _room_for_sockets(slots)
        conn.send(("ready",))
        t0: float = conn.recv()
        gc.disable()  # as run_round: a collection stalls the loop for milliseconds
        with asyncio.Runner(loop_factory=stamping_loop) as runner:
            records, end, cpu = runner.run(_work(requests, options, slots, claimed, t0))
        conn.send(("done", records, end, cpu))
    except BaseException:  # the parent raises it; a worker never dies silently
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def _room_for_sockets(slots: int) -> None:
    """One socket per slot: a worker's soft limit on open files (often 1024) is raised
    towards the hard one when its slots need more (in the worker only)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = slots + 64  # the interpreter's own files, the pipe, the selector
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


async def _work(
    requests: list[BenchRequest], options: ClientOptions, slots: int, claimed: Any, t0: float
) -> tuple[list[RequestRecord], float, float]:
    await asyncio.sleep(max(0.0, t0 - time.perf_counter()))
    cpu0 = time.process_time()
    claim = _claimer(claimed, len(requests))
    records: list[RequestRecord] = []
    await asyncio.gather(*(_slot(claim, requests, options, t0, records) for _ in range(slots)))
    return records, time.perf_counter(), time.process_time() - cpu0


def _claimer(claimed: Any, total: int) -> Callable[[], int | None]:
    def claim() -> int | None:
        """The next request of the workload, or None when every one is claimed."""
        with claimed.get_lock():
            i = int(claimed.value)
            if i >= total:
                return None
            claimed.value = i + 1
            return i

    return claim


async def _slot(
    claim: Callable[[], int | None],
    requests: list[BenchRequest],
    options: ClientOptions,
    t0: float,
    records: list[RequestRecord],
) -> None:
    """One slot of the concurrency: the next request, at its arrival time, until none
    is left."""
    while (i := claim()) is not None:
        req = requests[i]
        due = t0 + req.arrival_s if options.use_arrivals else t0
        scheduled = due
        if due > time.perf_counter():
            await asyncio.sleep(due - time.perf_counter())
            scheduled = time.perf_counter()
        records.append(await send_one(req, options, t0, scheduled))
