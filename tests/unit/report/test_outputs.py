"""The report on hand-built results directories: missing, failed and broken pieces."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from stackmatrix.errors import ResultsError, Unreadable, UsageError
from stackmatrix.report import build_report, parse_fail_on
from stackmatrix.stats.verdict import Verdict

from ._results import bench_data, finding, phase, run_dir, write

AA = [[47.1, 47.3, 47.0], [46.2, 46.5, 46.4], [47.9, 47.6, 47.8], [46.8, 46.9, 47.2]]
BASE_CONFIG = {
    "attn_implementation": "sdpa",
    "continuous_batching": True,
    "port": 8001,
    "log_level": "info",
}


def _cpu_run(tmp_path: Path) -> Path:
    defs = {
        "sdpa": {"python": "3.11", "pins": ["torch==2.13.0", "transformers==4.57.1"]},
        "sdpa-again": {"python": "3.11", "pins": ["torch==2.13.0", "transformers==4.57.1"]},
        "eager": {
            "python": "3.11",
            "pins": ["torch==2.13.0", "transformers==4.57.1"],
            "server_args": ["--attn-implementation", "eager"],
        },
        "broken": {"python": "3.11", "pins": ["torch==9.9"]},
        "corrupt": {"python": "3.11", "pins": ["torch==2.13.0"], "env": {"OMP_NUM_THREADS": "1"}},
    }
    rd = run_dir(tmp_path, cells=list(defs), baseline="sdpa", definitions=defs)
    lock = [
        {"name": "torch", "version": "2.13.0+cpu", "source": "/opt/wheels"},
        {"name": "transformers", "version": "4.57.1", "source": "pypi"},
    ]
    check = {
        "verdict": "compatible",
        "inventory": [],
        "cuda_majors": [],
        "extensions": [],
        "coverage": {},
        "target_summary": {"sm_90": "n/a"},
        "driver": {},
        "probe": {"torch": "2.13.0+cpu", "cuda": None, "devices": []},
    }
    for cid in ("sdpa", "sdpa-again", "eager"):
        cells = rd / "cells" / cid
        write(
            cells / "build.json",
            phase(
                cid,
                "build",
                data={
                    "environment": {
                        "backend": "venv",
                        "python": ["py"],
                        "env": {"HF_TOKEN": "hf_secret"},
                    },
                    "lock": lock,
                    "python_version": "3.11.9",
                    "reused": False,
                },
            ),
        )
        write(
            cells / "check.json",
            phase(
                cid,
                "check",
                data=check,
                findings=[
                    finding(
                        "SM-ARCH-PTX-ONLY",
                        "warn",
                        "sm_90 runs PTX only: expect a JIT delay",
                        cid,
                        "libfoo.so",
                    )
                ],
            ),
        )
    values = {
        "sdpa": AA,
        "sdpa-again": [[v * 1.003 for v in r] for r in AA],
        "eager": [[v * 0.75 for v in r] for r in AA],
    }
    configs = {
        "sdpa": BASE_CONFIG,
        "sdpa-again": {**BASE_CONFIG, "port": 8002},
        "eager": {**BASE_CONFIG, "attn_implementation": "eager", "port": 8003, "dtype": "float32"},
    }
    for cid, vals in values.items():
        write(
            rd / "cells" / cid / "bench.json",
            phase(cid, "bench", data=bench_data(vals, config=configs[cid])),
        )
        # the client's own field names and units (seconds)
        ok = {"ttft_s": 0.040, "itl_s": [0.020, 0.021], "e2e_s": 0.081, "output_tokens": 3}
        failed = {"ttft_s": 0.900, "itl_s": [], "e2e_s": 0.900, "output_tokens": 0}
        (rd / "cells" / cid / "requests-L0-R0.jsonl").write_text(
            json.dumps({**ok, "error": None})
            + "\nnot json\n"
            + json.dumps({**failed, "error": "timeout"})
            + "\n"
        )
    write(
        rd / "cells" / "broken" / "build.json",
        phase(
            "broken",
            "build",
            status="failed",
            code="resolve_failed",
            message="uv: no version of torch==9.9",
            findings=[
                finding(
                    "SM-RESOLVE-FAILED",
                    "fail",
                    "torch==9.9 does not exist: fix the pin",
                    "broken",
                    "torch",
                )
            ],
        ),
    )
    (rd / "cells" / "corrupt").mkdir(parents=True)
    (rd / "cells" / "corrupt" / "bench.json").write_text("{ half a file")
    return rd


def test_report_survives_missing_failed_and_corrupt_files(tmp_path):
    rd = _cpu_run(tmp_path)
    outcome = build_report(rd, fail_on=["failed", "regression", "incompatible"])
    report = outcome.report
    broken, corrupt = report.cell("broken"), report.cell("corrupt")
    assert broken.compat == "build failed" and broken.verdict is Verdict.NOT_MEASURED
    assert broken.phase("check").status == "missing"
    assert corrupt.problems and "bench.json unreadable" in corrupt.problems[0]
    assert corrupt.compat == "not checked"
    assert "broken: build failed (resolve_failed)" in outcome.policy_failures
    assert any(f.startswith("eager: slower") for f in outcome.policy_failures)
    assert "corrupt: bench unreadable" in outcome.policy_failures  # not success (defect 15)
    assert len(outcome.policy_failures) == 3
    md = outcome.markdown.read_text()
    assert "build failed" in md and "bench.json unreadable" in md
    assert "resolve_failed" in md and "torch==9.9 does not exist: fix the pin" in md


def test_aa_and_a_real_difference_on_cpu_like_data(tmp_path):
    report = build_report(_cpu_run(tmp_path)).report
    again, eager = report.cell("sdpa-again"), report.cell("eager")
    assert again.verdict is Verdict.EQUIVALENT
    assert again.drift is not None and eager.drift is not None
    # the port differs between launches of one cell: volatile, never a difference
    assert again.drift.unintended == () and again.drift.volatile == ("server:port",)
    assert eager.verdict is Verdict.SLOWER
    keys = [d.key for d in eager.drift.unintended]
    # Asked for: the attention implementation. Not asked for: dtype.
    assert "server:attn_implementation" in {d.key for d in eager.drift.intended}
    assert "server:dtype" in keys and "server:port" not in keys


def test_secrets_never_reach_the_outputs(tmp_path):
    rd = _cpu_run(tmp_path)
    outcome = build_report(rd)
    for path in (outcome.markdown, outcome.html, outcome.json, outcome.junit):
        assert "hf_secret" not in path.read_text()


def test_json_is_schema_versioned_and_distributions_skip_errors(tmp_path):
    outcome = build_report(_cpu_run(tmp_path))
    data = json.loads(outcome.json.read_text())
    assert data["schema_version"] == 1 and data["spec_name"] == "cpu-aa"
    sdpa = next(c for c in data["cells"] if c["id"] == "sdpa")
    assert sdpa["distributions"]["ttft_ms"]["p95"] == 40.0  # the timed-out request is out
    assert sdpa["distributions"]["itl_ms"]["n"] == 2.0
    assert sdpa["headline"]["n"] == 4 and sdpa["headline"]["unit"] == "launch"
    assert data["calibration"]["launches"] == 4


def test_junit_has_one_case_per_cell_and_check(tmp_path):
    outcome = build_report(_cpu_run(tmp_path))
    root = ET.parse(outcome.junit).getroot()  # noqa: S314 - our own file, written just now
    suites = {s.attrib["name"].split(".")[-1]: s for s in root.iter("testsuite")}
    assert set(suites) == {"sdpa", "sdpa-again", "eager", "broken", "corrupt"}
    names = [c.get("name") for c in suites["eager"].iter("testcase")]
    assert names == ["build", "compat", "coverage[sm_90]", "bench", "perf[output_throughput]"]
    perf = suites["eager"].find("testcase[@name='perf[output_throughput]']")
    assert perf is not None
    assert perf.find("failure") is not None
    build = suites["broken"].find("testcase[@name='build']")
    assert build is not None
    failure = build.find("failure")
    assert failure is not None
    assert "resolve_failed" in failure.attrib["message"]
    assert suites["broken"].get("failures") == "1"


def test_summary_markdown_is_the_short_version(tmp_path):
    outcome = build_report(_cpu_run(tmp_path))
    assert "### Compatibility" in outcome.summary_markdown
    assert "<details>" not in outcome.summary_markdown
    assert "<details>" in outcome.markdown.read_text()


def test_single_launch_cells_say_their_interval_ignores_launch_noise(tmp_path):
    defs = {"a": {"python": "3.11"}, "b": {"python": "3.11", "env": {"X": "1"}}}
    rd = run_dir(tmp_path, cells=["a", "b"], baseline="a", definitions=defs)
    for cid, scale in (("a", 1.0), ("b", 1.0)):
        write(
            rd / "cells" / cid / "bench.json",
            phase(cid, "bench", data=bench_data([[47.0 * scale, 47.2, 46.9]], config={})),
        )
    outcome = build_report(rd)
    assert outcome.report.sample_unit == "round"
    assert "ignore launch-to-launch noise" in outcome.markdown.read_text()
    assert outcome.report.calibration is None


def test_missing_run_json_is_an_actionable_error(tmp_path):
    with pytest.raises(Unreadable, match="not a stackmatrix results directory"):
        build_report(tmp_path)


def test_fail_on_parsing():
    assert parse_fail_on(["incompatible,regression", "failed"]) == (
        "incompatible",
        "regression",
        "failed",
    )
    with pytest.raises(UsageError, match="unknown value"):
        parse_fail_on(["regresion"])


@pytest.mark.parametrize(
    ("launches", "noted"),
    [
        ([409.0, 525.0, 534.0, 531.0, 531.0], True),  # the H200 upgrade run's 0.5.12 cell
        ([531.0, 525.0, 409.0, 534.0, 531.0], False),  # a slow launch later: not a cold start
        ([640.0, 525.0, 534.0, 531.0, 531.0], False),  # faster first: not a cold start either
    ],
)
def test_a_cold_first_launch_asks_for_more_warm_up(tmp_path, launches, noted):
    defs = {"a": {"python": "3.11"}, "b": {"python": "3.11"}}
    rd = run_dir(tmp_path, cells=list(defs), baseline="a", definitions=defs)
    for cid in defs:
        data = bench_data([[v] for v in launches], config={"port": 1})
        write(rd / "cells" / cid / "bench.json", phase(cid, "bench", data=data))
    notes = [n for n in build_report(rd).report.notes if "first measured launch" in n]
    assert len(notes) == (2 if noted else 0)
    if noted:
        assert notes[0].startswith("a: its first measured launch (L0, 409) is an outlier, 23% ")
        assert "no warm-up launch ran before it" in notes[0]
        assert "keep bench.host_warmup on" in notes[0] and "warmup_launches" not in notes[0]


def test_a_cold_first_launch_after_the_host_warm_up_asks_for_the_cell_s_own(tmp_path):
    """With the host warmed by the run's warm-up launch (the first cell's), a cold first
    launch is the cell's own; a cell that had warm-up launches of its own is told to
    raise them."""
    defs = {"a": {"python": "3.11"}, "b": {"python": "3.11"}}
    rd = run_dir(tmp_path, cells=list(defs), baseline="a", definitions=defs)
    for cid in defs:
        data = bench_data([[v] for v in (409.0, 525.0, 534.0, 531.0, 531.0)], config={"port": 1})
        if cid == "a":  # the host warm-up launch
            data["warmup_launches"] = [{**data["launches"][0], "index": "W1"}]
        write(rd / "cells" / cid / "bench.json", phase(cid, "bench", data=data))
    notes = {n[0]: n for n in build_report(rd).report.notes if "first measured launch" in n}
    assert "after 1 warm-up launch(es) of its own" in notes["a"]
    assert "raise bench.warmup_launches" in notes["a"]
    # the same stack as a's (nothing recorded differs): not a cold start of its own
    assert "the run's warm-up launch ran a, the same stack, before it" in notes["b"]
    assert "set bench.warmup_launches" in notes["b"]


def test_output_never_replaces_another_run_s_report(tmp_path):
    rd = _cpu_run(tmp_path / "a")
    other = _cpu_run(tmp_path / "b")  # another run: its own created time
    run_json = json.loads((other / "run.json").read_text())
    (other / "run.json").write_text(json.dumps({**run_json, "created": "2026-03-03T10:00:00Z"}))
    build_report(other)
    theirs = (other / "matrix.md").read_bytes()
    with pytest.raises(ResultsError, match="results directory of another run"):
        build_report(rd, out_dir=other)
    assert (other / "matrix.md").read_bytes() == theirs
    foreign = tmp_path / "docs"
    foreign.mkdir()
    (foreign / "matrix.md").write_text("# our hand-written matrix\n")
    with pytest.raises(ResultsError, match="did not write"):
        build_report(rd, out_dir=foreign)
    assert (foreign / "matrix.md").read_text() == "# our hand-written matrix\n"


def test_output_may_be_new_empty_ours_or_the_run_itself(tmp_path):
    rd = _cpu_run(tmp_path / "a")
    build_report(rd, out_dir=rd)
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "new", tmp_path / "empty", tmp_path / "new"):  # twice: ours
        assert build_report(rd, out_dir=out).markdown.is_file()


@pytest.mark.parametrize("same", [True, False])
def test_a_cold_first_launch_after_a_warm_up_of_the_same_stack_claims_no_cold_start(tmp_path, same):
    """On the H100 the warm-up launch ran triton-again and then triton's first launch
    was 3% slow, in the same environment: the note must not say it paid for a cold
    start of its own, which it could not have; with another stack it may."""
    defs = {"a": {"python": "3.11"}, "b": {"python": "3.11"}}
    rd = run_dir(tmp_path, cells=list(defs), baseline="a", definitions=defs)
    for cid in defs:
        data = bench_data([[v] for v in (409.0, 525.0, 534.0, 531.0, 531.0)], config={"port": 1})
        if cid == "b":  # the host warm-up launch
            data["warmup_launches"] = [{**data["launches"][0], "index": "W1"}]
        write(rd / "cells" / cid / "bench.json", phase(cid, "bench", data=data))
        torch = "2.11.0" if same or cid == "a" else "2.12.0"
        lock = {"lock": [{"name": "torch", "version": torch}], "python_version": "3.12.3"}
        write(rd / "cells" / cid / "build.json", phase(cid, "build", data=lock))
    notes = {n[0]: n for n in build_report(rd).report.notes if "first measured launch" in n}
    if same:
        assert "the run's warm-up launch ran b, the same stack, before it" in notes["a"]
        assert "not the stack's first start" in notes["a"] and "cold start" not in notes["a"]
    else:
        assert "the run's warm-up launch (of b) warmed the host, not this cell's own" in notes["a"]
