"""A block's batch script and the sbatch argv that submits it.

Nothing here is a shell string built from the spec: sbatch's options are argv words
(`--partition=VALUE`), and the script's one command is an argv list, each word passed
through shlex.quote. Slurm expands `%j`-style patterns in --output paths, so a `%` in
the results directory's path is doubled (sbatch's own escape)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import stackmatrix
from stackmatrix import layout
from stackmatrix.spec_model import Executor


@dataclass(frozen=True, kw_only=True)
class BlockCommand:
    """What a job runs on its node: `stackmatrix _block` for one block of this run."""

    spec: Path
    run_dir: Path
    work_dir: Path
    block: int  # 0: build and check; k >= 1: launch k of every cell (cycle k)
    order: str
    order_seed: int
    cells: tuple[str, ...] = ()
    backend: str | None = None
    force: bool = False

    def argv(self, python: str = sys.executable) -> list[str]:
        words = [python, "-m", "stackmatrix", "_block", str(self.spec.resolve())]
        words += ["--output", str(self.run_dir.resolve()), "--block", str(self.block)]
        words += ["--work-dir", str(self.work_dir.resolve()), "--order", self.order]
        words += ["--order-seed", str(self.order_seed)]
        for cell in self.cells:
            words += ["--cell", cell]
        if self.backend is not None:
            words += ["--backend", self.backend]
        if self.force:
            words.append("--force")
        return words


def package_root() -> Path:
    """The directory that holds the `stackmatrix` package this process imports."""
    return Path(stackmatrix.__file__).resolve().parent.parent


def script_text(
    command: BlockCommand, executor: Executor, *, cwd: Path, python: str = sys.executable
) -> str:
    """The batch script: the interpreter and import path of this host, explicitly
    (a job's environment need not have them), then the block's command."""
    argv = command.argv(python)
    if executor.container_image is not None:
        argv = [*_container_prefix(executor), *argv]
    pythonpath = str(package_root())
    lines = [
        "#!/bin/sh",
        f"# stackmatrix: block {command.block} of the run in {_comment(command.run_dir)}",
        f"PYTHONPATH={shlex.quote(pythonpath)}${{PYTHONPATH:+:$PYTHONPATH}}",
        "export PYTHONPATH",
        "cd " + shlex.quote(str(cwd.resolve())),
        "exec " + shlex.join(argv),
    ]
    return "\n".join(lines) + "\n"


def _container_prefix(executor: Executor) -> list[str]:
    """pyxis's srun options: the job's one step runs in the image (enroot)."""
    words = ["srun", "--ntasks=1", f"--container-image={executor.container_image}"]
    if executor.container_mounts:
        words.append("--container-mounts=" + ",".join(executor.container_mounts))
    return words


def _comment(path: Path) -> str:
    """A path in a comment line: one line, whatever the path holds."""
    return repr(str(path))


def sbatch_argv(
    executor: Executor,
    *,
    script: Path,
    log_dir: Path,
    log_stem: str,
    job_name: str,
    after: str | None,
    comment: str = "",
) -> list[str]:
    argv = ["sbatch", "--parsable", f"--job-name={job_name}", "--nodes=1", "--ntasks=1"]
    if comment:  # the run's tag: how a resume tells its own jobs (executor._records)
        argv.append(f"--comment={comment}")
    # our own stem, then sbatch's job-id pattern: a requeued job appends to its log
    log = f"{slurm_path(log_dir)}/{layout.slurm_log(log_stem, '%j')}"
    argv += [f"--output={log}", "--open-mode=append", "--requeue"]
    argv += _resource_options(executor)
    if after is not None:
        # afterany: a later block runs whatever became of the one before it (its
        # launches are recorded or not); blocks never write the results at once
        argv.append(f"--dependency=afterany:{after}")
    argv.append(str(script))
    return argv


def _resource_options(executor: Executor) -> Sequence[str]:
    options = {
        "partition": executor.partition,
        "account": executor.account,
        "time": executor.time_limit,
        "constraint": executor.constraint,
        "nodelist": executor.nodelist,
        "cpus-per-task": str(executor.cpus) if executor.cpus else None,
        "gpus": str(executor.gpus) if executor.gpus else None,
    }
    return [f"--{name}={value}" for name, value in options.items() if value is not None]


def slurm_path(path: Path) -> str:
    """An absolute path in a form sbatch does not expand (`%` is doubled)."""
    return str(path.resolve()).replace("%", "%%")
