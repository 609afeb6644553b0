"""A real one-node Slurm cluster on this machine (scripts/start-slurm.sh starts it),
with job accounting (slurmdbd, so sacct lists the jobs). Missing Slurm or accounting
fails the tests under CI=true; elsewhere they are skipped, saying why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DAEMONS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "slurmctld", "slurmd", "munged")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"Slurm is needed under CI and {reason}; scripts/setup-host.sh starts it")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_node() -> str:
    """The node's name, once sinfo shows it usable (the cluster started when needed)."""
    missing = [t for t in DAEMONS if shutil.which(t) is None]
    if missing:
        _unavailable(f"{', '.join(missing)} not installed (Debian: slurm-wlm, munge)")
    if os.geteuid() != 0:
        _unavailable("starting Slurm here needs root")
    start = subprocess.run(
        ["bash", str(ROOT / "scripts" / "start-slurm.sh")],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if start.returncode != 0:
        pytest.fail(f"scripts/start-slurm.sh failed:\n{start.stdout}\n{start.stderr}")
    node = subprocess.run(
        ["sinfo", "--noheader", "--format=%n"], capture_output=True, text=True, timeout=30
    ).stdout.split()
    assert node, "sinfo lists no node after start-slurm.sh"
    return node[0]


@pytest.fixture(scope="module")
def accounting(slurm_node: str) -> str:
    """The node's name, once sacct answers from slurmdbd's records."""
    missing = [t for t in ("sacct", "sacctmgr", "slurmdbd") if shutil.which(t) is None]
    if missing:
        _unavailable(f"{', '.join(missing)} not installed (Debian: slurmdbd, mariadb-server)")
    probe = subprocess.run(
        ["sacct", "--noheader", "--allocations", "--jobs=1", "--format=JobID"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        _unavailable(f"sacct has no accounting here: {probe.stderr.strip()!r}")
    return slurm_node
