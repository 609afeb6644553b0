"""Why a cell's compatibility is what it is, for the first screen of the report.

A cell's `compat` is its check's verdict: any deciding failure makes it incompatible,
else any deciding warning "warnings" (check/static.py `verdict_of`). A finding about a
file the serving process does not load is latent (check/relevance.py): shown and
counted here, never deciding. The reason given is the most severe deciding finding,
a cause before the import failures it explains (an image without libnuma.so.1 makes
sgl_kernel's import fail, and the server's entry with it: the library is the reason);
the others of its severity and the latent ones are counted beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stackmatrix.check.relevance import is_latent
from stackmatrix.findings import Finding, Severity
from stackmatrix.jsontypes import JSONObject

_DECIDED_BY = {"incompatible": Severity.FAIL, "warnings": Severity.WARN}
_ORDER = {Severity.FAIL: 0, Severity.WARN: 1, Severity.INFO: 2}
# what happens when something else is wrong: said after what makes it happen
_CONSEQUENCES = frozenset({"SM-IMPORT-FAILED", "SM-SERVING-IMPORT-FAILED"})


@dataclass(frozen=True, kw_only=True)
class CompatWhy:
    compat: str  # "incompatible" or "warnings"
    first: Finding  # the most severe deciding finding
    deciding: int  # deciding findings of the verdict's severity, `first` included
    latent: int  # failures and warnings about files the server does not load

    def to_dict(self) -> JSONObject:
        return {
            "compat": self.compat,
            "first": self.first.to_dict(),
            "deciding": self.deciding,
            "latent": self.latent,
        }

    def counts(self) -> str:
        """`2 more warnings decide; 6 latent findings, about files the server does not
        load, not counted`, or ''."""
        noun = "failure" if self.compat == "incompatible" else "warning"
        parts = []
        if self.deciding > 1:
            more = self.deciding - 1
            parts.append(f"{more} more {noun}{' decides' if more == 1 else 's decide'}")
        if self.latent:
            parts.append(
                f"{self.latent} latent finding{'' if self.latent == 1 else 's'}, about files "
                "the server does not load, not counted"
            )
        return "; ".join(parts)


def compat_why(compat: str, check_findings: Sequence[Finding]) -> CompatWhy | None:
    """The reason for a "warnings" or "incompatible" check; None for any other."""
    severity = _DECIDED_BY.get(compat)
    if severity is None:
        return None
    ordered = sorted(
        check_findings, key=lambda f: (_ORDER[f.severity], f.code in _CONSEQUENCES, f.code)
    )
    deciding = [f for f in ordered if f.severity is severity and not is_latent(f)]
    if not deciding:
        return None
    latent = sum(1 for f in ordered if f.severity is not Severity.INFO and is_latent(f))
    return CompatWhy(compat=compat, first=deciding[0], deciding=len(deciding), latent=latent)


def finding_order(finding: Finding) -> tuple[bool, int, bool, str]:
    """Deciding findings first, each group most severe first, causes before the import
    failures they explain (the details' order)."""
    return is_latent(finding), _ORDER[finding.severity], finding.code in _CONSEQUENCES, finding.code
