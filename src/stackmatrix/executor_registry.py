"""The executors stackmatrix knows: where a run's launches run, one entry each.

An executor is a function of (`pipeline.RunOptions`, `pipeline.Progress`) to
`pipeline.RunSummary`, named here by its module and function so that nothing heavy is
imported until a run picks it (`executor.get_executor`). `keys` are the `[executor]`
settings it reads (fields of `spec_model.Executor`): the spec refuses a key that its
explicitly named kind does not read. This module imports nothing of stackmatrix and
no dataclasses: the CLI's parser reads its names at start (`spec_names.EXECUTORS`).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["EXECUTORS", "NAMES", "ExecutorEntry", "find"]


class ExecutorEntry(NamedTuple):
    name: str
    target: str  # "module:function", the executor itself
    keys: tuple[str, ...]  # the [executor] settings it reads, besides `kind`
    summary: str  # what it does, for --help and errors


EXECUTORS: tuple[ExecutorEntry, ...] = (
    ExecutorEntry(
        name="local",
        target="stackmatrix.pipeline:run_pipeline",
        keys=(),
        summary="every phase on this host",
    ),
    ExecutorEntry(
        name="slurm",
        target="stackmatrix.executor.slurm:run_slurm",
        keys=(
            "partition",
            "account",
            "gpus",
            "cpus",
            "time_limit",
            "constraint",
            "nodelist",
            "container_image",
            "container_mounts",
            "poll_s",
        ),
        summary="builds and checks here, each block of launches a Slurm job on one node",
    ),
)
NAMES: tuple[str, ...] = tuple(e.name for e in EXECUTORS)
_BY_NAME = {e.name: e for e in EXECUTORS}


def find(name: str) -> ExecutorEntry | None:
    return _BY_NAME.get(name)
