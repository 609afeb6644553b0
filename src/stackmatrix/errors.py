"""One root for fatal errors, each subclass carrying the process exit code, and the one
error that is not fatal by itself: a file that cannot be read.

`stackmatrix.cli.main` turns a `StackmatrixError` into a message and its exit code, and
is the one place that catches one (`tests/unit/test_error_boundary.py`; the handlers it
allows besides are listed there: each re-raises, or is a boundary of its own command).
`Unreadable` is what reading a file says when it cannot be read as asked: the reader of
an optional file turns it into a note or a status (the report notes it, a resume redoes
the work); where a command needs the file, it reaches `cli.main`, which says it as a
`ResultsError` does (exit 3). Everything that is a *result* (a cell that failed to
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


class Unreadable(Exception):
    """A file that cannot be read as asked: a link, not a regular file, larger than its
    bound, not whole (a cut gzip), not the JSON or record expected. Not fatal by itself:
    its reader decides (a note, a status, a redo); uncaught, exit 3 as `ResultsError`."""

    exit_code = ResultsError.exit_code

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


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
