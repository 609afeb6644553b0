"""Load points (`[[bench.points]]`, a throughput point at concurrency 32): a
further load measured in every launch after the headline, on the same server, through
the whole pipeline (spec, bench, report), against the test suite's own engine whose
decode speed depends on a server argument."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.fakerun import run_spec

pytestmark = pytest.mark.integration

SPEC = """
name = "points"
baseline = "a"

[defaults]
backend = "current"
python = "{py}"
env = {{ PYTHONPATH = "{root}" }}

[[cell]]
id = "a"

[[cell]]
id = "b"
server_args = ["--token-gap-ms", "9"]

[bench]
engine = "transformers"
model = "fake-model"
launches = 2
warmup_launches = 1
rounds = 1
ready_timeout_s = 30

[bench.workload]
input_len = 8
output_len = 16
num_prompts = 4
max_concurrency = 1
warmup = 1
request_timeout_s = 20

[[bench.points]]
name = "c4"
max_concurrency = 4
num_prompts = 8

[report]
min_effect = 0.05
"""


def test_a_load_point_is_measured_in_every_launch_and_reported(tmp_path: Path) -> None:
    run = run_spec(tmp_path, SPEC)
    workload = json.loads((run / "workload.json").read_text())
    assert workload["points"]["c4"]["measured"] == 8
    assert (run / "workload-c4.jsonl").is_file()
    for cid in ("a", "b"):
        bench = json.loads((run / "cells" / cid / "bench.json").read_text())["data"]
        launches = bench["launches"]
        assert len(launches) == 2
        for launch in launches:
            point = launch["points"]["c4"]
            (rnd,) = point["rounds"]
            assert rnd["metrics"]["completed"] == 8
            assert rnd["requests_file"] == f"requests-L{launch['index']}-R1-c4.jsonl"
            lines = (run / "cells" / cid / rnd["requests_file"]).read_text().splitlines()
            assert len(lines) == 8
            # the headline's own round is still the headline's
            assert launch["rounds"][0]["metrics"]["completed"] == 4
        # the warm-up launch runs the point too (a JIT compiles its shapes there), discarded
        (warm,) = bench["warmup_launches"]
        assert warm["points"]["c4"]["rounds"][0]["requests_file"] == "warmup-W1-R1-c4.jsonl"
        assert (run / "cells" / cid / "warmup-W1-R1-c4.jsonl").is_file()
        assert bench["points"]["c4"]["max_concurrency"] == 4
        assert bench["points"]["c4"]["summary"]["output_throughput"] > 0
    matrix = json.loads((run / "matrix.json").read_text())
    (point,) = matrix["points"]
    assert (point["name"], point["metric"], point["max_concurrency"]) == (
        "c4",
        "output_throughput",
        4,
    )
    rows = {r["cell"]: r for r in point["rows"]}
    assert rows["a"]["comparison"] is None and rows["a"]["launches"] == 2
    # 9 ms between tokens against 3, at 4 streams too: about a third of the speed. Two
    # launches give a Welch interval with ~1-2 degrees of freedom, so on a loaded machine
    # the verdict may stay inconclusive; the measured ratio may not.
    b_row = rows["b"]["comparison"]
    assert b_row["ratio"] < 0.6 and b_row["verdict"] in ("slower", "inconclusive")
    md = (run / "matrix.md").read_text()
    assert "### Load points" in md and "#### c4: concurrency 4, 8 prompts" in md
    assert "<h2>Load points</h2>" in (run / "matrix.html").read_text()
