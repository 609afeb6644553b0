"""Where a run's launches run: the executors, one registry.

    local    this host (pipeline.run_pipeline), the default
    slurm    Slurm jobs, one per block on one node (slurm.py: the submitting host;
             block.py: a job on its node; _script: the batch script and sbatch's argv;
             _slurmctl: sbatch, squeue, scontrol, sacct, scancel; _plan: what is left;
             _records: RUN/slurm/)

An executor is a function of (RunOptions, Progress) to RunSummary; docs/executors.md
says how another scheduler (Kubernetes Jobs) maps onto it."""

from __future__ import annotations

from collections.abc import Callable

from stackmatrix.errors import UsageError
from stackmatrix.pipeline import Progress, RunOptions, RunSummary

Executor = Callable[[RunOptions, Progress], RunSummary]


def get_executor(kind: str) -> Executor:
    if kind == "local":
        from stackmatrix.pipeline import run_pipeline

        return run_pipeline
    if kind == "slurm":
        from stackmatrix.executor.slurm import run_slurm

        return run_slurm
    raise UsageError(f"unknown executor {kind!r}; choose local or slurm")
