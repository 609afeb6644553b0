"""Presentation for the CLI: progress lines, colour on a TTY, CI log groups.

Cell ids and messages come from specs and results directories: every line passes
`_sanitize` before it is written (no escape sequence reaches the terminal, no workflow
command the CI runner)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from stackmatrix import _sanitize

_COLOURS = {"ok": "32", "failed": "31", "skipped": "33", "unavailable": "33", "warn": "33"}


class Console:
    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() and "NO_COLOR" not in os.environ
        self.ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
        self.github = os.environ.get("GITHUB_ACTIONS") == "true"
        self._lock = threading.Lock()
        self._t0 = time.monotonic()

    def _write(self, text: str) -> None:
        """`text` as it is: its parts have passed `_sanitize` (the colour is ours)."""
        with self._lock:
            print(text, file=self.stream, flush=True)

    def colour(self, text: str, key: str) -> str:
        code = _COLOURS.get(key)
        return f"\033[{code}m{text}\033[0m" if self.tty and code else text

    def progress(self, phase: str, cell: str, message: str) -> None:
        elapsed = time.monotonic() - self._t0
        message = _sanitize.text(message)
        status = message.split(" ", 1)[0].rstrip(":")
        where = f"{_sanitize.line(phase):<6} {_sanitize.line(cell):<20}"
        self._write(f"[{elapsed:7.1f}s] {where} {self.colour(message, status)}")

    def info(self, text: str) -> None:
        self._write(_sanitize.text(text))


def write_step_summary(markdown: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY when running under GitHub Actions."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with Path(target).open("a", encoding="utf-8") as fh:
            fh.write(markdown.rstrip("\n") + "\n")
