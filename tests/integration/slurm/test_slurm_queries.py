"""What the executor makes of Slurm's answers, with stand-in squeue/scontrol/sacct/
scancel on PATH (shell scripts that print what a real one prints, and note their argv)."""

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
    _tool(bin_dir, "squeue", 'echo "12|TIMEOUT|TimeLimit|gpu01"\necho "13|PENDING|Resources|"')
    line = ("JobId=12 JobName=stackmatrix-x-cycle-1 JobState=TIMEOUT Reason=TimeLimit "
            "Dependency=(null) ExitCode=0:15 NodeList=gpu01 StdOut=/a b/c.out")  # fmt: skip
    _tool(bin_dir, "scontrol", f'echo "{line}"')
    found = _slurmctl.states(["12", "13"])
    assert found["12"] == _slurmctl.JobState(job_id="12", state="TIMEOUT", reason="TimeLimit",
                                             node="gpu01", exit_code="0:15")  # fmt: skip
    assert found["12"].terminal and not found["12"].ok
    assert found["13"].state == "PENDING" and found["13"].reason == "Resources"
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
