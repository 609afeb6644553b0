"""The recipe for a new metric, performed: in a copy of the package, its entry in
metric_registry.py and its figure in bench/metrics.py `round_metrics` (2 files, as
docs/architecture.md says) make it a round's figure, a headline `report --headline`
takes, judged in the direction its entry gives, under the label its entry gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.package_copy import insert_after, perform_in_copy

from ._results import two_equal_cells

ENTRY = "_HEADLINES: tuple[Metric, ...] = (\n    OUTPUT_THROUGHPUT,\n"
FIGURE = '        "usage_reported": sum(r.output_tokens_source == "usage" for r in ok),\n'
COMPUTE = """
from stackmatrix.bench.client import RequestRecord
from stackmatrix.bench.metrics import round_metrics
rec = RequestRecord(index=0, ttft_s=0.1, itl_s=[0.02], e2e_s=0.15, output_tokens=2,
    output_tokens_source="usage", queue_wait_s=0.0, error=None, prompt_tokens=300)
print(round_metrics([rec], 2.0)["input_throughput"])
"""


def _perform(copy: Path) -> None:
    insert_after(
        copy / "metric_registry.py",
        ENTRY,
        '    Metric(name="input_throughput", unit="tok/s", direction="higher",'
        ' headline=True, label="prompt tok/s"),\n',
    )
    insert_after(
        copy / "bench/metrics.py",
        FIGURE,
        '        "input_throughput": (\n'
        "            sum(r.prompt_tokens or 0 for r in ok) / duration_s if duration_s else 0\n"
        "        ),\n",
    )


def _with_prompt_speed(rd: Path, cell: str, speed: float) -> None:
    path = rd / "cells" / cell / "bench.json"
    result = json.loads(path.read_text())
    for launch in result["data"]["launches"]:
        for i, rnd in enumerate(launch["rounds"]):
            rnd["metrics"]["input_throughput"] = speed + i
    path.write_text(json.dumps(result))


def test_a_new_metric_touches_two_files_and_is_a_headline_judged_its_way(tmp_path: Path) -> None:
    site = tmp_path / "site"
    perform_in_copy(site, _perform, ["bench/metrics.py", "metric_registry.py"])
    env = {**os.environ, "PYTHONPATH": str(site)}

    figure = subprocess.run(
        [sys.executable, "-c", COMPUTE], env=env, capture_output=True, text=True, timeout=60
    )
    assert figure.returncode == 0, figure.stderr
    assert float(figure.stdout) == 150.0  # 300 prompt tokens in 2 s

    rd = two_equal_cells(tmp_path / "run")
    _with_prompt_speed(rd, "a", 1000.0)
    _with_prompt_speed(rd, "b", 700.0)  # 30% fewer prompt tokens per second
    argv = [sys.executable, "-m", "stackmatrix", "report", str(rd)]
    done = subprocess.run(
        [*argv, "--headline", "input_throughput"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    cells = {c["id"]: c for c in json.loads((rd / "matrix.json").read_text())["cells"]}
    assert cells["b"]["verdict"] == "slower"  # higher is better, as its entry says
    assert "prompt tok/s (median" in (rd / "matrix.md").read_text()

    # the installed package knows no such metric
    refused = subprocess.run(
        [*argv, "--headline", "input_throughput"], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode == 2 and "input_throughput" in refused.stderr
