"""Slurm's commands, as argv lists through the one process runner: submit (sbatch),
ask (squeue while a job lives; for a job that ended, accounting's record through sacct
where slurmdbd keeps one, else `scontrol show job`), cancel (scancel by job id, never
by name). Their failures become typed errors or states."""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stackmatrix import _proc
from stackmatrix.errors import ToolMissingError

log = logging.getLogger(__name__)

TIMEOUT_S = 60.0
# the states after which a job never runs again (a REQUEUED job runs again)
TERMINAL = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "PREEMPTED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "SPECIAL_EXIT",
        "REVOKED",
        "UNKNOWN",
    }
)
GONE = "UNKNOWN"  # neither slurmctld nor accounting knows the job any more


@dataclass(frozen=True, kw_only=True)
class JobState:
    job_id: str
    state: str  # Slurm's JobState: PENDING, RUNNING, COMPLETED, CANCELLED, ...
    reason: str = ""  # Slurm's reason (Resources, Dependency, NonZeroExitCode, ...)
    node: str = ""
    exit_code: str = ""  # "rc:signal", when Slurm says
    user: str = ""  # squeue's word only (who owns a queued or running job)
    comment: str = ""  # squeue's word only: a job of ours carries the run's tag

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED"


class SubmitFailed(Exception):
    """sbatch refused the job; the message is sbatch's own."""


def require(tool: str = "sbatch") -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolMissingError(
            f"--executor slurm needs Slurm's {tool!r}, which is not on PATH; install the "
            "Slurm client (Debian: slurm-client) on this host, or run with --executor local"
        )
    return path


def submit(argv: Sequence[str]) -> str:
    """sbatch --parsable: the job id (`ID` or `ID;cluster`)."""
    result = _proc.run(argv, timeout=TIMEOUT_S)
    text = result.output.strip()
    if not result.ok:
        raise SubmitFailed(_last_line(text) or f"sbatch exited with {result.returncode}")
    job_id = text.splitlines()[-1].split(";")[0].strip() if text else ""
    if not job_id.isdigit():
        raise SubmitFailed(f"sbatch printed no job id: {text[-300:]!r}")
    return job_id


def states(job_ids: Iterable[str]) -> dict[str, JobState]:
    """Each job's state now; a job no query knows is GONE; none when squeue fails."""
    ids = [j for j in job_ids if j.isdigit()]  # one id each, never a list squeue splits
    if not ids:
        return {}
    found = _squeue(ids)
    if found is None:  # slurmctld did not answer: no news, ask again later
        return {}
    ended = [j for j in ids if (s := found.get(j)) is None or (s.terminal and not s.exit_code)]
    accounted = _sacct(ended) if ended else {}
    for job_id in ended:
        found[job_id] = _settled(job_id, accounted.get(job_id), found.get(job_id))
    return found


def _squeue(ids: Sequence[str]) -> dict[str, JobState] | None:
    argv = ["squeue", "--noheader", "--states=all", f"--jobs={','.join(ids)}"]
    # the comment last: it is free text, '|' included
    result = _proc.run([*argv, "--format=%i|%T|%r|%N|%u|%k"], timeout=TIMEOUT_S)
    if not result.ok:
        # one id that slurmctld forgot is an error of squeue's; anything else is no answer
        return {} if "Invalid job id" in result.output else None
    out: dict[str, JobState] = {}
    for line in result.output.splitlines():
        parts = line.strip().split("|", 5)
        if len(parts) == 6 and parts[0] in ids:
            out[parts[0]] = JobState(
                job_id=parts[0],
                state=_base(parts[1]),
                reason=_none(parts[2]),
                node=parts[3],
                user=parts[4],
                comment=_none(parts[5]),
            )
    return out


def _settled(job_id: str, accounted: JobState | None, seen: JobState | None) -> JobState:
    """An ended job's state, exit code, reason and node: accounting's record once it
    says the job ended (slurmdbd keeps it after slurmctld forgets the job, MinJobAge);
    else scontrol while slurmctld keeps the job (accounting disabled, or its record
    not yet written); else the last word of either."""
    if accounted is not None and accounted.terminal:
        return accounted
    return (
        _scontrol(job_id)
        or accounted
        or seen
        or JobState(
            job_id=job_id,
            state=GONE,
            reason="slurmctld no longer knows the job and accounting has no record of it",
        )
    )


_FIELD = re.compile(r"(?:^|\s)(JobState|Reason|ExitCode|NodeList)=(\S*)")


def _scontrol(job_id: str) -> JobState | None:
    result = _proc.run(["scontrol", "--oneliner", "show", "job", job_id], timeout=TIMEOUT_S)
    if not result.ok:
        return None
    fields = dict(_FIELD.findall(result.output))
    if "JobState" not in fields:
        return None
    state, reason = fields["JobState"], fields.get("Reason", "")
    return JobState(
        job_id=job_id,
        state=_base(state),
        reason=_reason(state, reason),
        node=_none(fields.get("NodeList", "")),
        exit_code=fields.get("ExitCode", ""),
    )


# sacct --parsable2 columns, in this order; --allocations: one line per job, no steps
SACCT_FIELDS = ("JobID", "State", "Reason", "NodeList", "ExitCode")


def _sacct(ids: Sequence[str]) -> dict[str, JobState]:
    """Accounting's record of each job it has; none when sacct is missing, fails, or
    says accounting is disabled (no slurmdbd: `accounting_storage/none`)."""
    if shutil.which("sacct") is None:
        return {}
    argv = ["sacct", "--noheader", "--parsable2", "--allocations", f"--jobs={','.join(ids)}"]
    result = _proc.run([*argv, f"--format={','.join(SACCT_FIELDS)}"], timeout=TIMEOUT_S)
    if not result.ok:
        log.debug("sacct gave no records (%s): %s", result.returncode, _last_line(result.output))
        return {}
    return parse_sacct(result.output, ids)


def _reason(state: str, reason: str) -> str:
    """Slurm's reason, except the pending reason (Dependency, Priority) that a completed
    job's record still carries: it explains nothing about how the job ended."""
    return "" if _base(state) == "COMPLETED" else _none(reason)


def parse_sacct(text: str, ids: Sequence[str]) -> dict[str, JobState]:
    """sacct's `--parsable2 --format=SACCT_FIELDS` lines, for these job ids. A requeued
    job has a line per run when asked with --duplicates: the last (newest) wins."""
    out: dict[str, JobState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != len(SACCT_FIELDS) or parts[0] not in ids:
            continue
        job_id, state, reason, node, exit_code = parts
        out[job_id] = JobState(
            job_id=job_id,
            state=_base(state),
            reason=_reason(state, reason),
            node=_none(node),
            exit_code=exit_code,
        )
    return out


def cancel(job_ids: Iterable[str]) -> list[str]:
    """scancel exactly these job ids; what scancel said when it failed."""
    ids = [j for j in job_ids if j.isdigit()]
    if not ids:
        return []
    result = _proc.run(["scancel", *ids], timeout=TIMEOUT_S)
    return [] if result.ok else [_last_line(result.output) or f"scancel exited {result.returncode}"]


def _base(state: str) -> str:
    """`CANCELLED by 0` and `CANCELLED+` are CANCELLED."""
    return state.split()[0].rstrip("+") if state.strip() else GONE


def _none(value: str) -> str:
    return "" if value in ("None", "(null)", "None assigned", "") else value


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""
