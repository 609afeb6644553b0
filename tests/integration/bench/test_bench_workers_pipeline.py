"""`bench.client_workers` through the whole pipeline: `python -m stackmatrix
run` (the spawned workers must not run the CLI again) against the test suite's own
engine; the workers' records merged into the one requests file per round, their CPU
shares in bench.json, and a load point of concurrency 1 still in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.fakerun import run_spec

pytestmark = pytest.mark.integration

SPEC = """
name = "workers"

[defaults]
backend = "current"
python = "{py}"
env = {{ PYTHONPATH = "{root}" }}

[[cell]]
id = "a"

[bench]
engine = "transformers"
model = "fake-model"
launches = 1
rounds = 2
ready_timeout_s = 30
client_workers = 2

[bench.workload]
input_len = 8
output_len = 16
num_prompts = 12
max_concurrency = 4
warmup = 2
request_timeout_s = 20

[[bench.points]]
name = "c1"
max_concurrency = 1
num_prompts = 3
"""


def test_two_workers_share_each_round_and_their_records_merge(tmp_path: Path) -> None:
    run = run_spec(tmp_path, SPEC)
    cell = run / "cells" / "a"
    (launch,) = json.loads((cell / "bench.json").read_text())["data"]["launches"]
    assert len(launch["rounds"]) == 2
    for rnd in launch["rounds"]:
        assert rnd["metrics"]["completed"] == 12 and rnd["metrics"]["errors"] == 0
        assert rnd["client_workers"] == 2 and len(rnd["client_cpu_shares"]) == 2
        assert rnd["metrics"]["client_cpu_share"] == pytest.approx(
            max(rnd["client_cpu_shares"]), abs=1e-4
        )
        records = [json.loads(x) for x in (cell / rnd["requests_file"]).read_text().splitlines()]
        assert [r["index"] for r in records] == list(range(12))  # each once, merged, sorted
        assert all(r["ok"] and r["output_tokens"] == 16 for r in records)
    for point in launch["points"]["c1"]["rounds"]:
        assert point["metrics"]["completed"] == 3
        assert "client_workers" not in point  # one slot: the in-process client
