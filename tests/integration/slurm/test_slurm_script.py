"""The batch script and sbatch's argv from hostile values, and the [executor] table:
no Slurm needed. The script is run for real by sh with a stand-in interpreter that
writes down the argv it was given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackmatrix.errors import SpecError
from stackmatrix.executor._script import BlockCommand, sbatch_argv, script_text
from stackmatrix.spec_model import Executor
from stackmatrix.specfile import parse_spec

HOSTILE = "a b'c\"d $(touch pwned) `touch pwned2` ;touch pwned3 %j\\n*"

RECORDER = """#!{python}
import json, os, sys
with open(os.environ["ARGV_OUT"], "w") as fh:
    json.dump({{"argv": sys.argv[1:], "cwd": os.getcwd(),
               "pythonpath": os.environ.get("PYTHONPATH", "")}}, fh)
"""


def _command(root: Path) -> BlockCommand:
    return BlockCommand(
        spec=root / f"spec {HOSTILE}.toml",
        run_dir=root / f"run {HOSTILE}",
        work_dir=root / f"work {HOSTILE}",
        block=2,
        order="balanced",
        order_seed=7,
        cells=(f"c{HOSTILE}", "-x"),
        backend="venv",
    )


def test_the_script_runs_exactly_the_commands_argv(tmp_path: Path) -> None:
    recorder = tmp_path / "python"
    recorder.write_text(RECORDER.format(python=sys.executable))
    recorder.chmod(0o755)
    cwd = tmp_path / f"cwd {HOSTILE}"
    cwd.mkdir()
    command = _command(tmp_path)
    script = tmp_path / "block.sh"
    script.write_text(script_text(command, Executor(kind="slurm"), cwd=cwd, python=str(recorder)))
    out = tmp_path / "argv.json"
    env = {**os.environ, "ARGV_OUT": str(out), "PYTHONPATH": "/elsewhere"}
    subprocess.run(["sh", str(script)], cwd=tmp_path, env=env, check=True, timeout=30)
    seen = json.loads(out.read_text())
    assert seen["argv"] == command.argv(str(recorder))[1:]
    assert Path(seen["cwd"]) == cwd.resolve()
    assert seen["pythonpath"].endswith(":/elsewhere")
    assert Path(seen["pythonpath"].split(":")[0], "stackmatrix", "cli.py").is_file()
    assert not list(tmp_path.rglob("pwned*"))


def test_a_container_runs_the_same_argv_through_srun(tmp_path: Path) -> None:
    executor = Executor(
        kind="slurm",
        container_image="nvcr.io#nvidia/pytorch:24.01-py3",
        container_mounts=("/data:/data:ro",),
    )
    text = script_text(_command(tmp_path), executor, cwd=tmp_path, python="/py")
    last = text.strip().splitlines()[-1]
    assert last.startswith("exec srun --ntasks=1 '--container-image=nvcr.io#nvidia/")
    assert "--container-mounts=/data:/data:ro /py -m stackmatrix _block" in last


def test_sbatch_options_are_one_word_each_and_percent_is_escaped(tmp_path: Path) -> None:
    executor = Executor(
        kind="slurm",
        partition="gpu",
        account="team-a",
        gpus=8,
        cpus=16,
        time_limit="02:00:00",
        constraint="h200&ib",
        nodelist="n[01-04]",
    )
    log_dir = tmp_path / "results 100%"
    argv = sbatch_argv(
        executor,
        script=tmp_path / "s.sh",
        log_dir=log_dir,
        log_stem="cycle-1",
        job_name="stackmatrix-x-cycle-1",
        after="41",
    )
    assert argv[0] == "sbatch" and argv[-1] == str(tmp_path / "s.sh")
    for option in (
        "--partition=gpu",
        "--account=team-a",
        "--gpus=8",
        "--cpus-per-task=16",
        "--time=02:00:00",
        "--constraint=h200&ib",
        "--nodelist=n[01-04]",
        "--dependency=afterany:41",
        "--requeue",
    ):
        assert option in argv
    (output,) = [a for a in argv if a.startswith("--output=")]
    assert output == f"--output={tmp_path.resolve()}/results 100%%/cycle-1.%j.out"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('partition = "--wrap=rm"', "executor.partition"),
        ('partition = "a b"', "executor.partition"),
        ('time_limit = "two hours"', "executor.time_limit"),
        ('kind = "k8s"', "executor.kind"),
        ("gpus = -1", "executor.gpus"),
        ('container_mounts = ["relative:/x"]', "executor.container_mounts[0]"),
        ('partiton = "gpu"', "did you mean 'partition'"),
    ],
)
def test_a_bad_executor_table_says_which_key(table: str, key: str) -> None:
    import tomllib

    raw = tomllib.loads(f'name = "x"\n[[cell]]\nid = "a"\n[executor]\n{table}\n')
    with pytest.raises(SpecError) as caught:
        parse_spec(raw)
    assert key in caught.value.message


def test_the_executor_table_is_read_and_local_is_the_default() -> None:
    import tomllib

    base = 'name = "x"\n[[cell]]\nid = "a"\n'
    assert parse_spec(tomllib.loads(base)).executor == Executor()
    raw = tomllib.loads(
        base + '[executor]\nkind = "slurm"\npartition = "gpu"\ngpus = 8\n'
        'time_limit = "1-00:00:00"\nnodelist = "n[01-02]"\n'
    )
    executor = parse_spec(raw).executor
    assert (executor.kind, executor.partition, executor.gpus) == ("slurm", "gpu", 8)
    assert (executor.time_limit, executor.nodelist) == ("1-00:00:00", "n[01-02]")
