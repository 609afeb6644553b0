"""Cross-check against an independent load generator (aiperf 0.13.0, its own venv).

One CPU `transformers serve` with the tiny model; the same prompts, lengths and
concurrency measured alternately by our client and by aiperf; output throughput
(tokens/s from the server's own usage counts) compared. See docs/bench.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from stackmatrix.bench.client import ClientOptions, run_round
from stackmatrix.bench.engines import get_engine
from stackmatrix.bench.metrics import round_metrics
from stackmatrix.bench.server import launch
from stackmatrix.bench.tinymodel import make_tiny_model
from stackmatrix.bench.workload import generate
from stackmatrix.builder.base import Environment
from stackmatrix.spec_model import Workload
from stackmatrix.stats.estimate import ratio_interval

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test suite's fixtures
from tests.support.cpuenv import cache_root, ensure_cpu_serving_env

AIPERF = ("aiperf==0.13.0",)


def crosscheck(args: argparse.Namespace) -> int:
    py = ensure_cpu_serving_env()
    aiperf_py = ensure_cpu_serving_env(requirements=AIPERF, find_links=())
    model = make_tiny_model(cache_root().parent / "tiny-models" / "crosscheck", python=[str(py)])
    wl = Workload(
        input_len=args.input_len,
        output_len=args.output_len,
        num_prompts=args.prompts,
        max_concurrency=args.concurrency,
        warmup=2,
    )
    requests = generate(wl)
    # The server gets its own core(s), the load generators the other: aiperf runs
    # several busy processes, and on a CPU server sharing cores with it, it would
    # slow the very thing it measures.
    cores = sorted(os.sched_getaffinity(0))
    client_cores, server_cores = cores[:1], cores[1:] or cores[:1]
    pin = ("taskset", "-c", ",".join(map(str, server_cores)))
    threads = str(len(server_cores))
    env = Environment(
        backend="venv",
        python=(*pin, str(py)),
        env={"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": threads},
    )
    os.sched_setaffinity(0, set(client_cores))
    work = Path(tempfile.mkdtemp(prefix="stackmatrix-crosscheck-"))
    ours: list[float] = []
    theirs: list[float] = []
    with launch(
        engine=get_engine("transformers"),
        environment=env,
        model=str(model),
        args=["--device", "cpu"],
        log_path=work / "server.log",
        ready_timeout_s=300,
    ) as srv:
        opts = ClientOptions(
            base_url=srv.base_url, model=str(model), max_concurrency=args.concurrency
        )
        prompts = work / "prompts.jsonl"
        prompts.write_text(
            "".join(json.dumps({"text": r.prompt}) + "\n" for r in requests.measured)
        )
        for rep in range(args.reps):
            # ABAB... then BABA...: alternate who goes first, so a trend within a rep
            # (the server warming, a neighbour arriving) does not favour one side
            ours_first = rep % 2 == 0
            ai_out = work / f"ai{rep}"
            if not ours_first:
                theirs.append(_aiperf(aiperf_py, srv.base_url, model, prompts, args, ai_out))
            run_round(requests.warmup, opts)
            out = run_round(requests.measured, opts)
            tok_s = round_metrics(out.records, out.duration_s)["output_throughput"]
            if tok_s is None:
                raise RuntimeError(f"rep {rep}: no request of our client completed")
            ours.append(tok_s)
            if ours_first:
                theirs.append(_aiperf(aiperf_py, srv.base_url, model, prompts, args, ai_out))
            first = "ours first" if ours_first else "aiperf first"
            print(
                f"rep {rep + 1} ({first}): ours {ours[-1]:.1f} tok/s, aiperf {theirs[-1]:.1f} tok/s"
            )
    a, b = statistics.median(ours), statistics.median(theirs)
    # Each rep measures both back to back; the median of the paired ratios cancels
    # drift slower than one rep (other tenants of a shared host). The interval: the
    # paired log ratios' mean with a t interval (how well the reps pin the difference).
    ratios = [x / y for x, y in zip(ours, theirs, strict=True)]
    paired = statistics.median(r - 1 for r in ratios)
    _, low, high = ratio_interval(ratios) or (math.nan, math.nan, math.nan)
    report = {
        "ours_tok_s": ours,
        "aiperf_tok_s": theirs,
        "median_ours": a,
        "median_aiperf": b,
        "difference_of_medians_pct": round(100 * (a - b) / b, 2),
        "paired_difference_pct": round(100 * paired, 2),
        "paired_mean_95ci_pct": [round(100 * low, 2), round(100 * high, 2)],
        "sides_noise_pct": {
            "ours": round(100 * statistics.stdev(ours) / statistics.fmean(ours), 1),
            "aiperf": round(100 * statistics.stdev(theirs) / statistics.fmean(theirs), 1),
        },
    }
    report |= {"client_cores": client_cores, "server_cores": server_cores}
    report |= {"load_average": os.getloadavg()}
    print(json.dumps(report, indent=2))
    ok = abs(paired) <= 0.05
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def _aiperf(
    python: Path, url: str, model: Path, prompts: Path, args: argparse.Namespace, out: Path
) -> float:
    cores = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    argv = [
        "taskset",
        "-c",
        cores,
        str(python.parent / "aiperf"),
        "profile",
        "--model",
        str(model),
        "--url",
        url,
        "--endpoint-type",
        "completions",
        "--streaming",
        "--tokenizer",
        str(model),
        "--use-server-token-count",
        "--input-file",
        str(prompts),
        "--custom-dataset-type",
        "single_turn",
        "--output-tokens-mean",
        str(args.output_len),
        "--output-tokens-stddev",
        "0",
        "--concurrency",
        str(args.concurrency),
        "--request-count",
        str(args.prompts),
        "--warmup-request-count",
        "2",
        "--ui-type",
        "none",
        "--artifact-dir",
        str(out),
    ]
    # aiperf 0.13.0 cannot load a local tokenizer with HF_HUB_OFFLINE set.
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900, check=False)
    if res.returncode != 0:
        raise RuntimeError(
            f"aiperf failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        )
    return _throughput(out)


def _throughput(out: Path) -> float:
    path = out / "profile_export_aiperf.json"  # the profiling phase, warm-up excluded
    data: dict[str, Any] = json.loads(path.read_text())
    metric = data.get("output_token_throughput")
    if isinstance(metric, dict) and "avg" in metric:
        return float(metric["avg"])
    raise RuntimeError(f"no output_token_throughput in {path}")
