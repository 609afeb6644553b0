"""[report] slo through the whole pipeline (spec, run.json, bench, report), against the
test suite's own engine whose gap between tokens is a server argument: cell b decodes at
9 ms a token where the SLO allows 7, at every load. The report's figures are checked
against the request files the bench wrote."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from tests.support.fakerun import run_spec

from stackmatrix.cli import main

pytestmark = pytest.mark.integration

TPOT_MS = 7.0
SPEC = """
name = "slo"
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
rounds = 1
ready_timeout_s = 30

[bench.workload]
input_len = 8
output_len = 8
num_prompts = 4
max_concurrency = 1
warmup = 1
request_timeout_s = 20

[[bench.points]]
name = "c4"
max_concurrency = 4
num_prompts = 8
warmup = 4

[report]
min_effect = 0.05
slo = {{ tpot_p99_ms = 7, ttft_p99_ms = 1000 }}
"""


def _meets(record: dict[str, Any]) -> bool:
    tpot_ms = (record["e2e_s"] - record["ttft_s"]) / (record["output_tokens"] - 1) * 1e3
    return bool(record["ok"]) and record["ttft_s"] * 1e3 <= 1000 and tpot_ms <= TPOT_MS


def test_goodput_and_the_largest_load_within_the_slo_from_a_real_run(tmp_path: Path) -> None:
    run = run_spec(tmp_path, SPEC)
    assert json.loads((run / "run.json").read_text())["report"]["slo"] == {
        "ttft_p99_ms": 1000.0,
        "tpot_p99_ms": 7.0,
    }
    report = json.loads((run / "matrix.json").read_text())
    cells = {c["id"]: c for c in report["cells"]}
    for cid, cell in cells.items():
        bench = json.loads((run / "cells" / cid / "bench.json").read_text())["data"]
        for point in cell["frontier"]:
            good = sent = 0
            for launch in bench["launches"]:
                rounds = (
                    launch["rounds"]
                    if point["point"] is None
                    else (launch["points"][point["point"]]["rounds"])
                )
                for rnd in rounds:
                    lines = (run / "cells" / cid / rnd["requests_file"]).read_text().splitlines()
                    records = [json.loads(x) for x in lines]
                    sent += len(records)
                    good += sum(_meets(r) for r in records)
            # all or none of a cell's requests meet it here, in every launch alike
            assert good / sent == (1.0 if cid == "a" else 0.0)
            assert point["attainment"] == good / sent, (cid, point)
            goodput = point["goodput"]["median"]
            assert (goodput > 0) == (cid == "a"), (cid, point)
    a, b = cells["a"], cells["b"]
    assert [p["slo_met"] for p in a["frontier"]] == [True, True]
    assert [p["slo_met"] for p in b["frontier"]] == [False, False]
    assert a["goodput"]["largest_load"]["load"] == "c4"
    assert b["goodput"]["largest_load"] is None
    assert b["goodput"]["largest_load_vs_baseline"] == "lower"
    assert (
        "slower at the SLO: it misses the SLO at every load in at least one launch"
        in (b["goodput"]["sentence"])
    )
    md = (run / "matrix.md").read_text()
    assert "### SLO, goodput and the frontier" in md and b["goodput"]["sentence"] in md
    # the SLO's verdicts gate the exit status, each on its own
    gated = ["report", str(run), "--output", str(tmp_path / "gated"), "--fail-on"]
    assert main([*gated, "incompatible"]) == 0
    assert main([*gated, "goodput-regression"]) == 5
    assert main([*gated, "slo-load-regression"]) == 5
    root = ET.parse(tmp_path / "gated" / "junit.xml").getroot()  # noqa: S314 - our own file
    failing = {
        (case.get("classname"), case.get("name"))
        for case in root.iter("testcase")
        if case.find("failure") is not None
    }
    # b is slower at the headline too (its decode is slower at every load)
    assert failing == {
        ("b", "perf[output_throughput]"),
        ("b", "slo[goodput]"),
        ("b", "slo[largest_load]"),
    }
