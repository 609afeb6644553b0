"""The whole pipeline for real on CPU: uv cells, compat checks, a real `transformers
serve` per cell and launch, the report with verdicts and calibration, then calibrate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SPEC = """
name = "cpu-e2e"
baseline = "tf517"
targets = ["sm_90"]
order = "interleaved"

[defaults]
python = "3.11"
find_links = ["/opt/wheels"]
pins = ["torch==2.13.0", "transformers[serving]==5.17.0", "requests>=2.32"]
env = { OMP_NUM_THREADS = "1" }

[[cell]]
id = "tf517"

[[cell]]
id = "tf523"
pins = ["transformers[serving]==5.23.0"]

[bench]
engine = "transformers"
model = "stackmatrix:tiny-llama"
server_args = ["--attn-implementation", "sdpa"]
launches = 3
rounds = 1
warmup_launches = 1
ready_timeout_s = 180

[bench.workload]
input_len = 16
output_len = 8
num_prompts = 3
warmup = 1
request_timeout_s = 60
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # the environments and the tiny model are built in this run's own folder, never
    # taken from an earlier run's; uv's cache keeps the rebuild quick
    env = {**os.environ, "STACKMATRIX_WORK_DIR": str(cwd / "work"), "CI": "true"}
    proc = subprocess.run(
        [sys.executable, "-m", "stackmatrix", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    return proc


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("cpu-e2e")
    (root / "spec.toml").write_text(SPEC)
    return root, cli("run", "spec.toml", "--output", "run", cwd=root)


def test_every_cell_is_built_checked_and_benchmarked(run: tuple[Path, object]) -> None:
    root, _ = run
    for cell in ("tf517", "tf523"):
        d = root / "run" / "cells" / cell
        build = json.loads((d / "build.json").read_text())
        check = json.loads((d / "check.json").read_text())
        bench = json.loads((d / "bench.json").read_text())
        assert build["status"] == "ok"
        assert ("SM-DRIFT-LOCAL-TAG", "torch") in {
            (f["code"], f["subject"]) for f in build["findings"]
        }
        assert check["status"] == "ok" and check["data"]["verdict"] in ("compatible", "warnings")
        assert check["data"]["probe"]["torch"]["version"].startswith("2.13.0")
        assert bench["status"] == "ok", bench["message"]
        launches = bench["data"]["launches"]
        assert len(launches) == 3
        metrics = launches[0]["rounds"][0]["metrics"]
        assert metrics["completed"] == 3 and metrics["output_throughput"] > 0
        assert bench["data"]["effective_config"]
        assert (d / "server-L1.log").exists()
        (warm,) = bench["data"]["warmup_launches"]
        assert warm["index"] == "W1" and warm["status"] == "ok", warm
        assert warm["rounds"][0]["requests_file"] == "warmup-W1-R1.jsonl"
        assert (d / "warmup-W1-R1.jsonl").exists() and (d / "server-LW1.log").exists()
        assert warm["finished"] <= min(launch["started"] for launch in launches)


def test_launches_are_interleaved_across_cells(run: tuple[Path, object]) -> None:
    root, _ = run
    started = []
    for cell in ("tf517", "tf523"):
        bench = json.loads((root / "run/cells" / cell / "bench.json").read_text())
        started += [(launch["started"], cell) for launch in bench["data"]["launches"]]
    order = [cell for _, cell in sorted(started)]
    assert order in (["tf517", "tf523"] * 3, ["tf523", "tf517"] * 3), order


def test_report_has_all_outputs_and_noise_estimate(
    run: tuple[Path, subprocess.CompletedProcess[str]],
) -> None:
    root, proc = run
    for name in ("matrix.md", "matrix.html", "matrix.json", "junit.xml"):
        assert (root / "run" / name).stat().st_size > 0
    matrix = json.loads((root / "run/matrix.json").read_text())
    assert matrix["schema_version"] == 1
    cells = {c["id"]: c for c in matrix["cells"]}
    assert set(cells) == {"tf517", "tf523"}
    assert matrix["calibration"]["launches"] == 3  # the warm-up launch is in no statistic
    for cell in cells.values():
        assert len(cell["launches"]) == 3 and not any(x["warmup"] for x in cell["launches"])
        assert [x["warmup"] for x in cell["warmup_launches"]] == [True]
    assert "W1 (warm-up, discarded)" in (root / "run/matrix.md").read_text()
    for cell in cells.values():  # read from the client's per-request files (3 x 3 requests)
        assert cell["distributions"]["ttft_ms"]["n"] == 9.0, cell["distributions"]
        assert 0 < cell["distributions"]["ttft_ms"]["p50"] < 60_000
        assert cell["distributions"]["itl_ms"]["n"] > 0
    assert "noise: a launch's value varies by" in proc.stderr


def test_calibrate_runs_an_aa_experiment(run: tuple[Path, object]) -> None:
    root, _ = run
    proc = cli(
        "calibrate", "spec.toml", "--cell", "tf523", "--launches", "2", "--output", "cal", cwd=root
    )
    assert "calibration of tf523 on output_throughput: 2 launches" in proc.stdout
    assert "launches per cell:" in proc.stdout
    cal = json.loads((root / "cal/calibration.json").read_text())
    assert cal["schema_version"] == 1 and cal["cell"] == "tf523" and cal["launches"] == 2
