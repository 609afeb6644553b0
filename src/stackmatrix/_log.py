"""Logging that imports the `logging` package on its first message, not at start-up.

`stackmatrix inspect` logs nothing in the usual case, and importing `logging` (with
traceback, tokenize and string behind it) was a tenth of that command's whole process. The
modules on its path log through `Logger`; the command line says
once how verbose to be (`configure`), and the first message sets logging up that way.
"""

from __future__ import annotations

from typing import Any

_FORMAT = "%(levelname)s %(name)s: %(message)s"
_verbose = False
_pending = False  # configure(now=False) was called and no message has come yet


def configure(verbose: bool, *, now: bool = True) -> None:
    """The command line's logging: debug messages or not, set up at once or (`now=False`)
    by the first message. Used as a library, stackmatrix leaves logging to its caller."""
    global _verbose, _pending
    _verbose, _pending = verbose, not now
    if now:
        _setup()


def _setup() -> None:
    global _pending
    _pending = False
    import logging

    from stackmatrix import _sanitize

    class SafeFormatter(logging.Formatter):
        """A message may quote a cell id or a line of a results file: sanitised."""

        def format(self, record: logging.LogRecord) -> str:
            return _sanitize.text(super().format(record))

    handler = logging.StreamHandler()
    handler.setFormatter(SafeFormatter(_FORMAT))
    logging.basicConfig(level=logging.DEBUG if _verbose else logging.INFO, handlers=[handler])


class Logger:
    """A named logger fetched when it first has something to say."""

    def __init__(self, name: str) -> None:
        self.name = name

    def _real(self) -> Any:
        if _pending:
            _setup()
        import logging

        return logging.getLogger(self.name)

    def debug(self, msg: str, *args: object) -> None:
        self._real().debug(msg, *args)

    def info(self, msg: str, *args: object) -> None:
        self._real().info(msg, *args)

    def warning(self, msg: str, *args: object) -> None:
        self._real().warning(msg, *args)
