"""Secrets never land in results, logs or reports: redact by name before writing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_SECRET = re.compile(r"TOKEN|SECRET|PASSW|API[_-]?KEY|ACCESS[_-]KEY|CREDENTIAL|AUTH", re.IGNORECASE)
REDACTED = "<redacted>"


def is_secret_name(name: str) -> bool:
    return bool(_SECRET.search(name))


def redact(data: Any) -> Any:
    """A copy of `data` with the values of secret-looking keys replaced (nested)."""
    if isinstance(data, dict):
        return {
            k: (REDACTED if is_secret_name(str(k)) and v not in (None, "") else redact(v))
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [redact(v) for v in data]
    return data


def redact_argv(argv: Sequence[str]) -> list[str]:
    """`--api-key X` and `--hf-token=X` keep the flag, lose the value."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if flag.startswith("-") and is_secret_name(flag):
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out
