"""A job is this run's only when Slurm says so: `run --executor slurm --resume` follows,
makes a dependency of and cancels a job of RUN/slurm/jobs.json only when squeue shows
it under our user with this run's tag as its comment. Slurm here is a fake on PATH
(one script answering as sbatch, squeue, scontrol, sacct and scancel from a state
file), enough for what the submitting host asks; tests/integration/slurm runs the
real one."""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stackmatrix.executor._records import run_tag

FAKE = r'''#!PYTHON
"""sbatch, squeue, scontrol, sacct and scancel, as this script's name says."""
import json, os, sys
from pathlib import Path

state = Path(os.environ["FAKE_SLURM_STATE"])
jobs = json.loads(state.read_text())
tool, args = Path(sys.argv[0]).name, sys.argv[1:]
with open(state.with_name("calls.jsonl"), "a") as fh:
    fh.write(json.dumps([tool, *args]) + "\n")
opt = lambda name: next((a.split("=", 1)[1] for a in args if a.startswith(name + "=")), "")
if tool == "sbatch":
    job_id = str(max(map(int, jobs), default=100) + 1)
    jobs[job_id] = {"state": os.environ.get("FAKE_SLURM_NEW", "COMPLETED"),
                    "user": os.environ["FAKE_SLURM_USER"], "name": opt("--job-name"),
                    "comment": opt("--comment")}
    print(job_id)
elif tool == "squeue":
    fields = {"i": None, "T": "state", "r": None, "N": None, "u": "user", "j": "name",
              "k": "comment"}
    for job_id in opt("--jobs").split(","):
        if job_id in jobs:
            line = opt("--format")
            for key, field in fields.items():
                value = job_id if key == "i" else jobs[job_id].get(field, "") if field else ""
                line = line.replace("%" + key, value or "(null)")
            print(line)
elif tool == "scontrol":
    job = jobs.get(args[-1])
    if job is None:
        sys.exit(1)
    print(f"JobId={args[-1]} JobState={job['state']} Reason=None ExitCode=0:0 NodeList=n1")
elif tool == "scancel":
    for job_id in args:
        if job_id in jobs:
            jobs[job_id]["state"] = "CANCELLED"
state.write_text(json.dumps(jobs))
'''
TOOLS = ("sbatch", "squeue", "scontrol", "sacct", "scancel")
SPEC = """
name = "own"
baseline = "a"

[[cell]]
id = "a"
backend = "current"

[bench]
engine = "transformers"
model = "m"
launches = 1

[executor]
kind = "slurm"
poll_s = 0.5
"""
ME = pwd.getpwuid(os.geteuid()).pw_name


def _slurm(tmp_path: Path, jobs: dict[str, dict[str, str]]) -> dict[str, str]:
    """The fake's state and the environment that puts it first on PATH."""
    bin_dir = tmp_path / "fake-slurm"
    bin_dir.mkdir()
    script = bin_dir / "fake.py"
    script.write_text(FAKE.replace("PYTHON", sys.executable, 1))
    script.chmod(0o755)
    for tool in TOOLS:
        (bin_dir / tool).symlink_to(script)
    (bin_dir / "state.json").write_text(json.dumps(jobs))
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_SLURM_STATE": str(bin_dir / "state.json"),
        "FAKE_SLURM_USER": ME,
    }


def _results(tmp_path: Path, env: dict[str, str]) -> Path:
    """An earlier invocation's results (its jobs ended at once: nothing ran)."""
    (tmp_path / "spec.toml").write_text(SPEC)
    out = tmp_path / "run"
    proc = _start(tmp_path, env, out)
    console, _ = proc.communicate(timeout=120)
    assert (out / "run.json").exists() and _calls(env), console
    Path(env["FAKE_SLURM_STATE"]).with_name("calls.jsonl").unlink()
    return out


def _forged(
    out: Path,
    env: dict[str, str],
    jobs: dict[str, dict[str, str]],
    recorded: list[dict[str, object]],
) -> None:
    """Job ids added to jobs.json, as anyone who can write the results directory can,
    and those jobs in Slurm's queue."""
    (out / "slurm" / "jobs.json").write_text(json.dumps({"schema_version": 1, "jobs": recorded}))
    state = Path(env["FAKE_SLURM_STATE"])
    state.write_text(json.dumps({**json.loads(state.read_text()), **jobs}))


def _start(tmp_path: Path, env: dict[str, str], out: Path, *args: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "stackmatrix", "run", "spec.toml", "--output", str(out), *args]
    return subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _calls(env: dict[str, str]) -> list[list[str]]:
    path = Path(env["FAKE_SLURM_STATE"]).with_name("calls.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _jobs(out: Path) -> dict[str, dict[str, str]]:
    data = json.loads((out / "slurm" / "jobs.json").read_text())
    return {j["job_id"]: j for j in data["jobs"] if j["job_id"]}


def test_a_running_job_of_another_user_or_run_is_left_alone(tmp_path: Path) -> None:
    env = _slurm(tmp_path, {})
    out = _results(tmp_path, env)
    _forged(
        out,
        env,
        {
            "4242": {
                "state": "RUNNING",
                "user": "someone-else",
                "name": "stackmatrix-own-prepare",
                "comment": run_tag(out),
            },
            "4343": {
                "state": "RUNNING",
                "user": ME,
                "name": "stackmatrix-own-cycle-1",
                "comment": run_tag(tmp_path / "other-run"),
            },
        },
        [
            {"block": 0, "job_id": "4242", "state": "RUNNING"},  # another user's
            {"block": 1, "job_id": "4343", "state": "RUNNING"},  # ours, another run's
        ],
    )
    proc = _start(tmp_path, env, out, "--resume")
    try:
        console, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()  # ours, started above: it followed a job that is not ours
        pytest.fail(f"the run did not end:\n{proc.communicate(timeout=30)[0]}")
    calls = _calls(env)
    submitted = [c for c in calls if c[0] == "sbatch"]
    assert [c for c in submitted if any("4242" in a or "4343" in a for a in c)] == []
    assert len(submitted) == 2, console  # prepare and cycle 1 again, after no one's job
    assert all(f"--comment={run_tag(out)}" in c for c in submitted)
    assert not any(c[0] == "scancel" for c in calls)
    assert "job 4242 left alone: Slurm says it is 'someone-else''s" in console
    assert "job 4343 left alone: its comment" in console
    recorded = _jobs(out)
    assert recorded["4242"]["state"] == recorded["4343"]["state"] == "NOT_OURS"


def test_sigterm_cancels_this_run_s_jobs_only(tmp_path: Path) -> None:
    env = _slurm(tmp_path, {})
    out = _results(tmp_path, env)
    _forged(
        out,
        env,
        {
            "4242": {
                "state": "RUNNING",
                "user": ME,
                "name": "stackmatrix-own-prepare",
                "comment": run_tag(out),
            },
            "4343": {
                "state": "PENDING",
                "user": ME,
                "name": "stackmatrix-own-cycle-1",
                "comment": "",
            },
        },
        [
            {"block": 0, "job_id": "4242", "state": "RUNNING"},  # ours: followed, cancelled
            {"block": 1, "job_id": "4343", "state": "PENDING"},  # no comment: not followed
        ],
    )
    proc = _start(tmp_path, {**env, "FAKE_SLURM_NEW": "PENDING"}, out, "--resume")
    deadline = time.monotonic() + 60
    while not any(c[0] == "sbatch" for c in _calls(env)):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()  # ours, started above
            pytest.fail(f"no job was submitted:\n{proc.communicate(timeout=30)[0]}")
        time.sleep(0.1)
    time.sleep(0.5)  # the job id recorded, the follow loop reached
    proc.send_signal(signal.SIGTERM)
    console, _ = proc.communicate(timeout=60)
    [sbatch] = [c for c in _calls(env) if c[0] == "sbatch"]
    assert "--dependency=afterany:4242" in sbatch, console  # cycle 1 after our prepare
    [scancel] = [c for c in _calls(env) if c[0] == "scancel"]
    assert "4242" in scancel and "4343" not in scancel, console
    assert "job 4343 left alone" in console
