"""Results directories written by hand, exactly as the contracts describe the files.

Independent of tests.support.synthetic on purpose: these raw dicts are the
contract the other phases write, so a drift between the two shows up as a failure.
"""

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def phase(
    cell: str,
    name: str,
    status: str = "ok",
    data: Mapping[str, Any] | None = None,
    findings: Iterable[Mapping[str, Any]] = (),
    code: str | None = None,
    message: str = "",
) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "phase": name,
        "cell": cell,
        "status": status,
        "code": code,
        "message": message,
        "inputs_hash": "h",
        "started": "2026-01-01T00:00:00+00:00",
        "finished": "2026-01-01T00:00:10+00:00",
        "duration_s": 10.0,
        "findings": list(findings),
        "data": data or {},
    }


def finding(
    code: str, severity: str, message: str, cell: str, subject: str | None = None
) -> dict[str, Any]:
    return {
        "code": code,
        "severity": severity,
        "cell": cell,
        "subject": subject,
        "message": message,
        "details": {},
    }


def bench_data(
    launch_values: Sequence[Sequence[float]],
    *,
    config: Mapping[str, object],
    engine_version: str = "4.57.1",
) -> dict[str, Any]:
    launches = []
    for li, rounds in enumerate(launch_values):
        launches.append(
            {
                "index": li,
                "started": "t",
                "finished": "t",
                "env_facts": {"host_load": 0.1},
                "status": "ok",
                "rounds": [
                    {
                        "index": ri,
                        "metrics": {"output_throughput": v, "decode_tok_s": v, "ttft_p99_ms": 50.0},
                        "requests_file": f"requests-L{li}-R{ri}.jsonl",
                    }
                    for ri, v in enumerate(rounds)
                ],
            }
        )
    return {
        "engine": "transformers",
        "engine_version": engine_version,
        "effective_config": config,
        "server_info": {},
        "launch_argv": ["transformers", "serve"],
        "workload_hash": "w",
        "launches": launches,
        "summary": {"output_throughput": launch_values[0][0]},
    }


def run_dir(
    tmp: Path,
    *,
    cells: Iterable[str],
    baseline: str,
    definitions: Mapping[str, Any],
    targets: Iterable[str] = ("sm_90",),
    report: Mapping[str, Any] | None = None,
) -> Path:
    write(
        tmp / "run.json",
        {
            "schema_version": 1,
            "spec_name": "cpu-aa",
            "spec_hash": "abc123",
            "baseline": baseline,
            "targets": list(targets),
            "cells": list(cells),
            "order": "interleaved",
            "created": "2026-02-02T10:00:00+00:00",
            "report": report
            or {
                "headline": "output_throughput",
                "confidence": 0.95,
                "min_effect": 0.02,
                "fail_on": [],
            },
        },
    )
    base_def = definitions[baseline]
    plan = []
    for cid in cells:
        d = definitions[cid]
        differs = {k: [base_def.get(k), v] for k, v in d.items() if base_def.get(k) != v}
        differs |= {k: [v, None] for k, v in base_def.items() if k not in d}
        plan.append(
            {
                "id": cid,
                "content_hash": f"hash-{cid}",
                "definition": d,
                "differs_from_baseline": differs,
            }
        )
    write(tmp / "plan.json", {"schema_version": 1, "cells": plan})
    (tmp / "spec.toml").write_text(f'name = "cpu-aa"\nbaseline = "{baseline}"\n')
    return tmp


def two_equal_cells(path: Path) -> Path:
    """A results directory of cells a (the baseline) and b, measured alike: three
    launches each, b equivalent to a."""
    defs = {c: {"python": "3.11"} for c in ("a", "b")}
    rd = run_dir(path, cells=list(defs), baseline="a", definitions=defs)
    for cid in defs:
        data = bench_data([[10.0, 10.1], [10.2, 10.0], [10.1, 10.1]], config={"port": 1})
        write(rd / "cells" / cid / "bench.json", phase(cid, "bench", data=data))
    return rd
