"""Facts about the machine that explain noise: GPU clocks, temperature, other GPU
processes (nvidia-smi, where present) and the host's load average."""

from __future__ import annotations

import os
import shutil
import socket

from stackmatrix import _proc
from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.results import now_iso

GPU_FIELDS = (
    "index",
    "name",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "temperature.gpu",
    "power.draw",
    "utilization.gpu",
    "memory.used",
)
APP_FIELDS = ("pid", "process_name", "used_memory")


def has_nvidia_smi() -> bool:
    return shutil.which("nvidia-smi") is not None


def gpu_count() -> int:
    """GPUs nvidia-smi lists on this host (0 without nvidia-smi)."""
    rows = _query("--query-gpu=index", ("index",))
    return len(rows) if rows is not None else 0


def gpu_pids() -> list[int]:
    rows = _query("--query-compute-apps=pid", ("pid",))
    out = []
    for row in rows or []:
        try:
            out.append(int(row["pid"]))
        except ValueError:
            continue
    return out


def collect() -> JSONObject:
    """A snapshot: time, host load, and (where nvidia-smi exists) GPUs and their processes."""
    try:
        load: list[JSONValue] | None = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "time": now_iso(),
        # where the launch ran: under the Slurm executor a cycle is a node (its block)
        "host": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "loadavg": load,
        "cpu_count": os.cpu_count(),
        "gpus": _json(_query("--query-gpu=" + ",".join(GPU_FIELDS), GPU_FIELDS)),
        "gpu_processes": _json(_query("--query-compute-apps=" + ",".join(APP_FIELDS), APP_FIELDS)),
    }


def _json(rows: list[dict[str, str]] | None) -> JSONValue:
    """nvidia-smi's rows as JSON (copies: a list[dict[str, str]] is no list[JSONValue])."""
    return None if rows is None else [dict(row) for row in rows]


def _query(query: str, fields: tuple[str, ...]) -> list[dict[str, str]] | None:
    if not has_nvidia_smi():
        return None
    result = _proc.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], timeout=30.0)
    if not result.ok:
        return None
    rows = []
    for line in result.output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == len(fields):
            rows.append(dict(zip(fields, parts, strict=True)))
    return rows
