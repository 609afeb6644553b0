"""Where a run's launches run: the executors, one registry.

    local    this host (pipeline.run_pipeline), the default
    slurm    Slurm jobs, one per block on one node (slurm.py: the submitting host;
             block.py: a job on its node; _script: the batch script and sbatch's argv;
             _slurmctl: sbatch, squeue, scontrol, sacct, scancel; _plan: what is left;
             _records: RUN/slurm/)

An executor is a function of (RunOptions, Progress) to RunSummary, registered in
executor_registry.py; docs/executors.md says how another scheduler (Kubernetes Jobs)
maps onto it."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from stackmatrix import executor_registry
from stackmatrix.errors import UsageError
from stackmatrix.pipeline import Progress, RunOptions, RunSummary

Executor = Callable[[RunOptions, Progress], RunSummary]


def get_executor(kind: str) -> Executor:
    """The executor of `kind` (executor_registry.py), imported now."""
    entry = executor_registry.find(kind)
    if entry is None:
        known = ", ".join(executor_registry.NAMES)
        raise UsageError(f"unknown executor {kind!r}; choose one of {known}")
    module, _, function = entry.target.partition(":")
    return cast(Executor, getattr(importlib.import_module(module), function))
