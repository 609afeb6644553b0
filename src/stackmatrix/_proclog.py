"""What a child's log holds: the argv it ran, its output as it came, and how it ended,
with secrets redacted (`_secrets`). Written by `_proc`, one file per phase or server."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from stackmatrix._secrets import redact_argv, redact_text


def shown(argv: Sequence[str]) -> str:
    """`argv` as a display line with secrets redacted (never run by a shell)."""
    return " ".join(redact_argv(argv))


def exit_line(rc: int, timed_out: bool) -> str:
    return f"[exit {rc}{' (timed out)' if timed_out else ''}]\n"


@contextlib.contextmanager
def log_file(path: Path, argv: tuple[str, ...]) -> Iterator[IO[bytes]]:
    """The log opened for appending, its first line the argv."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as fh:
        fh.write(f"$ {shown(argv)}\n".encode())
        fh.flush()
        yield fh


def copy_lines(
    source: IO[bytes] | None,
    fh: IO[bytes],
    lines: list[str],
    on_line: Callable[[str], None] | None,
) -> None:
    """Each line of `source` into the log as it comes, kept in `lines` and handed
    (without its newline) to `on_line`."""
    assert source is not None
    with source, contextlib.suppress(ValueError):  # the log closed: `stream` gave up on us
        for raw in source:
            line = raw.decode("utf-8", errors="replace")
            hidden = redact_text(line)
            fh.write(raw if hidden == line else hidden.encode("utf-8"))
            fh.flush()
            lines.append(line)
            if on_line is not None:
                on_line(line.rstrip("\r\n"))


def append_log(path: Path, argv: tuple[str, ...], text: str, rc: int, timed_out: bool) -> None:
    """A finished child's whole output, appended at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {shown(argv)}\n{redact_text(text)}")
        fh.write(exit_line(rc, timed_out))
