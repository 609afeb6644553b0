"""Results directories with load points and request files, written by hand as the bench
phase writes them: each round's figures in bench.json, its requests in
requests-L<k>-R<r>[-<point>].jsonl. A round is described by its requests' TTFTs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOKENS = 16


@dataclass(frozen=True)
class Round:
    """One round: its throughput and per-user speed as bench.json records them, its
    duration, and its requests' TTFT (ms), each with TPOT `tpot_ms` over TOKENS tokens."""

    throughput: float
    ttfts_ms: Sequence[float]
    duration_s: float = 2.0
    tpot_ms: float = 2.0
    per_user: float | None = None  # default: 1000 / tpot_ms
    errors: int = 0  # failed requests besides the ttfts
    extra: Mapping[str, Any] = field(default_factory=dict)  # more request fields


def records(rnd: Round) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, ttft in enumerate(rnd.ttfts_ms):
        e2e = (ttft + rnd.tpot_ms * (TOKENS - 1)) / 1e3
        out.append(
            {
                "index": i,
                "ok": True,
                "error": None,
                "ttft_s": ttft / 1e3,
                "e2e_s": e2e,
                "output_tokens": TOKENS,
                "itl_s": [rnd.tpot_ms / 1e3] * (TOKENS - 1),
                **rnd.extra,
            }
        )
    for j in range(rnd.errors):
        out.append(
            {
                "index": len(rnd.ttfts_ms) + j,
                "ok": False,
                "error": "HTTP 500",
                "ttft_s": None,
                "e2e_s": None,
                "output_tokens": 0,
                "itl_s": [],
            }
        )
    return out


def _p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * 0.99
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _metrics(rnd: Round) -> dict[str, Any]:
    return {
        "output_throughput": rnd.throughput,
        "decode_tok_s": rnd.per_user if rnd.per_user is not None else 1000 / rnd.tpot_ms,
        "duration_s": rnd.duration_s,
        "completed": len(rnd.ttfts_ms),
        "ttft_p99_ms": _p99(rnd.ttfts_ms) if rnd.ttfts_ms else None,
        "tpot_p99_ms": rnd.tpot_ms,
    }


# a launch: load name ("headline" or a point's) -> its rounds
Launch = Mapping[str, Sequence[Round]]


def write_cell(
    run: Path,
    cid: str,
    launches: Sequence[Launch],
    *,
    first: int = 0,
    concurrency: Mapping[str, int] | None = None,
) -> None:
    """cells/<cid>/bench.json and its request files; launch k (1-based) started at minute
    `first + 2k` (so two cells written with first=0 and first=1 alternate). A point's
    max_concurrency is `concurrency[name]`, else the number in its name (c4: 4)."""
    cell = run / "cells" / cid
    cell.mkdir(parents=True, exist_ok=True)
    written = []
    for k, launch in enumerate(launches, 1):
        started = f"2026-03-01T10:{first + 2 * k:02d}:00+00:00"
        entry: dict[str, Any] = {
            "index": k,
            "status": "ok",
            "started": started,
            "finished": started.replace(":00+", ":30+"),
            "env_facts": {},
            "rounds": _rounds(cell, k, None, launch["headline"]),
        }
        points = {
            n: {"rounds": _rounds(cell, k, n, r)} for n, r in launch.items() if n != "headline"
        }
        if points:
            entry["points"] = points
        written.append(entry)
    names = [n for n in launches[0] if n != "headline"] if launches else []
    data = {
        "engine": "transformers",
        "launches": written,
        "points": {
            n: {
                "metric": "output_throughput",
                "max_concurrency": (concurrency or {}).get(n) or int(n[1:]),
                "num_prompts": 16,
            }
            for n in names
        },
    }
    bench = {
        "schema_version": 1,
        "phase": "bench",
        "cell": cid,
        "status": "ok",
        "code": None,
        "message": "",
        "inputs_hash": "h",
        "started": "2026-03-01T10:00:00+00:00",
        "finished": "2026-03-01T11:00:00+00:00",
        "duration_s": 1.0,
        "findings": [],
        "data": data,
    }
    (cell / "bench.json").write_text(json.dumps(bench))


def _rounds(cell: Path, k: int, point: str | None, rounds: Sequence[Round]) -> list[Any]:
    out = []
    for r, rnd in enumerate(rounds, 1):
        name = f"requests-L{k}-R{r}{'-' + point if point else ''}.jsonl"
        (cell / name).write_text("".join(json.dumps(x) + "\n" for x in records(rnd)))
        out.append({"index": r, "metrics": _metrics(rnd), "requests_file": name})
    return out


def write_run(
    run: Path,
    cells: Sequence[str],
    *,
    slo: Mapping[str, float] | None,
    concurrency: int = 1,
    spec_tail: str = "",
) -> Path:
    """run.json, plan.json and spec.toml (the headline's max_concurrency in it, then
    `spec_tail`, such as more [bench.workload] keys and [[bench.points]]); the first
    cell is the baseline."""
    run.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "headline": "output_throughput",
        "confidence": 0.95,
        "min_effect": 0.02,
        "fail_on": [],
    }
    if slo is not None:
        report["slo"] = dict(slo)
    (run / "run.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "spec_name": "slo",
                "spec_hash": "x",
                "baseline": cells[0],
                "targets": [],
                "cells": list(cells),
                "order": "balanced",
                "created": "2026-03-01T10:00:00+00:00",
                "report": report,
            }
        )
    )
    plan = [
        {"id": c, "content_hash": f"h-{c}", "definition": {"id": c}, "differs_from_baseline": {}}
        for c in cells
    ]
    (run / "plan.json").write_text(json.dumps({"schema_version": 1, "cells": plan}))
    (run / "spec.toml").write_text(
        f'name = "slo"\nbaseline = "{cells[0]}"\n\n[bench.workload]\n'
        f"max_concurrency = {concurrency}\nnum_prompts = 8\n{spec_tail}"
    )
    return run


def launches(
    n: int,
    *,
    throughput: float,
    ttfts: Mapping[str, Sequence[float]],
    rounds: int = 2,
    step: float = 0.0,
) -> list[Launch]:
    """n launches alike but for `step` (relative, added per launch to the throughput):
    at each load of `ttfts` the same requests, every round."""
    out: list[Launch] = []
    for k in range(n):
        value = throughput * (1 + step * k)
        out.append(
            {
                load: [Round(throughput=value * (1 + 0.01 * r), ttfts_ms=t) for r in range(rounds)]
                for load, t in ttfts.items()
            }
        )
    return out
