"""How good is the instrument? Two measurements, printed for docs/bench.md.

1. `timing`: a local server streams tokens at times it records itself (monotonic
   clock, shared by all processes on Linux), on cores of its own. The client, on the
   other cores, must measure TTFT and every inter-token gap within 1% (or 50 us) of
   the truth while it sustains >= 200 concurrent streams and >= 20,000 tokens/s. Gaps
   are compared with gaps (the server's consecutive send times), so the loopback
   latency cancels; TTFT with the server's first send minus our send. Each run prints
   tokens/s, streams, the TTFT and ITL errors (p50/p90/p99, absolute and relative,
   and the share within the goal) and the client's CPU per token; `--repeat` runs
   (default 3) and their medians, which decide PASS.
   `--workers N` measures the client with N worker processes
   (`bench.client_workers`) right after the in-process client, in each run, and
   prints both side by side; `--server-procs M` serves with M processes (one port,
   SO_REUSEPORT), each on its own core, for loads one server core cannot produce.
   The server is stdlib asyncio: the script needs nothing but the project and no
   network (the GPU host has neither aiohttp nor a route out).
2. `crosscheck`: the same CPU `transformers serve` (tiny model) measured by our
   client and by aiperf 0.13.0 (its own venv); output throughput within 5%.

    python benchmarks/bench_client.py timing [--streams 200 --gap-ms 8 --lockstep --repeat 3]
    python benchmarks/bench_client.py timing --streams 2000 --gap-ms 16 --workers 8 \\
        --server-procs 4        # the workers' goal (docs/bench.md) on a 16-core host
    python benchmarks/bench_client.py crosscheck
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import resource
import socket
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from stackmatrix.bench._workers import auto_workers
from stackmatrix.bench.client import ClientOptions, RoundOutcome, run_round, worker_count
from stackmatrix.bench.metrics import percentile, round_metrics
from stackmatrix.bench.server import free_port, port_in_use
from stackmatrix.bench.workload import BenchRequest

# --- the timing server (its own processes, its own cores) --------------------------

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
)
_TOKEN = b'data: {"choices":[{"index":0,"text":" tok"}]}\n\n'
_TOKEN_CHUNK = b"%x\r\n%s\r\n" % (len(_TOKEN), _TOKEN)


class _Stream(asyncio.Protocol):
    """One request: read it, then stream its tokens at their scheduled times and note
    when each was handed to the kernel (TCP_NODELAY, as uvicorn sets it)."""

    def __init__(self, truth: dict[int, list[float]]) -> None:
        self.truth = truth
        self.buf = b""
        self.started = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        if self.started:
            return
        self.buf += data
        head, sep, body = self.buf.partition(b"\r\n\r\n")
        if not sep:
            return
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        if len(body) >= length:
            self.started = True
            asyncio.get_running_loop().create_task(self._send(json.loads(body[:length])))

    async def _send(self, body: dict[str, Any]) -> None:
        assert self.transport is not None
        # The prompt carries the stream's schedule: "index first_s gap_s phase_s".
        idx_text, first_text, gap_text, phase_text = body["prompt"].split()
        first_s, gap_s = float(first_text) + float(phase_text), float(gap_text)
        self.transport.write(_HEAD)
        sent: list[float] = []
        due = time.perf_counter() + first_s
        for _ in range(int(body["max_tokens"])):
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            self.transport.write(_TOKEN_CHUNK)
            sent.append(time.perf_counter())
            due += gap_s
        usage = {"prompt_tokens": 1, "completion_tokens": len(sent)}
        final = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "usage": usage}
        tail = b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n"
        self.transport.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail))
        self.transport.close()
        self.truth[int(idx_text)] = sent


def _serve(port: int, core: int | None, conn: Connection) -> None:
    """One server process: streams on the shared port; on a word from the parent, the
    send times of the run that just ended (then cleared for the next run)."""
    if core is not None:
        os.sched_setaffinity(0, {core})
    truth: dict[int, list[float]] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _Stream(truth), "127.0.0.1", port, reuse_port=True, backlog=4096
        )
        done = loop.create_future()

        def on_word() -> None:
            if conn.recv() == "stop":
                done.set_result(None)
                return
            conn.send(dict(truth))
            truth.clear()

        loop.add_reader(conn.fileno(), on_word)
        conn.send("ready")
        await done
        server.close()

    asyncio.run(main())


def timing(args: argparse.Namespace) -> int:
    _raise_fd_limit()
    cores = sorted(os.sched_getaffinity(0))
    # the server's cores first, the client's the rest (all of them share when too few)
    n_srv = args.server_procs
    server_cores: list[int | None] = list(cores[:n_srv]) if len(cores) > n_srv else [None] * n_srv
    client_cores = cores[n_srv:] if len(cores) > n_srv else cores
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    procs, conns = [], []
    try:
        for core in server_cores:
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(port, core, theirs), daemon=True)
            proc.start()
            procs.append(proc)
            conns.append(mine)
        for conn in conns:
            assert conn.recv() == "ready"
        while not port_in_use(port):
            time.sleep(0.05)
        os.sched_setaffinity(0, set(client_cores))
        workers = auto_workers(args.streams) if args.workers == "auto" else int(args.workers)
        counts = [1] if workers <= 1 else [1, workers]
        reports: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
        for _ in range(args.repeat):
            for n in counts:
                # the in-process client on one core, as before; workers on all the client's
                os.sched_setaffinity(0, {client_cores[0]} if n == 1 else set(client_cores))
                reports[n].append(_measure_timing(args, port, n, conns, server_cores))
    finally:
        for conn in conns:
            conn.send("stop")
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.terminate()
                proc.join(10)
    return _print_timing(args, reports)


def _workers_arg(text: str) -> int | str:
    return text if text == "auto" else int(text)


def _raise_fd_limit() -> None:
    """Thousands of streams need thousands of sockets (children inherit the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _print_timing(args: argparse.Namespace, reports: dict[int, list[dict[str, Any]]]) -> int:
    summaries: dict[int, dict[str, Any]] = {}
    for n, runs in reports.items():
        for k, report in enumerate(runs, 1):
            print(f"--- client workers {n}: run {k}/{len(runs)}")
            print(json.dumps(report, indent=2))
        summaries[n] = _median_report(runs)
        print(f"--- client workers {n}: median of {len(runs)} runs")
        print(json.dumps(summaries[n], indent=2))
    print(f"--- side by side (medians of {args.repeat} runs)")
    print(_table(summaries))
    first_us, gap_us = args.first_ms * 1e3, args.gap_ms * 1e3
    one = summaries[1]
    ok = (
        one["tokens_per_s"] >= 20_000
        and args.streams >= 200
        and one["itl_abs_err_us"]["p50"] <= max(0.01 * gap_us, 50)
        and one["ttft_abs_err_us"]["p50"] <= max(0.01 * first_us, 50)
    )
    compared = " (for comparison)" if len(summaries) > 1 else ""
    print(
        ("PASS" if ok else "FAIL") + " (in-process client: >= 20,000 tokens/s, >= 200 "
        f"streams, median TTFT and gap errors within 1% or 50 us){compared}"
    )
    if len(summaries) == 1:
        return 0 if ok else 1
    # with workers, theirs is the verdict: docs/bench.md's goal at >= 2,000 streams, and at
    # fewer the accuracy the in-process client has at 200
    n, many = list(summaries.items())[-1]
    accurate = min(many["ttft_within_1pct_or_50us"], many["itl_within_1pct_or_50us"]) >= 0.99
    if args.streams >= 2000:
        goal = accurate and many["tokens_per_s"] >= 100_000
        what = ">= 100,000 tokens/s at >= 2,000 streams, >= 99% of TTFTs and gaps within"
    else:
        goal, what = accurate, ">= 99% of TTFTs and gaps within"
    verdict = "PASS" if goal else "FAIL"
    print(f"{verdict} ({n} workers: {what} 1% or 50 us)")
    return 0 if goal else 1


def _table(summaries: dict[int, dict[str, Any]]) -> str:
    rows = [
        "| workers | streams | tokens/s | client CPU, busiest worker / all | CPU per token "
        "| TTFT within | gaps within | gap error p50 / p99 | coalesced |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, s in summaries.items():
        rows.append(
            f"| {n} (used {s['client_workers']:.0f}) | {s['streams']:.0f} "
            f"| {s['tokens_per_s']:,.0f} "
            f"| {s['client_cpu_share_max']:.0%} / {s['client_cpu_share_of_core']:.0%} "
            f"| {s['client_us_per_token']:.1f} us "
            f"| {s['ttft_within_1pct_or_50us']:.2%} | {s['itl_within_1pct_or_50us']:.2%} "
            f"| {s['itl_abs_err_us']['p50']:.1f} / {s['itl_abs_err_us']['p99']:.1f} us "
            f"| {s['itl_coalesced_share']:.2%} |"
        )
    return "\n".join(rows)


def _truth(conns: list[Connection]) -> dict[int, list[float]]:
    truth: dict[int, list[float]] = {}
    for conn in conns:
        conn.send("truth")
    for conn in conns:
        truth.update(conn.recv())
    return truth


def _measure_timing(
    args: argparse.Namespace,
    port: int,
    workers: int,
    conns: list[Connection],
    server_cores: list[int | None],
) -> dict[str, Any]:
    n = args.streams * args.waves
    first_s, gap_s = args.first_ms / 1e3, args.gap_ms / 1e3
    reqs = [
        BenchRequest(
            index=i,
            prompt=f"{i} {first_s} {gap_s} {_phase(i, args)}",
            input_len=4,
            max_tokens=args.tokens,
            arrival_s=0.0,
        )
        for i in range(n)
    ]
    opts = ClientOptions(
        base_url=f"http://127.0.0.1:{port}",
        model="m",
        max_concurrency=args.streams,
        workers=workers,
        request_timeout_s=600.0,
    )
    load_before = os.getloadavg()[0]
    called = time.perf_counter()
    outcome = run_round(reqs, opts)
    load_after = os.getloadavg()[0]
    truth = _truth(conns)
    ttft = _ttft_errors(outcome, truth)
    itl = _gap_errors(outcome, truth)
    tokens = round_metrics(outcome.records, outcome.duration_s)["total_output_tokens"]
    shares = [c / outcome.duration_s for c in outcome.worker_cpu_s or (outcome.cpu_s,)]
    return {
        "schedule": "lockstep" if args.lockstep else "staggered",
        "gap_ms": args.gap_ms,
        "first_ms": args.first_ms,
        "streams": args.streams,
        "requests": n,
        "tokens": tokens,
        "client_workers": worker_count(opts, n),
        "client_cores": sorted(os.sched_getaffinity(0)),
        "server_cores": server_cores,
        "loadavg_1min": [round(load_before, 2), round(load_after, 2)],
        "duration_s": round(outcome.duration_s, 3),
        "tokens_per_s": round(tokens / outcome.duration_s),
        "client_cpu_s": round(outcome.cpu_s, 3),
        # all workers together, in cores; and the busiest worker's share of its core
        "client_cpu_share_of_core": round(outcome.cpu_s / outcome.duration_s, 3),
        "client_cpu_share_max": round(max(shares), 3),
        "client_us_per_token": round(outcome.cpu_s / tokens * 1e6, 2),
        "client_cpu_shares": [round(x, 3) for x in shares],
        # from the call to the round's start: starting the workers (0 in-process)
        "client_start_s": round(max(0.0, outcome.t0 - called), 3),
        "ttft_abs_err_us": _pcts([e for e, _ in ttft], 1e6),
        "ttft_rel_err_pct": _pcts([e / t for e, t in ttft], 100),
        "ttft_within_1pct_or_50us": _within(ttft),
        "itl_abs_err_us": _pcts([e for e, _ in itl], 1e6),
        "itl_rel_err_pct": _pcts([e / t for e, t in itl], 100),
        "itl_within_1pct_or_50us": _within(itl),
        # gaps off by most of a gap: two tokens of one stream read together because the
        # client was a whole gap behind (only the second one's arrival is known then;
        # that gap and the one before it are both off)
        "itl_coalesced_share": round(sum(e > 0.9 * t for e, t in itl) / len(itl), 4),
    }


def _ttft_errors(outcome: RoundOutcome, truth: dict[int, list[float]]) -> list[tuple[float, float]]:
    """(|measured - true|, true) per request. The truth is the server's first send
    minus the client's send: it includes connecting and both loopback crossings, which
    are part of what a TTFT is."""
    out = []
    for rec in outcome.records:
        assert rec.ok and rec.ttft_s is not None, rec.error
        true = truth[rec.index][0] - (outcome.t0 + rec.start_s)
        out.append((abs(rec.ttft_s - true), true))
    return out


def _gap_errors(outcome: RoundOutcome, truth: dict[int, list[float]]) -> list[tuple[float, float]]:
    """(|measured gap - true gap|, true gap) for every gap: gaps against gaps, so the
    constant loopback latency between the server's send and our receipt cancels."""
    out = []
    for rec in outcome.records:
        true_gaps = [b - a for a, b in itertools.pairwise(truth[rec.index])]
        for measured, true in zip(rec.itl_s, true_gaps, strict=True):
            out.append((abs(measured - true), true))
    return out


def _within(errors: list[tuple[float, float]]) -> float:
    return round(sum(e <= max(0.01 * t, 50e-6) for e, t in errors) / len(errors), 4)


def _pcts(values: list[float], scale: float) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50) * scale, 3),
        "p90": round(percentile(values, 90) * scale, 3),
        "p99": round(percentile(values, 99) * scale, 3),
        "mean": round(statistics.fmean(values) * scale, 3),
    }


def _median_report(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Each number: the median over runs (each field on its own)."""
    out: dict[str, Any] = {}
    for key, value in reports[0].items():
        if isinstance(value, dict):
            out[key] = {k: statistics.median(r[key][k] for r in reports) for k in value}
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in reports)
        elif key == "client_cpu_shares":  # each worker's on its own
            out[key] = [statistics.median(x) for x in zip(*(r[key] for r in reports), strict=True)]
        else:
            out[key] = value
    return out


def _phase(i: int, args: argparse.Namespace) -> float:
    """Offset of stream i's schedule: spread over one gap, or 0 for all in lockstep
    (every stream's token due at the same instant, as a batching engine emits them)."""
    if args.lockstep:
        return 0.0
    return float((i % args.streams) / args.streams * args.gap_ms / 1e3)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("timing")
    t.add_argument("--streams", type=int, default=200)
    t.add_argument("--waves", type=int, default=2)
    t.add_argument("--tokens", type=int, default=300)
    t.add_argument("--gap-ms", type=float, default=8.0)
    t.add_argument("--first-ms", type=float, default=50.0)
    t.add_argument("--lockstep", action="store_true", help="all streams tick together")
    t.add_argument("--repeat", type=int, default=3, help="runs; the median is the result")
    t.add_argument(
        "--workers",
        type=_workers_arg,
        default=1,
        help='also measure the client with N worker processes (or "auto")',
    )
    t.add_argument(
        "--server-procs",
        type=int,
        default=1,
        help="server processes (one port, each on its own core)",
    )
    c = sub.add_parser("crosscheck")
    c.add_argument("--prompts", type=int, default=24)
    c.add_argument("--concurrency", type=int, default=1)
    c.add_argument("--input-len", type=int, default=64)
    c.add_argument("--output-len", type=int, default=64)
    c.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    if args.cmd == "timing":
        return timing(args)
    from crosscheck import crosscheck  # benchmarks/crosscheck.py

    return crosscheck(args)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main(sys.argv[1:]))
