"""One root for fatal errors; each subclass carries the process exit code.

`stackmatrix.cli.main` turns any of these into a message and the exit code. Caught
elsewhere only where it is not fatal: a `ResultsError` for an optional file that
cannot be read (the report notes it, a resume redoes the work), and the few places
docs/architecture.md lists. Everything that is a *result* (a cell that failed to
build, a server that died) is recorded as a status instead.
"""

from __future__ import annotations


class StackmatrixError(Exception):
    """A fatal error: the command cannot go on."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(StackmatrixError):
    """Bad command-line usage (unknown cell, missing file...)."""

    exit_code = 2


class SpecError(StackmatrixError):
    """The matrix spec is invalid; `problems` lists every problem found."""

    exit_code = 2

    def __init__(self, path: str, problems: list[str]) -> None:
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{path}: {len(problems)} problem(s) in the matrix spec:\n{lines}")
        self.problems = problems


class ResultsError(StackmatrixError):
    """A results directory is missing, corrupt, or inconsistent."""

    exit_code = 3


class ToolMissingError(StackmatrixError):
    """An external tool the command needs (uv, docker...) is not installed."""

    exit_code = 4


class PolicyFailure(StackmatrixError):
    """The report's --fail-on policy matched (incompatible cell, regression...)."""

    exit_code = 5


class NothingJudged(StackmatrixError):
    """`inspect` found no readable extension and no package in its path (a FIFO, a
    device, a zip that is not a wheel, a file that is not ELF): no verdict to give."""

    exit_code = 6
