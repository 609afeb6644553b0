"""Cross-check on a GPU host: one SGLang server, measured alternately by
`sglang.bench_serving` and by stackmatrix's client, the server log a third witness.

Both clients send the same shape: `--prompts` prompts of exactly `--input-len` tokens
(bench_serving: `--dataset-name random-ids --tokenize-prompt`, token ids; ours: text
fitted to that length with the model's tokenizer.json, see bench/tokenizer.py),
`--output-len` tokens out with ignore_eos, `--concurrency` streams, the radix cache
flushed before each side's warm-up and measured run. Reps alternate who goes first.
Per rep and side: output tok/s, median and mean TPOT, the prompt tokens the server
counted, and the server log's own decode speed at `--concurrency` running requests
("Decode batch ... gen throughput (token/s)") within that side's measured window.

    PYTHONPATH=src:/tmp/kit-site python3 benchmarks/crosscheck_bench_serving.py \\
        --model /tmp/tiny-kimi --out /tmp/xcheck --reps 6

`--ours text,token_ids` measures our client twice per rep: with text prompts (the
server tokenizes them) and with the same lengths sent as token ids
(`bench.workload.prompt_form = "token_ids"`, side `ours-ids`), the form bench_serving's
`--tokenize-prompt` sends; the first is the side every ratio of `ours` names.

`--backends sglang,sglang-oai` measures bench_serving through each of its backends:
`sglang` streams from /generate, `sglang-oai` from /v1/completions, the endpoint
stackmatrix's client uses; the second tells what the endpoint costs apart from the client.

Writes OUT/server.log, OUT/bench-serving-<backend>-R<k>.jsonl (bench_serving's own
output), OUT/ours-R<k>.jsonl (our request records), OUT/summary.json (every figure and
the paired ratios). Each rep's figures are printed after the last rep, once the server
log's witness is in them. See docs/bench.md ("Cross-check against sglang.bench_serving").
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from stackmatrix.bench import tokenizer as tok
from stackmatrix.bench.client import ClientOptions, run_round
from stackmatrix.bench.engines import get_engine
from stackmatrix.bench.metrics import round_metrics
from stackmatrix.bench.server import launch
from stackmatrix.bench.workload import generate
from stackmatrix.builder.base import Environment
from stackmatrix.spec_model import Workload
from stackmatrix.stats.estimate import ratio_interval

SERVER_ARGS = (
    "--load-format",
    "dummy",
    "--attention-backend",
    "triton",
    "--cuda-graph-backend-prefill",
    "disabled",
    "--cuda-graph-max-bs-decode",
    "8",
)
DECODE = re.compile(
    r"\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\]\s+Decode batch[^,]*,\s+"
    r"#running-req:\s*(?P<running>\d+),.*?gen throughput \(token/s\):\s*(?P<gen>[0-9.]+)"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="model directory (tiny-kimi, dummy weights)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--input-len", type=int, default=1000)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--ready-timeout-s", type=float, default=420)
    ap.add_argument(
        "--backends",
        default="sglang",
        help="bench_serving backends, comma-separated (sglang: /generate, sglang-oai: "
        "/v1/completions)",
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="start no rep once this many seconds have passed since the start",
    )
    ap.add_argument(
        "--ours",
        default="text",
        help="our client's prompt forms, comma-separated: text (side ours), token_ids "
        "(side ours-ids)",
    )
    args = ap.parse_args()
    started = time.monotonic()
    args.backends = [b for b in args.backends.split(",") if b]
    args.ours = [f for f in args.ours.split(",") if f]
    if not set(args.ours) <= set(OURS):
        ap.error(f"--ours: one or more of {', '.join(OURS)}")
    mine = [OURS[f] for f in args.ours]
    sides = [*mine, *(side_name(b) for b in args.backends)]
    args.out.mkdir(parents=True, exist_ok=True)
    found, lengths = tok.find(None, args.model, None)
    if found is None:
        print(f"no exact prompt lengths: {lengths.why}", file=sys.stderr)
        return 2
    wl = Workload(
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.prompts,
        max_concurrency=args.concurrency,
        warmup=args.concurrency,
        seed=1,
    )
    requests = {
        OURS[form]: generate(dataclasses.replace(wl, prompt_form=form), tokenizer=found)
        for form in args.ours
    }
    env = Environment(backend="venv", python=(sys.executable,), env={"HF_HUB_OFFLINE": "1"})
    log_path = args.out / "server.log"
    rows: list[dict[str, Any]] = []
    with launch(
        engine=get_engine("sglang"),
        environment=env,
        model=args.model,
        args=SERVER_ARGS,
        log_path=log_path,
        ready_timeout_s=args.ready_timeout_s,
        gpus=True,
    ) as srv:
        opts = ClientOptions(
            base_url=srv.base_url,
            model=args.model,
            max_concurrency=args.concurrency,
            request_timeout_s=600,
            ignore_eos=True,
        )
        for rep in range(1, args.reps + 1):
            if args.budget_s is not None and time.monotonic() - started > args.budget_s:
                print(f"budget spent: {rep - 1} reps", file=sys.stderr, flush=True)
                break
            shift = (rep - 1) % len(sides)  # who goes first rotates
            order = sides[shift:] + sides[:shift]
            row: dict[str, Any] = {"rep": rep, "first": order[0]}
            for side in order:
                flush(srv.base_url)
                if side in requests:
                    path = args.out / f"{side}-R{rep}.jsonl"
                    row[side] = ours(requests[side], opts, path)
                else:
                    row[side] = theirs(srv.base_url, args, rep, BACKEND[side])
                print(f"rep {rep}: {side} done", file=sys.stderr, flush=True)
            rows.append(row)
            # kept as it comes, without the witness, should the run be cut short
            with (args.out / "reps.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
    witness(rows, log_path.read_text(errors="replace"), args.concurrency, sides)
    for row in rows:
        print(json.dumps(row), flush=True)
    summary = summarize(rows, args, sides, mine)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["paired"], indent=2))
    return 0


# our client's sides, by the prompt form they send
OURS = {"text": "ours", "token_ids": "ours-ids"}

# a side's key in each rep's row: bench_serving's sglang backend keeps the name
# `theirs` of the first cross-check's files
BACKEND = {"theirs": "sglang"}


def side_name(backend: str) -> str:
    name = "theirs" if backend == "sglang" else f"theirs-{backend}"
    BACKEND[name] = backend
    return name


def flush(base_url: str) -> None:
    why = get_engine("sglang").flush_cache(base_url)
    if why is not None:
        raise RuntimeError(f"the cache was not flushed: {why}")


def ours(requests: Any, opts: ClientOptions, path: Path) -> dict[str, Any]:
    run_round(requests.warmup, opts)
    t0 = time.time()
    out = run_round(requests.measured, opts)
    t1 = time.time()
    with path.open("w") as f:
        for rec in out.records:
            f.write(json.dumps(asdict(rec)) + "\n")
    m = round_metrics(out.records, out.duration_s)
    return {
        "window": [t0, t1],
        "output_tok_s": m["output_throughput"],
        "median_tpot_ms": m["tpot_median_ms"],
        "mean_tpot_ms": m["tpot_mean_ms"],
        "completed": m["completed"],
        "server_prompt_tokens": m["total_input_tokens"],
        "output_tokens": m["total_output_tokens"],
    }


def theirs(base_url: str, args: argparse.Namespace, rep: int, backend: str) -> dict[str, Any]:
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    path = args.out / f"bench-serving-{backend}-R{rep}.jsonl"
    argv = [
        sys.executable,
        "-m",
        "sglang.bench_serving",
        "--backend",
        backend,
        "--host",
        host,
        "--port",
        port,
        "--model",
        args.model,
        "--tokenizer",
        args.model,
        "--dataset-name",
        "random-ids",
        # token ids as the prompt: bench_serving allows it through /generate only
        *(["--tokenize-prompt"] if backend == "sglang" else []),
        "--random-input-len",
        str(args.input_len),
        "--random-output-len",
        str(args.output_len),
        "--random-range-ratio",
        "1.0",
        "--num-prompts",
        str(args.prompts),
        "--max-concurrency",
        str(args.concurrency),
        "--warmup-requests",
        str(args.concurrency),
        "--request-rate",
        "inf",
        "--seed",
        "1",
        "--disable-tqdm",
        "--output-file",
        str(path),
    ]
    t0 = time.time()
    res = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    t1 = time.time()
    path.with_suffix(".log").write_text(res.stdout + res.stderr)
    if res.returncode != 0:
        raise RuntimeError(f"bench_serving failed ({res.returncode}): {res.stderr[-2000:]}")
    data = json.loads(path.read_text().splitlines()[-1])
    return {
        "window": [t0, t1],
        "output_tok_s": data["output_throughput"],
        "median_tpot_ms": data["median_tpot_ms"],
        "mean_tpot_ms": data["mean_tpot_ms"],
        "completed": data["completed"],
        "client_prompt_tokens": data["total_input_tokens"],
        "output_tokens": data["total_output_tokens"],
    }


def witness(rows: list[dict[str, Any]], log: str, running: int, sides: list[str]) -> None:
    """The server's decode speed per request (gen throughput / running) in the log's
    lines at `running` requests, within each side's window (whole seconds inside it);
    and the prompt tokens the server prefilled there."""
    lines = []
    for m in DECODE.finditer(log):
        when = dt.datetime.strptime(m["time"], "%Y-%m-%d %H:%M:%S").timestamp()
        lines.append((when, int(m["running"]), float(m["gen"])))
    for row in rows:
        for side in sides:
            t0, t1 = row[side]["window"]
            speeds = [g / n for when, n, g in lines if t0 + 1 <= when <= t1 - 1 and n == running]
            row[side]["log_decode_tok_s_per_req"] = statistics.median(speeds) if speeds else None
            row[side]["log_lines"] = len(speeds)


def summarize(
    rows: list[dict[str, Any]], args: argparse.Namespace, sides: list[str], mine: list[str]
) -> dict[str, Any]:
    def ratio(key: str, a: str = "ours", b: str = "theirs") -> dict[str, Any]:
        pairs = [(r[a][key], r[b][key]) for r in rows if r[a].get(key) and r[b].get(key)]
        return interval([x / y for x, y in pairs])

    def per_user(side: str) -> dict[str, Any]:
        # the client's per-user decode speed (1 / median TPOT) against the log's
        pairs = [
            (1000 / r[side]["median_tpot_ms"], r[side]["log_decode_tok_s_per_req"])
            for r in rows
            if r[side].get("median_tpot_ms") and r[side].get("log_decode_tok_s_per_req")
        ]
        return interval([x / y for x, y in pairs])

    paired: dict[str, Any] = {}
    for me in mine:
        for side in sides[len(mine) :]:
            name = "bench_serving" if side == "theirs" else f"bench_serving {BACKEND[side]}"
            paired |= {
                f"output_tok_s {me}/{name}": ratio("output_tok_s", a=me, b=side),
                f"median_tpot {me}/{name}": ratio("median_tpot_ms", a=me, b=side),
                f"log decode per request, {me}' window / {name}'s": ratio(
                    "log_decode_tok_s_per_req", a=me, b=side
                ),
            }
    if len(mine) > 1:
        paired |= {
            f"median_tpot {me}/{mine[0]}": ratio("median_tpot_ms", a=me, b=mine[0])
            for me in mine[1:]
        }
    for side in sides[len(mine) :]:
        name = "bench_serving" if side == "theirs" else f"bench_serving {BACKEND[side]}"
        paired |= {
            f"{name} 1/median_tpot / log decode": per_user(side),
            f"prompt tokens {name} sent per request": sorted(
                {r[side]["client_prompt_tokens"] / r[side]["completed"] for r in rows}
            ),
        }
    for me in mine:
        paired |= {
            f"{me} 1/median_tpot / log decode": per_user(me),
            f"prompt tokens at the server ({me}) per request": sorted(
                {r[me]["server_prompt_tokens"] / r[me]["completed"] for r in rows}
            ),
        }
    return {
        "shape": vars(args) | {"out": str(args.out)},
        "reps": rows,
        "paired": paired,
        "load_average": os.getloadavg(),
    }


def interval(ratios: list[float]) -> dict[str, Any]:
    """Mean of the paired log ratios with a 95% t interval, as percentages."""
    found = ratio_interval(ratios)
    if found is None:
        return {"n": 0}
    pct = [round(100 * x, 2) for x in found]
    return {
        "n": len(ratios),
        "mean_pct": pct[0],
        "ci95_pct": pct[1:],
        "each_pct": [round(100 * (r - 1), 2) for r in ratios],
    }


if __name__ == "__main__":
    raise SystemExit(main())
