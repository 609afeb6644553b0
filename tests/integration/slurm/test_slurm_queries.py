"""What the executor makes of Slurm's answers, with stand-in squeue/scontrol/sacct/
scancel on PATH (shell scripts that print what a real one prints, and note their argv),
and sacct's own `--parsable2` lines read as they come from Slurm 22.05."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackmatrix.executor import _slurmctl


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "$@" >> "{bin_dir}/{name}.argv"\n{body}\n')
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", str(tmp_path))
    return tmp_path


def test_a_controller_that_does_not_answer_is_no_news(bin_dir: Path) -> None:
    _tool(bin_dir, "squeue", 'echo "squeue: error: Unable to contact slurm controller" >&2\nexit 1')
    assert _slurmctl.states(["12", "13"]) == {}


def test_an_ended_job_gets_its_exit_code_and_reason_from_scontrol(bin_dir: Path) -> None:
    queued = 'echo "12|TIMEOUT|TimeLimit|gpu01|ci|(null)"\necho "13|PENDING|Resources||ci|a|b"'
    _tool(bin_dir, "squeue", queued)
    line = (
        "JobId=12 JobName=stackmatrix-x-cycle-1 JobState=TIMEOUT Reason=TimeLimit "
        "Dependency=(null) ExitCode=0:15 NodeList=gpu01 StdOut=/a b/c.out"
    )
    _tool(bin_dir, "scontrol", f'echo "{line}"')
    found = _slurmctl.states(["12", "13"])
    assert found["12"] == _slurmctl.JobState(
        job_id="12", state="TIMEOUT", reason="TimeLimit", node="gpu01", exit_code="0:15"
    )
    assert found["12"].terminal and not found["12"].ok
    assert found["13"].state == "PENDING" and found["13"].reason == "Resources"
    assert (found["13"].user, found["13"].comment) == ("ci", "a|b")  # a comment's own '|'
    assert found["12"].comment == ""
    assert not found["13"].terminal
    assert (bin_dir / "scontrol.argv").read_text() == "--oneliner show job 12\n"


def test_a_job_slurm_forgot_is_read_from_accounting_else_unknown(bin_dir: Path) -> None:
    _tool(bin_dir, "squeue", 'echo "slurm_load_jobs error: Invalid job id specified" >&2\nexit 1')
    _tool(bin_dir, "scontrol", 'echo "slurm_load_jobs error: Invalid job id specified"\nexit 1')
    _tool(bin_dir, "sacct", 'echo "7|CANCELLED by 0|None|gpu02|0:15"')
    assert _slurmctl.states(["7"])["7"].state == "CANCELLED"
    (bin_dir / "sacct").unlink()
    gone = _slurmctl.states(["7"])["7"]
    assert gone.state == _slurmctl.GONE and gone.terminal and "no record" in gone.reason


def test_cancel_names_job_ids_only(bin_dir: Path) -> None:
    _tool(bin_dir, "scancel", "exit 0")
    assert _slurmctl.cancel(["41", "42", "", "stackmatrix-x"]) == []
    assert (bin_dir / "scancel.argv").read_text() == "41 42\n"


def test_sbatch_refusing_says_sbatchs_words(bin_dir: Path) -> None:
    _tool(bin_dir, "sbatch", 'echo "sbatch: error: invalid partition specified: nope" >&2\nexit 1')
    with pytest.raises(_slurmctl.SubmitFailed, match="invalid partition specified: nope"):
        _slurmctl.submit(["sbatch", "--parsable", "x.sh"])
    _tool(bin_dir, "sbatch", 'echo "77;cluster"')
    assert _slurmctl.submit(["sbatch", "--parsable", "x.sh"]) == "77"


# `sacct --noheader --parsable2 --allocations --format=JobID,State,Reason,NodeList,ExitCode`
# as Slurm prints it for jobs that ended badly (a job cancelled while pending has no node)
SACCT_ENDED = """\
21|CANCELLED by 0|None|gpu01|0:15
22|TIMEOUT|None|gpu02|0:0
23|PREEMPTED|None|gpu03|0:15
24|NODE_FAIL|None|gpu04|1:0
25|OUT_OF_MEMORY|None|gpu05|0:125
26|CANCELLED by 1000|Dependency|None assigned|0:0
"""


def test_sacct_lines_of_jobs_that_ended_badly() -> None:
    ids = ["21", "22", "23", "24", "25", "26"]
    found = _slurmctl.parse_sacct(SACCT_ENDED + "21.batch|CANCELLED|None|gpu01|0:15\n", ids)
    assert {j: (s.state, s.node, s.exit_code) for j, s in found.items()} == {
        "21": ("CANCELLED", "gpu01", "0:15"),
        "22": ("TIMEOUT", "gpu02", "0:0"),
        "23": ("PREEMPTED", "gpu03", "0:15"),
        "24": ("NODE_FAIL", "gpu04", "1:0"),
        "25": ("OUT_OF_MEMORY", "gpu05", "0:125"),
        "26": ("CANCELLED", "", "0:0"),
    }
    assert found["26"].reason == "Dependency" and found["21"].reason == ""
    assert all(s.terminal and not s.ok for s in found.values())
    # a job asked for with --duplicates: its newest run, the last line, wins
    requeued = _slurmctl.parse_sacct(
        "30|REQUEUED|None|gpu01|0:15\n30|COMPLETED|None|gpu02|0:0", ["30"]
    )
    assert requeued["30"] == _slurmctl.JobState(
        job_id="30", state="COMPLETED", node="gpu02", exit_code="0:0"
    )
    assert _slurmctl.parse_sacct("garbage\n31|RUNNING|None\n", ["31"]) == {}


def test_an_ended_job_is_read_from_accounting_in_one_sacct_call(bin_dir: Path) -> None:
    queued = 'echo "22|TIMEOUT|TimeLimit|gpu02|ci|"\necho "40|RUNNING|None|gpu09|ci|x"'
    _tool(bin_dir, "squeue", queued)
    _tool(bin_dir, "sacct", "\n".join(f'echo "{ln}"' for ln in SACCT_ENDED.splitlines()))
    _tool(bin_dir, "scontrol", "exit 1")
    found = _slurmctl.states(["21", "22", "40"])  # 21: squeue forgot it
    assert (found["21"].state, found["21"].exit_code) == ("CANCELLED", "0:15")
    assert (found["22"].state, found["22"].node) == ("TIMEOUT", "gpu02")
    assert found["40"].state == "RUNNING"
    argv = (bin_dir / "sacct.argv").read_text()
    assert argv == (
        "--noheader --parsable2 --allocations --jobs=21,22 "
        "--format=JobID,State,Reason,NodeList,ExitCode\n"
    )
    assert not (bin_dir / "scontrol.argv").exists()


def test_without_accounting_or_its_record_the_end_comes_from_scontrol(bin_dir: Path) -> None:
    _tool(bin_dir, "squeue", 'echo "12|COMPLETED|None|gpu01|ci|"')
    line = "JobId=12 JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=gpu01"
    _tool(bin_dir, "scontrol", f'echo "{line}"')
    _tool(bin_dir, "sacct", 'echo "Slurm accounting storage is disabled" >&2\nexit 1')
    done = _slurmctl.states(["12"])["12"]
    assert (done.state, done.exit_code, done.node) == ("COMPLETED", "0:0", "gpu01")
    # slurmdbd not yet told that the job ended: scontrol's word, not a stale RUNNING
    _tool(bin_dir, "sacct", 'echo "12|RUNNING|None|gpu01|0:0"')
    assert _slurmctl.states(["12"])["12"].state == "COMPLETED"
    assert (bin_dir / "scontrol.argv").read_text().count("show job 12") == 2


def test_a_completed_job_keeps_no_pending_reason() -> None:
    """sacct keeps the reason a job last waited for (`116|COMPLETED|Dependency|vm|0:0`,
    as Slurm 22.05 printed it here): it says nothing of how the job ended."""
    found = _slurmctl.parse_sacct("116|COMPLETED|Dependency|vm|0:0\n", ["116"])
    assert found["116"] == _slurmctl.JobState(
        job_id="116", state="COMPLETED", node="vm", exit_code="0:0"
    )
    failed = _slurmctl.parse_sacct("117|FAILED|NonZeroExitCode|vm|3:0\n", ["117"])
    assert failed["117"].reason == "NonZeroExitCode"
