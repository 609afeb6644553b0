"""Findings: machine-readable facts about a cell that a person can act on."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, NamedTuple

from stackmatrix.jsontypes import JSONObject


class Severity(enum.StrEnum):
    FAIL = "fail"
    WARN = "warn"
    INFO = "info"


class _FindingFields(NamedTuple):
    code: str
    severity: Severity
    message: str
    cell: str | None
    subject: str | None
    # Any, not JSONObject: check/ passes dicts of list[str] and tests index them
    details: dict[str, Any]


class Finding(_FindingFields):
    """One fact about a cell.

    `code` is stable (e.g. ``"SM-LIB-MISSING"``) so CI and reports can key on it;
    `subject` is the file, package or setting concerned; `message` is the sentence
    a person reads, saying what to do.

    An immutable record (a named tuple: `_replace` makes a changed copy); each
    finding made without `details` gets its own empty dict.
    """

    __slots__ = ()

    def __new__(
        cls,
        code: str,
        severity: Severity,
        message: str,
        cell: str | None = None,
        subject: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> Finding:
        return super().__new__(
            cls, code, severity, message, cell, subject, {} if details is None else details
        )

    def to_dict(self) -> JSONObject:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "cell": self.cell,
            "subject": self.subject,
            "message": self.message,
            "details": self.details,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Finding:
        """What to_dict wrote; KeyError, TypeError or ValueError for what it cannot have."""
        return cls(
            code=str(data["code"]),
            severity=Severity(str(data["severity"])),  # ValueError for any other value
            message=str(data["message"]),
            cell=text(data.get("cell")),
            subject=text(data.get("subject")),
            details=dict(mapping(data.get("details") or {}, "details")),
        )


def text(value: object) -> str | None:
    """An optional string as read from JSON: anything else is left out (None)."""
    return value if isinstance(value, str) else None


def mapping(value: object, what: str) -> Mapping[str, object]:
    """A JSON object as read; TypeError for anything else."""
    if not isinstance(value, dict):
        raise TypeError(f"{what} is {type(value).__name__}, not an object")
    return value


def worst(findings: list[Finding]) -> Severity | None:
    """The most severe level among `findings` (None when there are none)."""
    for level in (Severity.FAIL, Severity.WARN, Severity.INFO):
        if any(f.severity is level for f in findings):
            return level
    return None
