"""The per-cell phase runner: a phase's result is reused when complete and of the same
inputs; otherwise it is marked interrupted, run, and recorded, whatever happened: the
one boundary where what a cell's build or check did becomes its status (its ok result,
`outcome.Skip`, `outcome.Fail`, a crash, Ctrl-C)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stackmatrix import _proc
from stackmatrix.errors import Unreadable
from stackmatrix.outcome import Outcome, record
from stackmatrix.plan import PlannedCell
from stackmatrix.results import CellDir, PhaseResult, PhaseRun


def reusable(cell_dir: CellDir, phase: str, inputs_hash: str | None = None) -> PhaseResult | None:
    """The phase's complete result, of these inputs (None: of any)."""
    try:
        old = cell_dir.read(phase)
    except Unreadable:
        return None
    if old is not None and old.complete and inputs_hash in (None, old.inputs_hash):
        return old
    return None


def run_phase(
    cell_dir: CellDir, phase: str, inputs_hash: str, body: Callable[[], PhaseResult]
) -> PhaseResult:
    """Mark the phase interrupted, run `body`, and record what happened: the result it
    returns, the Skip or Fail it raises, its crash (failed, `internal_error`, the
    traceback in the phase's log); after Ctrl-C, whatever it did, interrupted."""
    run = PhaseRun.begin(cell_dir, phase, inputs_hash)
    run.save()
    try:
        done = body()
    except Outcome as said:
        return run.interrupt() if _proc.interrupted() else record(run, said)
    except Exception as exc:  # a phase's crash becomes a status (bench: per launch)
        run.crash(exc)
        return run.interrupt() if _proc.interrupted() else run.result
    except KeyboardInterrupt:
        run.interrupt()
        raise
    if _proc.interrupted():
        # its child was stopped by Ctrl-C: whatever it returned is not a real outcome
        return run.interrupt()
    done.started = run.result.started
    run.result = done
    return run.end()


def in_parallel(
    planned: list[PlannedCell], jobs: int, one: Callable[[PlannedCell], PhaseResult]
) -> dict[str, PhaseResult]:
    """One cell per worker, at most `jobs` at once; Ctrl-C stops the children and the
    cells not started yet, and the results come back in the plan's order."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pc.cell.id: pool.submit(one, pc) for pc in planned}
        try:
            return {cid: f.result() for cid, f in futures.items()}
        except KeyboardInterrupt:
            for f in futures.values():
                f.cancel()
            _proc.terminate_all()
            raise


def describe(result: PhaseResult) -> str:
    text = result.status.value
    if result.code:
        text += f" ({result.code})"
    if result.message:
        text += f": {result.message.splitlines()[0]}"
    return f"{text} [{result.duration_s:.1f}s]"


def digest(data: Any) -> str:
    import json

    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def bind(fn: Callable[..., PhaseResult], *args: Any) -> Callable[[], PhaseResult]:
    return lambda: fn(*args)
