"""Atomic file writes: a reader sees the old file or the new one, never half."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created with mode 0666 less the umask, as the logs beside it are: mkstemp's 0600
    # made results unreadable to the group that reads the logs.
    tmp = str(path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Path, data: Any) -> None:
    text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
    write_text(path, text)


def read_json(path: Path) -> Any:
    with path.open("r", encoding="utf-8") as fh:
        return json.load(fh)
