"""What the Slurm executor keeps in the results directory, under RUN/slurm/: the jobs
this run submitted (jobs.json, written by the submitting host alone), each block's
own record (block-K.json, written by its job on its node), the scripts and logs.

jobs.json is only a list of job ids: anyone who can write the results directory can add
one. A job is this run's only when Slurm says so: it is submitted with the run's tag
as its comment (`run_tag`, from the results directory's own path, never from a file
in it), and an earlier invocation's job is followed, waited for and cancelled only
when squeue shows it under our user with that comment; any other is NOT_OURS."""

from __future__ import annotations

import hashlib
import os
import pwd
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stackmatrix import _atomic, _nofollow, layout
from stackmatrix.errors import ResultsError
from stackmatrix.jsontypes import JSONObject

SCHEMA = 1
NOT_OURS = "NOT_OURS"  # a recorded job Slurm does not show as this run's: left alone


def jobs_dir(run_dir: Path) -> Path:
    """RUN/slurm, created; refused when it is a link (never written through)."""
    path = run_dir / layout.SLURM_DIR
    if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
        raise ResultsError(
            f"refusing to write into {path}: it is a link or not a directory; stackmatrix "
            "writes only into directories of its own"
        )
    path.mkdir(exist_ok=True)
    return path


def run_tag(run_dir: Path) -> str:
    """The comment every job of this run is submitted with: a digest of the results
    directory's resolved path, so that a job of another run (or copied results) never
    carries it."""
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]
    return f"stackmatrix-run:{digest}"


def our_user() -> str:
    """The user Slurm shows our jobs under (squeue %u)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a uid without a passwd entry: squeue shows the number
        return str(os.geteuid())


def block_name(block: int) -> str:
    return "prepare" if block == 0 else f"cycle-{block}"


@dataclass(frozen=True, kw_only=True)
class JobRecord:
    """One submitted job: its block and what Slurm last said of it."""

    block: int
    job_id: str = ""  # empty: sbatch refused it (see reason)
    submitted: str = ""
    state: str = "SUBMITTED"
    reason: str = ""
    node: str = ""
    exit_code: str = ""
    log: str = ""

    @property
    def terminal(self) -> bool:
        from stackmatrix.executor._slurmctl import TERMINAL

        return not self.job_id.isdigit() or self.state in TERMINAL or self.state == NOT_OURS

    def to_dict(self) -> JSONObject:
        return {
            "block": self.block,
            "job_id": self.job_id,
            "submitted": self.submitted,
            "state": self.state,
            "reason": self.reason,
            "node": self.node,
            "exit_code": self.exit_code,
            "log": self.log,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> JobRecord | None:
        block = raw.get("block")
        if not isinstance(block, int) or isinstance(block, bool):
            return None
        text = {
            k: str(raw.get(k, ""))
            for k in ("job_id", "submitted", "state", "reason", "node", "exit_code", "log")
        }
        return cls(block=block, **text)


@dataclass(kw_only=True)
class Jobs:
    """jobs.json: every job any invocation of this run submitted, oldest first."""

    path: Path
    jobs: list[JobRecord] = field(default_factory=list)

    @classmethod
    def load(cls, run_dir: Path) -> Jobs:
        path = jobs_dir(run_dir) / layout.SLURM_JOBS
        if not os.path.lexists(path):
            return cls(path=path)
        raw = _nofollow.read_json(path)
        items = raw.get("jobs") if isinstance(raw, dict) else None
        if not isinstance(items, list):
            raise ResultsError(f"{path} is not a record of Slurm jobs; move it aside")
        jobs = [r for r in (JobRecord.from_dict(i) for i in items if isinstance(i, dict)) if r]
        return cls(path=path, jobs=jobs)

    def save(self) -> None:
        data = {"schema_version": SCHEMA, "jobs": [j.to_dict() for j in self.jobs]}
        _atomic.write_json(self.path, data)

    def add(self, record: JobRecord) -> None:
        self.jobs.append(record)
        self.save()

    def update(self, job_id: str, **changes: Any) -> JobRecord:
        for i, job in enumerate(self.jobs):
            if job.job_id == job_id:
                self.jobs[i] = replace(job, **changes)
                self.save()
                return self.jobs[i]
        raise KeyError(job_id)

    def live(self) -> list[JobRecord]:
        return [j for j in self.jobs if not j.terminal]

    def ids(self, records: Sequence[JobRecord]) -> list[str]:
        return [j.job_id for j in records if j.job_id.isdigit()]
