"""The [executor] table of a spec: where the launches run (docs/executors.md).

Every value reaches Slurm as one argv word (`--partition=VALUE`) or, inside the batch
script, quoted; still, a value that cannot be a Slurm name is refused here with its key
path, so a typo fails before anything is submitted."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from stackmatrix import executor_registry
from stackmatrix._validate import Problems
from stackmatrix.spec_model import EXECUTORS, Executor
from stackmatrix.specfile._values import (
    get_choice,
    get_float,
    get_int,
    get_str,
    get_str_list,
    get_table,
)

EXECUTOR_KEYS = tuple(f.name for f in fields(Executor))

# a Slurm name, node list or feature expression: no blank, no leading dash
_NAME_RE = re.compile(r"^[A-Za-z0-9_.@%+=,:/\[\]()&|!*-]{1,256}$")
_NAME = "a Slurm name without blanks (letters, digits, _ . - and node-list or feature syntax)"
# sbatch --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_TIME_RE = re.compile(r"^(\d+-)?\d+(:\d{2}){0,2}$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9_./:@#+=-]{1,512}$")
_MOUNT_RE = re.compile(r"^/[^\s,]*(:/[^\s,]*)?(:(ro|rw))?$")


def parse_executor(raw: Mapping[str, Any], p: Problems) -> Executor:
    t = get_table(raw, "executor", "", p)
    p.unknown_keys("executor", t, EXECUTOR_KEYS)
    d = Executor()
    kind = get_choice(t, "kind", "executor", EXECUTORS, p) or d.kind
    _check_keys(t, kind, p)
    return Executor(
        kind=kind,
        partition=_name(t, "partition", p),
        account=_name(t, "account", p),
        gpus=get_int(t, "gpus", "executor", p, minimum=0, maximum=1024) or 0,
        cpus=get_int(t, "cpus", "executor", p, minimum=1, maximum=100_000),
        time_limit=_matching(t, "time_limit", p, _TIME_RE, "a Slurm time (e.g. 30, 02:00:00)"),
        constraint=_name(t, "constraint", p),
        nodelist=_name(t, "nodelist", p),
        container_image=_matching(t, "container_image", p, _IMAGE_RE, "an image reference"),
        container_mounts=tuple(
            get_str_list(t, "container_mounts", "executor", p, _MOUNT_RE, "SRC[:DST[:ro|rw]]")
        ),
        poll_s=get_float(t, "poll_s", "executor", p, 0.5, 600.0) or d.poll_s,
    )


def _check_keys(t: Mapping[str, Any], kind: str, p: Problems) -> None:
    """A kind named in the spec reads its own keys only (executor_registry.py); without
    `kind`, every executor's keys may be there for `run --executor`."""
    entry = executor_registry.find(kind)
    if "kind" not in t or entry is None:
        return
    for key in t:
        if key != "kind" and key in EXECUTOR_KEYS and key not in entry.keys:
            readers = [e.name for e in executor_registry.EXECUTORS if key in e.keys]
            p.add(
                f"executor.{key}",
                f'read by kind = "{readers[0]}" only, and this spec\'s kind is "{kind}"'
                if readers
                else f'read by no executor, and this spec\'s kind is "{kind}"',
            )


def _name(t: Mapping[str, Any], key: str, p: Problems) -> str | None:
    return _matching(t, key, p, _NAME_RE, _NAME)


def _matching(
    t: Mapping[str, Any], key: str, p: Problems, pattern: re.Pattern[str], what: str
) -> str | None:
    value = get_str(t, key, "executor", p)
    if value is not None and (value.startswith("-") or not pattern.match(value)):
        p.add(f"executor.{key}", f"{value!r} is not {what}")
        return None
    return value
