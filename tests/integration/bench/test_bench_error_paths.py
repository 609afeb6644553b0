"""Error paths a real engine won't produce on request, through the real launch path.

Each misbehaving cell must end with a recorded status, and the cell that behaves
must still be measured, in the same run, after the others failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from stackmatrix.bench import schedule
from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.built_environment import Environment
from stackmatrix.results import PhaseResult, RunDir, Status
from stackmatrix.spec_model import Bench, Cell, Spec, Workload

pytestmark = pytest.mark.integration

FAKE = Path(__file__).with_name("fake_engine.py")
MODES = ("ok", "exit", "never_ready", "die", "http500", "drop", "malformed", "no_usage")


def _spec(tmp_path: Path, cells: tuple[str, ...], launches: int = 2) -> Spec:
    return Spec(
        name="errors",
        path=str(tmp_path / "spec.toml"),
        baseline=cells[0],
        cells=tuple(Cell(id=c) for c in cells),
        bench=Bench(
            engine="transformers",
            model="fake-model",
            launches=launches,
            rounds=1,
            ready_timeout_s=4.0,
            # the measured rounds' error paths, request counts as before the steady
            # warm-up (which tests/unit/bench/test_bench_steady.py covers)
            steady_warmup=False,
            workload=Workload(
                input_len=8,
                output_len=8,
                num_prompts=6,
                max_concurrency=2,
                warmup=1,
                request_timeout_s=20.0,
            ),
        ),
    )


def _env(mode: str, **extra: str) -> Environment:
    env = {"FAKE_MODE": mode, "FAKE_REJECT_IGNORE_EOS": "1", **extra}
    return Environment(backend="venv", python=(sys.executable, str(FAKE)), env=env)


def _errors(cell_dir: Path) -> list[str]:
    out = []
    for path in sorted(cell_dir.glob("requests-*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["error"]:
                out.append(rec["error"])
    return out


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, PhaseResult]]:
    tmp = tmp_path_factory.mktemp("errors")
    run = RunDir(tmp / "run")
    results = run_bench_phase(
        _spec(tmp, MODES),
        run,
        list(MODES),
        environments={m: _env(m) for m in MODES},
        order="interleaved",
    )
    return run.path, results


def test_every_cell_has_a_recorded_result(outcome):
    run, results = outcome
    assert set(results) == set(MODES)
    for mode in MODES:
        on_disk = json.loads((run / "cells" / mode / "bench.json").read_text())
        assert on_disk["schema_version"] == 1
        assert on_disk["status"] == results[mode].status.value
        assert on_disk["finished"]


def test_the_good_cell_is_measured_after_the_others_failed(outcome):
    run, results = outcome
    ok = results["ok"]
    assert ok.status is Status.OK, ok.message
    launches = ok.data["launches"]
    assert [ln["index"] for ln in launches] == [1, 2]
    schedule = json.loads((run / "bench-schedule.json").read_text())
    slots = [(s["cell"], s["launch"]) for s in schedule["slots"]]
    assert slots.index(("ok", 2)) > slots.index(("die", 1))
    m = launches[1]["rounds"][0]["metrics"]
    assert m["completed"] == 6 and m["errors"] == 0
    assert m["total_output_tokens"] == 6 * 8
    # FAKE_REJECT_IGNORE_EOS answers 422 to ignore_eos: transformers must never get it
    assert _errors(run / "cells" / "ok") == []


def test_server_that_exits_before_ready(outcome):
    _run, results = outcome
    r = results["exit"]
    assert (r.status, r.code) == (Status.FAILED, "server_failed")
    assert "exited with code 3" in r.message
    assert "no kernel image is available" in r.message  # the log's tail
    assert len(r.data["launches"]) == 1  # a broken stack is not relaunched
    assert r.data["launches"][0]["teardown"]["port_free"] is True


def test_server_that_never_becomes_ready(outcome):
    _, results = outcome
    r = results["never_ready"]
    assert (r.status, r.code) == (Status.FAILED, "server_failed")
    assert "not ready after 4 s" in r.message
    teardown = r.data["launches"][0]["teardown"]
    assert teardown["port_free"] is True and teardown["returncode"] is not None


def test_server_that_dies_during_the_run(outcome):
    run, results = outcome
    r = results["die"]
    assert (r.status, r.code) == (Status.FAILED, "server_failed")
    assert "exited with code 7 during the run" in r.message
    assert "dying on request" in r.message
    assert _errors(run / "cells" / "die")  # the requests it dropped are recorded


def test_http_500_mid_run(outcome):
    run, results = outcome
    r = results["http500"]
    assert r.status is Status.OK
    errors = _errors(run / "cells" / "http500")
    assert errors and all(e.startswith("HTTP 500") for e in errors)
    m = r.data["launches"][0]["rounds"][0]["metrics"]
    # warm-up is request 1; the measured ones are 2..7, and every third one fails;
    # two launches of one round each
    assert m["errors"] == 2 and len(errors) == 4
    assert m["completed"] + m["errors"] == 6
    assert [f.code for f in r.findings] == ["SM-BENCH-REQUEST-ERRORS"]


def test_dropped_connections(outcome):
    run, results = outcome
    r = results["drop"]
    assert r.status is Status.OK
    errors = _errors(run / "cells" / "drop")
    assert errors
    assert all("dropped" in e or "Payload" in e or "Disconnected" in e for e in errors), errors
    m = r.data["launches"][0]["rounds"][0]["metrics"]
    assert m["completed"] > 0 and m["errors"] > 0


def test_malformed_sse(outcome):
    run, results = outcome
    errors = _errors(run / "cells" / "malformed")
    assert errors and all("malformed SSE data" in e for e in errors)
    assert results["malformed"].status is Status.OK


def test_no_usage_falls_back_to_counting_chunks(outcome):
    run, results = outcome
    m = results["no_usage"].data["launches"][0]["rounds"][0]["metrics"]
    assert m["usage_reported"] == 0
    assert m["total_output_tokens"] == 6 * 8
    rec = json.loads(
        (run / "cells" / "no_usage" / "requests-L1-R1.jsonl").read_text().split("\n")[0]
    )
    assert rec["output_tokens_source"] == "chunks"


def test_interrupt_then_resume(tmp_path):
    run = RunDir(tmp_path / "run")
    spec = _spec(tmp_path, ("a",), launches=2)
    envs = {"a": _env("ok")}

    def stop_at_second_launch(cell: str, msg: str) -> None:
        if msg.startswith("launch 2/"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_bench_phase(
            spec, run, ["a"], environments=envs, order="sequential", progress=stop_at_second_launch
        )
    partial = json.loads((run.path / "cells" / "a" / "bench.json").read_text())
    assert partial["status"] == "interrupted"
    assert [ln["index"] for ln in partial["data"]["launches"]] == [1]
    first_log = (run.path / "cells" / "a" / "server-L1.log").read_bytes()

    messages: list[str] = []
    results = run_bench_phase(
        spec,
        run,
        ["a"],
        environments=envs,
        order="sequential",
        progress=lambda c, m: messages.append(m),
    )
    assert results["a"].status is Status.OK
    assert [ln["index"] for ln in results["a"].data["launches"]] == [1, 2]
    assert not any(m.startswith("launch 1/") for m in messages)  # resumed, not redone
    assert (run.path / "cells" / "a" / "server-L1.log").read_bytes() == first_log

    again = run_bench_phase(
        spec,
        run,
        ["a"],
        environments=envs,
        order="sequential",
        progress=lambda c, m: messages.append(m),
    )
    assert again["a"].finished == results["a"].finished  # complete: reused as is


def test_external_engine_starts_nothing_and_reads_server_info(tmp_path):
    import dataclasses
    import os
    import subprocess

    from stackmatrix.bench.server import free_port, port_in_use

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FAKE), "--host", "127.0.0.1", "--port", str(port)],
        env={**os.environ, "FAKE_MODE": "ok", "FAKE_ATTENTION": "triton"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        base = _spec(tmp_path, ("ext",), launches=1)
        assert base.bench is not None
        bench = dataclasses.replace(base.bench, engine="external", url=f"http://127.0.0.1:{port}")
        spec = dataclasses.replace(base, bench=bench)
        results = run_bench_phase(
            spec, RunDir(tmp_path / "run"), ["ext"], environments={}, order="interleaved"
        )
        r = results["ext"]
        assert r.status is Status.OK, r.message
        assert r.data["engine_version"] == "0.5.9-fake"
        assert r.data["effective_config"]["attention_backend"] == "triton"
        assert "port" not in r.data["effective_config"]
        assert r.data["server_info"]["internal_states"][0]["last_gen_throughput"] == 12.5
        assert r.data["launches"][0]["teardown"] is None
        assert proc.poll() is None and port_in_use(port)  # still running: not ours to stop
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# --- the launch plan of every session of a results directory is kept: a cell run later
# with --cell (as flashmla was on the H200) must not replace how the first cells were
# interleaved, and a resume with nothing left adds no empty session


def _slots(plan: dict[str, Any]) -> list[tuple[str, int]]:
    return [(s["cell"], s["launch"]) for s in plan["slots"]]


def test_a_later_cell_adds_a_session(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ("a", "b", "c"), launches=2)
    run = RunDir(tmp_path / "run")
    envs = {c: _env("ok") for c in ("a", "b", "c")}
    first = run_bench_phase(spec, run, ["a", "b"], environments=envs, order="interleaved")
    assert {r.status for r in first.values()} == {Status.OK}
    later = run_bench_phase(spec, run, ["c"], environments=envs, order="interleaved")
    assert later["c"].status is Status.OK
    doc = json.loads((run.path / "bench-schedule.json").read_text())
    assert _slots(doc) == [("c", 1), ("c", 2)]  # this session's plan
    sessions = doc["sessions"]
    assert [_slots(s) for s in sessions] == [
        [("a", 1), ("b", 1), ("a", 2), ("b", 2)],
        [("c", 1), ("c", 2)],
    ]
    assert all(s["started"] for s in sessions)
    # nothing left to run: the record stays as it is
    run_bench_phase(spec, run, ["a", "b", "c"], environments=envs, order="interleaved")
    again = json.loads((run.path / "bench-schedule.json").read_text())
    assert again["sessions"] == sessions


def test_an_old_or_foreign_schedule_file(tmp_path: Path) -> None:
    path = tmp_path / "bench-schedule.json"
    path.write_text(json.dumps({"order": "sequential", "slots": [{"cell": "a", "launch": 1}]}))
    assert schedule.earlier_sessions(path) == [
        {"order": "sequential", "slots": [{"cell": "a", "launch": 1}]}
    ]
    path.write_text("[1, 2]")
    assert schedule.earlier_sessions(path) == []
    path.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"sessions": [{"slots": []}]}))
    path.symlink_to(target)
    assert schedule.earlier_sessions(path) == []  # a link is never read through
