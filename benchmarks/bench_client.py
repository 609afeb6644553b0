"""How good is the instrument? Two measurements, printed for docs/bench.md.

1. `timing`: a local server streams tokens at times it records itself (monotonic
   clock, shared by both processes on Linux). The client, pinned to one core, must
   measure TTFT and every inter-token gap within 1% (or 50 us) of those send times
   while it sustains >= 200 concurrent streams and >= 20,000 tokens/s. It prints its
   own CPU cost per token.
2. `crosscheck`: the same CPU `transformers serve` (tiny model) measured by our
   client and by aiperf 0.13.0 (its own venv); output throughput within 5%.

    python benchmarks/bench_client.py timing [--streams 200 --tokens 400 --gap-ms 10]
    python benchmarks/bench_client.py crosscheck
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from stackmatrix.bench.client import ClientOptions, run_round
from stackmatrix.bench.metrics import percentile, round_metrics
from stackmatrix.bench.server import free_port, port_in_use
from stackmatrix.bench.workload import BenchRequest

TRUTH = web.AppKey("truth", dict)


# --- the timing server (its own process, its own core) -----------------------------


async def _stream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    idx_text, phase_text = body["prompt"].split()
    idx = int(idx_text)
    first_s, gap_s = float(body["first_s"]) + float(phase_text), float(body["gap_s"])
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is not None:
        # As uvicorn does: without it, Nagle holds small writes back until an ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    sent: list[float] = []
    due = time.perf_counter() + first_s
    for _ in range(int(body["max_tokens"])):
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        await resp.write(b'data: {"choices":[{"index":0,"text":" tok"}]}\n\n')
        sent.append(time.perf_counter())
        due += gap_s
    usage = {"prompt_tokens": 1, "completion_tokens": len(sent)}
    final = {"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "usage": usage}
    await resp.write(b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n")
    request.app[TRUTH][idx] = sent
    return resp


async def _truth(request: web.Request) -> web.Response:
    return web.json_response({str(k): v for k, v in request.app[TRUTH].items()})


def _serve(port: int, core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    app = web.Application()
    app[TRUTH] = {}
    app.router.add_post("/v1/completions", _stream)
    app.router.add_get("/truth", _truth)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None, backlog=1024)


def _extra_payload(first_s: float, gap_s: float) -> None:
    """The timing server reads its schedule from the request; add it to the payload."""
    from stackmatrix.bench import client

    original = client._payload

    def payload(req: BenchRequest, options: ClientOptions) -> dict[str, Any]:
        return original(req, options) | {"first_s": first_s, "gap_s": gap_s}

    client._payload = payload


def timing(args: argparse.Namespace) -> int:
    cores = sorted(os.sched_getaffinity(0))
    client_core, server_core = cores[0], (cores[1] if len(cores) > 1 else None)
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_serve, args=(port, server_core), daemon=True)
    proc.start()
    try:
        while not port_in_use(port):
            time.sleep(0.05)
        os.sched_setaffinity(0, {client_core})
        return _measure_timing(args, port, client_core, server_core)
    finally:
        proc.terminate()
        proc.join(10)


def _measure_timing(args: argparse.Namespace, port: int, core: int, server_core: int | None) -> int:
    first_s, gap_s = args.first_ms / 1e3, args.gap_ms / 1e3
    _extra_payload(first_s, gap_s)
    n = args.streams * args.waves
    reqs = [
        BenchRequest(index=i, prompt=f"{i} {_phase(i, args)}", input_len=2,
                     max_tokens=args.tokens, arrival_s=0.0)
        for i in range(n)
    ]  # fmt: skip
    opts = ClientOptions(
        base_url=f"http://127.0.0.1:{port}", model="m", max_concurrency=args.streams
    )
    outcome = run_round(reqs, opts)
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/truth") as resp:
        truth = {int(k): v for k, v in json.loads(resp.read()).items()}
    ttft_err, gap_err, gap_rel = [], [], []
    for rec in outcome.records:
        assert rec.ok, rec.error
        sent = truth[rec.index]
        start = outcome.t0 + rec.start_s
        assert rec.ttft_s is not None
        ttft_err.append(abs(rec.ttft_s - (sent[0] - start)))
        for measured, (a, b) in zip(rec.itl_s, itertools.pairwise(sent), strict=True):
            gap_err.append(abs(measured - (b - a)))
            gap_rel.append(abs(measured - (b - a)) / (b - a))
    m = round_metrics(outcome.records, outcome.duration_s)
    tokens = m["total_output_tokens"]
    within = [e <= max(0.01 * g, 50e-6) for e, g in zip(gap_err, _truth_gaps(truth), strict=False)]
    report = {
        "schedule": "lockstep" if args.lockstep else "staggered",
        "gap_ms": args.gap_ms,
        "streams": args.streams,
        "requests": n,
        "tokens": tokens,
        "client_core": core,
        "server_core": server_core,
        "duration_s": round(outcome.duration_s, 3),
        "tokens_per_s": round(tokens / outcome.duration_s),
        "client_cpu_s": round(outcome.cpu_s, 3),
        "client_cpu_share_of_core": round(outcome.cpu_s / outcome.duration_s, 3),
        "client_us_per_token": round(outcome.cpu_s / tokens * 1e6, 2),
        "ttft_abs_err_us": _pcts(ttft_err),
        "gap_abs_err_us": _pcts(gap_err),
        "gap_rel_err_pct": {k: round(v / 1e4, 3) for k, v in _pcts(gap_rel).items()},
        "gaps_within_1pct_or_50us": round(sum(within) / len(within), 4),
        "ttft_within_1pct_or_50us": round(
            sum(
                e <= max(0.01 * (r.ttft_s or 0), 50e-6)
                for e, r in zip(ttft_err, outcome.records, strict=True)
            )
            / len(ttft_err),
            4,
        ),
    }
    print(json.dumps(report, indent=2))
    ok = (
        report["tokens_per_s"] >= 20_000
        and args.streams >= 200
        and report["gap_abs_err_us"]["p50"] <= max(0.01 * gap_s * 1e6, 50)
        and report["ttft_abs_err_us"]["p50"] <= max(0.01 * first_s * 1e6, 50)
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _phase(i: int, args: argparse.Namespace) -> float:
    """Offset of stream i's schedule: spread over one gap, or 0 for all in lockstep
    (every stream's token due at the same instant, as a batching engine emits them)."""
    if args.lockstep:
        return 0.0
    return float((i % args.streams) / args.streams * args.gap_ms / 1e3)


def _truth_gaps(truth: dict[int, list[float]]) -> list[float]:
    return [b - a for k in sorted(truth) for a, b in zip(truth[k], truth[k][1:], strict=False)]


def _pcts(errors: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(errors, 50) * 1e6, 1),
        "p90": round(percentile(errors, 90) * 1e6, 1),
        "p99": round(percentile(errors, 99) * 1e6, 1),
        "mean": round(statistics.fmean(errors) * 1e6, 1),
    }


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
