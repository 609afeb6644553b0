"""How a phase says that a cell was not run (`Skip`) or ran and failed (`Fail`), and the
one way either becomes the cell's recorded result (`apply`, `record`, `write`).

A phase's per-cell body (`builder/phase.py` `build_cell`, `check/phase.py` `check_cell`)
raises them and returns its ok result otherwise; `pipeline/runner.py` `run_phase`
records what the body did, a crash (`results.PhaseRun.crash`) and Ctrl-C
(`PhaseRun.interrupt`) included. The bench interleaves its cells' launches, so it
records a skipped or failed cell itself, with the same `record`; merge and the Slurm
executor `write` the failed result of a cell that has none of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from stackmatrix.findings import Finding
from stackmatrix.jsontypes import JSONObject
from stackmatrix.results import CellDir, PhaseResult, PhaseRun, Status


class Outcome(Exception):
    """A phase's end other than its ok result: its status, and `code` (the machine's
    reason), `message` (the person's), findings and data for the result."""

    status: ClassVar[Status]

    def __init__(
        self,
        code: str,
        message: str,
        *,
        findings: Sequence[Finding] = (),
        data: JSONObject | None = None,
    ) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.findings = tuple(findings)
        self.data = data


class Skip(Outcome):
    """Deliberately not run: no environment to check, no [bench] section, no GPU."""

    status = Status.SKIPPED

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


class Fail(Outcome):
    """Ran and could not do its work: a build the resolver refused, a server that died.
    `data` is what the result keeps of the attempt (a failed build's timings)."""

    status = Status.FAILED


def apply(result: PhaseResult, outcome: Outcome) -> PhaseResult:
    """`outcome` on `result`: its status, code and message; its findings after any the
    result has; its data when it has some."""
    result.status, result.code, result.message = outcome.status, outcome.code, outcome.message
    result.findings = [*result.findings, *outcome.findings]
    if outcome.data is not None:
        result.data = dict(outcome.data)
    return result


def record(run: PhaseRun, outcome: Outcome) -> PhaseResult:
    """`outcome` as the phase's recorded result: applied, stamped finished, written."""
    apply(run.result, outcome)
    return run.end()


def write(
    cell_dir: CellDir, phase: str, outcome: Outcome, *, inputs_hash: str = "", started: str = ""
) -> PhaseResult:
    """The result of a phase that did not run here (`started`: when it was asked for;
    now when empty), recorded at once."""
    run = PhaseRun.begin(cell_dir, phase, inputs_hash)
    run.result.started = started or run.result.started
    return record(run, outcome)
