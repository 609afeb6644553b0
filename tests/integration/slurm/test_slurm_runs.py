"""`stackmatrix run --executor slurm` through real sbatch on a one-node cluster: every
block a Slurm job that sacct lists, a job cancelled mid-bench with scancel, a drained
node and a resume, a partition that does not exist, a host without sbatch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

SPEC = """
name = "slurm-e2e"
baseline = "tf517"
targets = ["sm_90"]
order = "balanced"

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
launches = 2
rounds = 1
ready_timeout_s = 180
steady_warmup = false

[bench.workload]
input_len = 16
output_len = 8
num_prompts = 2
warmup = 1
request_timeout_s = 60

[executor]
kind = "slurm"
poll_s = 1
"""

CELLS = ("tf517", "tf523")
RUN_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Environments and the tiny model, shared by this module's runs (built once)."""
    return tmp_path_factory.mktemp("slurm-work")


def spec_in(root: Path, extra: str = "") -> Path:
    path = root / "spec.toml"
    path.write_text(SPEC + extra)
    return path


def env_for(work: Path) -> dict[str, str]:
    return {**os.environ, "STACKMATRIX_WORK_DIR": str(work), "PYTHONUNBUFFERED": "1"}


def start(root: Path, work: Path, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "stackmatrix", "run", "spec.toml", *args]
    return subprocess.Popen(
        argv,
        cwd=root,
        env=env_for(work),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    return proc.returncode, out


def run(root: Path, work: Path, *args: str) -> tuple[int, str]:
    return finish(start(root, work, *args))


def jobs(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "slurm" / "jobs.json"
    return json.loads(path.read_text())["jobs"] if path.exists() else []


def job_of(run_dir: Path, block: int) -> dict[str, Any] | None:
    found = [j for j in jobs(run_dir) if j["block"] == block]
    return found[-1] if found else None


def launches(run_dir: Path, cell: str) -> list[dict[str, Any]]:
    data = json.loads((run_dir / "cells" / cell / "bench.json").read_text())
    return [ln for ln in data["data"]["launches"] if ln.get("status", "ok") == "ok"]


def wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {what}:\n{proc.communicate()[0]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def processes_of(job_id: str) -> list[int]:
    """Processes that still run with this job's SLURM_JOB_ID (its script, stackmatrix,
    a server it started)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"SLURM_JOB_ID={job_id}".encode() in environ:
            found.append(int(proc.name))
    return found


def slurm_job(job_id: str) -> str:
    return subprocess.run(
        ["scontrol", "--oneliner", "show", "job", job_id],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


@pytest.fixture(scope="module")
def cpu_run(
    slurm_node: str, work: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, str]:
    """The CPU spec run once through sbatch (its folder, results, console), for the
    tests that look at what it left."""
    root = tmp_path_factory.mktemp("cpu-run")
    spec_in(root)
    # a results directory whose name a shell or sbatch would expand: quoted everywhere
    out = root / "run 'q' %j $(touch pwned)"
    rc, console = run(root, work, "--output", str(out))
    assert rc == 0, console
    return root, out, console


def test_every_block_is_a_slurm_job_and_the_report_is_the_local_one(
    slurm_node: str, work: Path, cpu_run: tuple[Path, Path, str]
) -> None:
    tmp_path, out, console = cpu_run
    assert not (tmp_path / "pwned").exists()
    recorded = jobs(out)
    assert [j["block"] for j in recorded] == [0, 1, 2], recorded
    assert all(j["state"] == "COMPLETED" and j["node"] == slurm_node for j in recorded)
    for job in recorded:
        name = "prepare" if job["block"] == 0 else f"cycle-{job['block']}"
        assert f"JobName=stackmatrix-slurm-e2e-{name} " in slurm_job(job["job_id"])
        assert (out / "slurm" / job["log"]).is_file()
        assert f"submitted job {job['job_id']}" in console
    for cell in CELLS:
        done = launches(out, cell)
        assert [ln["index"] for ln in done] == [1, 2]
        for ln in done:  # launch k of every cell ran in cycle k's job, on the node
            before = ln["env_facts"]["before"]
            assert before["slurm_job_id"] == job_of(out, ln["index"])["job_id"]  # type: ignore[index]
            assert before["host"] == slurm_node
    report = json.loads((out / "matrix.json").read_text())
    assert sorted(c["id"] for c in report["cells"]) == sorted(CELLS)
    assert [len(c["launches"]) for c in report["cells"]] == [2, 2]
    assert "tf523" in (out / "matrix.md").read_text()
    # nothing is missing: a resume submits no job
    rc, console = run(tmp_path, work, "--output", str(out), "--resume")
    assert rc == 0, console
    assert len(jobs(out)) == 3, console
    assert "submitted job" not in console


def test_every_job_of_the_run_is_in_accounting(
    accounting: str, cpu_run: tuple[Path, Path, str]
) -> None:
    _, out, _ = cpu_run
    ids = [j["job_id"] for j in jobs(out)]
    assert len(ids) == 3, jobs(out)
    want = {(i, "COMPLETED", accounting, "0:0") for i in ids}
    deadline = time.monotonic() + 60  # slurmctld hands a job's end to slurmdbd soon after
    while (listed := sacct(ids)) != want and time.monotonic() < deadline:
        time.sleep(1)
    assert listed == want


def sacct(ids: list[str]) -> set[tuple[str, ...]]:
    argv = [
        "sacct",
        "--noheader",
        "--parsable2",
        "--allocations",
        f"--jobs={','.join(ids)}",
        "--format=JobID,State,NodeList,ExitCode",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
    return {tuple(line.split("|")) for line in done.stdout.splitlines() if line}


def test_a_job_cancelled_mid_bench_is_recorded_and_its_launches_run_later(
    slurm_node: str, work: Path, tmp_path: Path
) -> None:
    spec_in(tmp_path)
    out = tmp_path / "run"
    proc = start(tmp_path, work, "--output", str(out))
    try:
        wait_for("cycle 1's job to start a server", lambda: _server_running(out, 1), proc)
        cancelled = job_of(out, 1)["job_id"]  # type: ignore[index]
        subprocess.run(["scancel", cancelled], check=True, timeout=30)
        rc, console = finish(proc)
    finally:
        _stop(proc)
    assert rc == 0, console
    record = job_of(out, 1)
    assert record is not None and record["state"] == "CANCELLED", jobs(out)
    assert f"failed: job {cancelled} CANCELLED" in console
    assert job_of(out, 2)["state"] == "COMPLETED"  # type: ignore[index]
    assert processes_of(cancelled) == []
    for cell in CELLS:  # the launch the cancel stopped ran in the next job, once
        assert [ln["index"] for ln in launches(out, cell)] == [1, 2]


def _server_running(out: Path, block: int) -> bool:
    job = job_of(out, block)
    if job is None or job["state"] != "RUNNING":
        return False
    return any(
        b"transformers" in Path(f"/proc/{pid}/cmdline").read_bytes()
        for pid in processes_of(job["job_id"])
        if Path(f"/proc/{pid}/cmdline").exists()
    )


def test_a_drained_node_then_a_stop_keeps_the_work_and_resume_completes(
    slurm_node: str, work: Path, tmp_path: Path
) -> None:
    spec_in(tmp_path)
    out = tmp_path / "run"
    proc = start(tmp_path, work, "--output", str(out))
    try:
        wait_for("cycle 1's job to run", lambda: _state(out, 1) == "RUNNING", proc)
        _scontrol_node(slurm_node, "DRAIN", "Reason=stackmatrix test drain")
        wait_for(
            "cycle 2's job to wait for the drained node", lambda: _waits_for_node(out, 2), proc
        )
        proc.send_signal(signal.SIGTERM)
        rc, console = finish(proc)
    finally:
        _stop(proc)
        _scontrol_node(slurm_node, "RESUME")
    assert rc == 128 + signal.SIGTERM, console
    stopped = job_of(out, 2)
    assert stopped is not None and stopped["state"] == "CANCELLED", jobs(out)
    assert stopped["reason"] == "cancelled by stackmatrix on SIGTERM"
    assert "CANCELLED" in slurm_job(stopped["job_id"])
    for job in jobs(out):
        assert processes_of(job["job_id"]) == []
    first = {cell: launches(out, cell) for cell in CELLS}
    assert all([ln["index"] for ln in done] == [1] for done in first.values()), first
    before = len(jobs(out))

    rc, console = run(tmp_path, work, "--output", str(out), "--resume")
    assert rc == 0, console
    resumed = jobs(out)[before:]
    assert [j["block"] for j in resumed] == [2], resumed  # only what was missing
    assert resumed[0]["state"] == "COMPLETED"
    for cell in CELLS:
        done = launches(out, cell)
        assert [ln["index"] for ln in done] == [1, 2]
        assert done[0] == first[cell][0]  # the launch done before the drain, as it was


def _state(out: Path, block: int) -> str | None:
    job = job_of(out, block)
    return None if job is None else str(job["state"])


def _waits_for_node(out: Path, block: int) -> bool:
    job = job_of(out, block)
    return job is not None and job["state"] == "PENDING" and job["reason"] not in ("", "Dependency")


def _scontrol_node(node: str, state: str, *more: str) -> None:
    subprocess.run(
        ["scontrol", "update", f"NodeName={node}", f"State={state}", *more], check=True, timeout=30
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)


def test_a_partition_that_does_not_exist_fails_every_cell_with_slurms_word(
    slurm_node: str, work: Path, tmp_path: Path
) -> None:
    spec_in(tmp_path, 'partition = "no-such-partition"\n')
    out = tmp_path / "run"
    started = time.monotonic()
    rc, console = run(tmp_path, work, "--output", str(out))
    assert rc == 0, console
    assert time.monotonic() - started < 120
    (refused,) = jobs(out)
    assert refused["state"] == "SUBMIT_FAILED" and "partition" in refused["reason"].lower()
    for cell in CELLS:
        build = json.loads((out / "cells" / cell / "build.json").read_text())
        assert build["status"] == "failed" and build["code"] == "slurm_job_failed"
        assert "partition" in build["message"].lower()


def test_without_sbatch_the_run_says_what_is_missing(tmp_path: Path, work: Path) -> None:
    spec_in(tmp_path)
    env = {**env_for(work), "PATH": str(tmp_path / "empty")}
    proc = subprocess.run(
        [sys.executable, "-m", "stackmatrix", "run", "spec.toml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 4, proc.stderr
    assert "'sbatch'" in proc.stderr and "--executor local" in proc.stderr
    assert not any(tmp_path.glob("reports/*/slurm"))


def test_a_requeued_job_does_not_run_a_launch_twice(
    slurm_node: str, work: Path, tmp_path: Path
) -> None:
    spec_in(tmp_path)
    out = tmp_path / "run"
    proc = start(tmp_path, work, "--output", str(out))
    try:
        wait_for("cycle 1's job to start a server", lambda: _server_running(out, 1), proc)
        requeued = job_of(out, 1)["job_id"]  # type: ignore[index]
        subprocess.run(["scontrol", "requeue", requeued], check=True, timeout=30)
        rc, console = finish(proc)
    finally:
        _stop(proc)
    assert rc == 0, console
    assert [(j["block"], j["state"]) for j in jobs(out)] == [
        (0, "COMPLETED"),
        (1, "COMPLETED"),
        (2, "COMPLETED"),
    ], console
    block = json.loads((out / "slurm" / "block-1.json").read_text())
    assert (block["job_id"], block["restarts"]) == (requeued, "1")
    for cell in CELLS:
        done = launches(out, cell)
        assert [ln["index"] for ln in done] == [1, 2]
        assert done[0]["env_facts"]["before"]["slurm_job_id"] == requeued
