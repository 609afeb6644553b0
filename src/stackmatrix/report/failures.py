"""Why a phase failed, in the verdict line: the exception a dying server wrote last in
its log, and the check's finding that predicted it (a finding's `details["log"]` is
the text a server that needs the missing piece dies with)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from stackmatrix.findings import Finding, Severity

_EXCEPTION = re.compile(r"^\s*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)):\s*(\S.*)$")
MAX_CAUSE = 200


def cause(message: str) -> str | None:
    """The last exception line of a failure message (a server log's tail)."""
    found = None
    for line in message.splitlines():
        match = _EXCEPTION.match(line)
        if match:
            found = f"{match.group(1)}: {match.group(2).strip()}"
    if found is None:
        return None
    return found if len(found) <= MAX_CAUSE else found[: MAX_CAUSE - 1] + "…"


def predicted_by(message: str, findings: Sequence[Finding]) -> list[str]:
    """Codes of the findings whose server-side text appears in the failure message."""
    codes = []
    for f in findings:
        text = f.details.get("log") if isinstance(f.details, dict) else None
        if isinstance(text, str) and text and text in message and f.code not in codes:
            codes.append(f.code)
    return codes


def failure_text(
    detail: str, message: str, findings: Sequence[Finding], *, code: str | None = None
) -> str:
    """`detail` (the message's first line) with the cause and what predicted it; a bench
    the check refused names the failing finding that refused it."""
    out = detail
    if code == "incompatible":
        failing = [f for f in findings if f.severity is Severity.FAIL]
        fail = next((f for f in failing if not f.details.get("latent")), None)
        return out + (f": {fail.code}: {fail.message}" if fail is not None else "")
    why = cause(message)
    if why and why not in detail:
        out += f" ({why})"
    codes = predicted_by(message, findings)
    if codes:
        out += f"; the check predicted it: {', '.join(codes)}"
    return out
