"""The Slurm executor, on the submitting host: the run's files, then one job per block
(block 0 builds and checks on a node, block k is cycle k of the schedule: launch k of
every cell, in the balanced order, on one node), each after the one before it
(blocks write the same cells' records, so never at once). It follows the jobs through
squeue/scontrol until each has ended, records what Slurm said of every job, and
writes the report as the local run does. Ctrl-C, SIGTERM or SIGHUP cancel exactly the
jobs this run submitted (scancel by job id). `--resume` submits only the blocks whose
launches are not all recorded, and follows the jobs of an earlier invocation that
still run instead of submitting them again."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stackmatrix import _atomic, _nofollow, layout
from stackmatrix._lock import results_dir_lock
from stackmatrix.executor import _slurmctl
from stackmatrix.executor._plan import blocks_to_run, order_seed, statuses
from stackmatrix.executor._records import (
    NOT_OURS,
    JobRecord,
    Jobs,
    block_name,
    jobs_dir,
    our_user,
    run_tag,
)
from stackmatrix.executor._script import BlockCommand, sbatch_argv, script_text
from stackmatrix.outcome import Fail, write
from stackmatrix.pipeline import (
    Progress,
    RunOptions,
    RunSummary,
    open_run_dir,
    planned_cells,
    prepare_run,
)
from stackmatrix.pipeline.phases import report_phase
from stackmatrix.pipeline.rundir import mark_finished
from stackmatrix.pipeline.runner import reusable
from stackmatrix.plan import PlannedCell
from stackmatrix.results import RunDir, now_iso


def run_slurm(opts: RunOptions, progress: Progress) -> RunSummary:
    _slurmctl.require("sbatch")
    planned = planned_cells(opts)
    run = open_run_dir(opts)
    ids = [pc.cell.id for pc in planned]
    with results_dir_lock(run.path):
        prepare_run(run, opts, planned)
    progress("run", "-", f"results in {run.path}")
    with results_dir_lock(jobs_dir(run.path)):  # one submitting process per run
        _Submitter(run=run, opts=opts, planned=planned, progress=progress).run()
    summary = RunSummary(run_dir=run.path, statuses=statuses(run, ids, opts.phases))
    with results_dir_lock(run.path):
        if "report" in opts.phases:
            summary.report_paths, summary.policy_failures = report_phase(run, opts, progress)
        mark_finished(run)
    return summary


class _Submitter:
    def __init__(
        self, *, run: RunDir, opts: RunOptions, planned: list[PlannedCell], progress: Progress
    ) -> None:
        self.run_dir, self.opts, self.planned, self.say = run, opts, planned, progress
        self.jobs = Jobs.load(run.path)
        self.seed = order_seed(opts.spec, run.path)

    def run(self) -> None:
        adopted = self._adopt()
        try:
            last = adopted[-1].job_id if adopted else None
            running = {j.block for j in adopted}
            for block in blocks_to_run(self.run_dir, self.opts, self.planned):
                if block not in running:
                    last = self._submit(block, after=last)
                    if last is None:
                        break
            self._follow()
            self._unbuilt()
        except KeyboardInterrupt as exc:
            with _signals_held():
                self._cancel(exc)
            raise

    def _adopt(self) -> list[JobRecord]:
        """The jobs an earlier invocation submitted that Slurm still runs or queues, and
        shows as this run's; any other recorded job is NOT_OURS, said and left alone."""
        self._disown(self.jobs.live())
        self._refresh(self.jobs.live())
        adopted = self.jobs.live()
        for job in adopted:
            self.say("slurm", block_name(job.block), f"following job {job.job_id} ({job.state})")
        return adopted

    def _disown(self, recorded: list[JobRecord]) -> None:
        now = _slurmctl.states(self.jobs.ids(recorded))
        tag, user = run_tag(self.run_dir.path), our_user()
        for job in recorded:
            state = now.get(job.job_id)
            if state is not None and state.terminal:
                continue  # ended: only how it ended is recorded, nothing is done to it
            why = _not_ours(state, tag=tag, user=user)
            if why is None:
                continue
            reason = f"{why}; not followed, waited for or cancelled"
            if job.job_id:
                self.jobs.update(job.job_id, state=NOT_OURS, reason=reason)
            self.say("slurm", block_name(job.block), f"job {job.job_id} left alone: {why}")

    def _submit(self, block: int, *, after: str | None) -> str | None:
        """Block `block` submitted and recorded (None: sbatch refused it, recorded too).
        Stop signals wait until the job id is in jobs.json: a job submitted and not
        recorded could not be cancelled by id."""
        argv = self._sbatch_argv(block, after)
        with _signals_held():
            try:
                job_id = _slurmctl.submit(argv)
            except _slurmctl.SubmitFailed as exc:
                self.jobs.add(
                    JobRecord(
                        block=block, submitted=now_iso(), state="SUBMIT_FAILED", reason=str(exc)
                    )
                )
                self.say("slurm", block_name(block), f"failed: sbatch refused the job: {exc}")
                return None
            self.jobs.add(
                JobRecord(
                    block=block,
                    job_id=job_id,
                    submitted=now_iso(),
                    log=layout.slurm_log(block_name(block), job_id),
                )
            )
        self.say("slurm", block_name(block), f"submitted job {job_id}")
        return job_id

    def _sbatch_argv(self, block: int, after: str | None) -> list[str]:
        """The block's script, written into RUN/slurm/, and sbatch's argv for it."""
        folder = jobs_dir(self.run_dir.path)
        script = folder / layout.slurm_script(block_name(block))
        opts = self.opts
        command = BlockCommand(
            spec=Path(opts.spec.path),
            run_dir=self.run_dir.path,
            work_dir=opts.work_dir,
            block=block,
            order=opts.order or opts.spec.order,
            order_seed=self.seed,
            cells=tuple(pc.cell.id for pc in self.planned),
            backend=opts.backend,
            force=opts.force,
        )
        _atomic.write_text(script, script_text(command, opts.spec.executor, cwd=Path.cwd()))
        name = f"stackmatrix-{opts.spec.name}-{block_name(block)}"
        return sbatch_argv(
            opts.spec.executor,
            script=script.resolve(),
            log_dir=folder,
            log_stem=block_name(block),
            job_name=name,
            after=after,
            comment=run_tag(self.run_dir.path),
        )

    def _follow(self) -> None:
        while live := self.jobs.live():
            self._refresh(live)
            if self.jobs.live():
                time.sleep(self.opts.spec.executor.poll_s)

    def _refresh(self, jobs: list[JobRecord]) -> None:
        now = _slurmctl.states(self.jobs.ids(jobs))
        for job in jobs:
            state = now.get(job.job_id)
            if state is None or (state.state, state.reason, state.node) == (
                job.state,
                job.reason,
                job.node,
            ):
                continue
            updated = self.jobs.update(
                job.job_id,
                state=state.state,
                reason=state.reason,
                node=state.node,
                exit_code=state.exit_code,
            )
            self.say("slurm", block_name(job.block), _describe(updated, self.run_dir.path))

    def _unbuilt(self) -> None:
        """A build-and-check job that sbatch refused or Slurm ended (a partition that does
        not exist, a time limit): each cell it left without a build is failed, with
        Slurm's word for why, so the report says it instead of "not built"."""
        ended = [j for j in self.jobs.jobs if j.block == 0 and j.terminal]
        if not ended or ended[-1].state == "COMPLETED":
            return
        job = ended[-1]
        why = f"Slurm job {job.job_id or '(not submitted)'} {job.state}"
        message = why + (f": {job.reason}" if job.reason else "")
        for pc in self.planned:
            cell_dir = self.run_dir.cell(pc.cell.id)
            if reusable(cell_dir, "build") is None:
                write(
                    cell_dir,
                    "build",
                    Fail("slurm_job_failed", message),
                    inputs_hash=pc.content_hash,
                    started=job.submitted,
                )
                self.say("build", pc.cell.id, f"failed: {message}")

    def _cancel(self, exc: KeyboardInterrupt) -> None:
        live = self.jobs.live()
        problems = _slurmctl.cancel(self.jobs.ids(live))
        why = f"cancelled by stackmatrix on {_signal_name(exc)}"
        for job in live:
            self.jobs.update(job.job_id, state="CANCELLED", reason=why)
            self.say("slurm", block_name(job.block), f"cancelled job {job.job_id}")
        for problem in problems:
            self.say("slurm", "-", f"scancel: {problem}")


def _not_ours(state: _slurmctl.JobState | None, *, tag: str, user: str) -> str | None:
    """Why Slurm's word does not make a live recorded job this run's (None: it does)."""
    if state is None:
        return "Slurm did not say whose job it is (no answer from squeue for it)"
    if state.user != user:
        return f"Slurm says it is {state.user!r}'s, not {user!r}'s"
    if state.comment != tag:
        return f"its comment {state.comment!r} is not this run's {tag!r}"
    return None


def _describe(job: JobRecord, run_dir: Path) -> str:
    text = f"job {job.job_id} {job.state}"
    if job.node:
        text += f" on {job.node}"
    if job.reason:
        text += f" ({job.reason})"
    if job.terminal and job.state != "COMPLETED":
        text = f"failed: {text}" + (f", exit {job.exit_code}" if job.exit_code else "")
        text += f"; log: {jobs_dir(run_dir) / job.log}" if job.log else ""
    elif job.terminal:
        text = f"ok: {text}" + _cells_of(run_dir, job.block)
    return text


def _cells_of(run_dir: Path, block: int) -> str:
    try:
        data = _nofollow.read_json(run_dir / layout.SLURM_DIR / layout.slurm_block(block))
    except Exception:  # the block's own record is a nicety on the console, never fatal
        return ""
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, dict):
        return ""
    return "; " + ", ".join(f"{c} {s}" for c, s in cells.items())


def _signal_name(exc: KeyboardInterrupt) -> str:
    from stackmatrix import _signals

    return _signals.name(exc)


@contextmanager
def _signals_held() -> Iterator[None]:
    """A second Ctrl-C must not stop the scancel of the jobs this run submitted."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
