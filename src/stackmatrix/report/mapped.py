"""What the live server mapped (bench.json launches[].extra.mapped, bench/_maps.py),
for the report: how many shared objects in how many processes, which of them are the
environment's own extensions, and which library files the check's findings name that
the server never mapped."""

from __future__ import annotations

from dataclasses import dataclass

from stackmatrix.check import relevance
from stackmatrix.findings import Finding
from stackmatrix.jsontypes import JSONObject
from stackmatrix.report.load import CellResults

SHOWN = 12


@dataclass(frozen=True, kw_only=True)
class LiveMapped:
    launch: str
    processes: int
    libraries: int
    extensions: tuple[str, ...]  # site-packages-relative names of the mapped extensions
    unmapped_findings: tuple[str, ...]  # files of findings the server never mapped

    def to_dict(self) -> JSONObject:
        return {
            "launch": self.launch,
            "processes": self.processes,
            "libraries": self.libraries,
            "extensions": list(self.extensions),
            "unmapped_findings": list(self.unmapped_findings),
        }

    def sentence(self) -> str:
        shown = ", ".join(self.extensions[:SHOWN])
        more = f" and {len(self.extensions) - SHOWN} more" if len(self.extensions) > SHOWN else ""
        line = (
            f"The live server mapped {self.libraries} shared objects in {self.processes} "
            f"process(es) (launch {self.launch}), {len(self.extensions)} of them the "
            f"environment's extensions: {shown or 'none'}{more}."
        )
        if self.unmapped_findings:
            line += (
                " Findings name files it never mapped: "
                + ", ".join(self.unmapped_findings[:SHOWN])
                + "."
            )
        return line


def _relative(path: str) -> str | None:
    marker = "-packages/"
    return path.split(marker, 1)[1] if marker in path else None


def live_mapped(cell: CellResults, findings: tuple[Finding, ...]) -> LiveMapped | None:
    for launch in cell.bench.launches:
        raw = launch.extra.get("mapped")
        if not isinstance(raw, dict) or not isinstance(raw.get("libraries"), list):
            continue
        libs = [str(x) for x in raw["libraries"]]
        rel = sorted({r for x in libs if (r := _relative(x)) is not None})
        return LiveMapped(
            launch=f"L{launch.index}",
            processes=int(raw.get("processes") or 0),
            libraries=len(libs),
            extensions=tuple(rel),
            unmapped_findings=_unmapped(findings, set(rel)),
        )
    return None


def _unmapped(findings: tuple[Finding, ...], mapped: set[str]) -> tuple[str, ...]:
    """Files of `findings` (relevance.finding_file: the check's own rule for which file a
    finding is about) that are not among the site-packages-relative `mapped` names."""
    out: list[str] = []
    for f in findings:
        file = relevance.finding_file(f)
        rel = None if file is None else _relative(file) or file
        if rel is not None and rel not in mapped and rel not in out:
            out.append(rel)
    return tuple(out)
