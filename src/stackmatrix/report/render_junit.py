"""junit.xml: one test case per cell and check, so any CI can gate on the matrix.

Ids and messages pass `_sanitize` (a control character in a message, such as a server's
colour codes, made the whole file not well-formed XML, and CI showed no test at all)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from stackmatrix import _sanitize
from stackmatrix.report import _frontier_text
from stackmatrix.report.frontier import CellFrontier
from stackmatrix.report.matrix import CellReport, MatrixReport, PhaseSummary
from stackmatrix.report.policy import baseline_frontier
from stackmatrix.verdict_registry import traits

# (outcome, message): outcome is "pass", "failure", "error" or "skipped"
_Case = tuple[str, str, str]  # (name, outcome, message)


def render(report: MatrixReport) -> str:
    spec = _sanitize.line(report.spec_name)
    suites = ET.Element("testsuites", name=f"stackmatrix {spec}")
    for cell in report.cells:
        cases = _cases(report, cell)
        cell_id = _sanitize.line(cell.id)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=f"{spec}.{cell_id}",
            tests=str(len(cases)),
            failures=str(sum(1 for c in cases if c[1] == "failure")),
            errors=str(sum(1 for c in cases if c[1] == "error")),
            skipped=str(sum(1 for c in cases if c[1] == "skipped")),
        )
        for name, outcome, text in cases:
            case = ET.SubElement(suite, "testcase", classname=cell_id, name=_sanitize.line(name))
            message = _sanitize.text(text)
            if outcome != "pass":
                ET.SubElement(case, outcome, message=message)
            elif message:
                ET.SubElement(case, "system-out").text = message
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def _cases(report: MatrixReport, cell: CellReport) -> list[_Case]:
    cases = [_phase_case(cell.phase("build")), _compat_case(cell)]
    cases += [_target_case(t, cell.targets.get(t, "unknown")) for t in report.targets]
    cases.append(_phase_case(cell.phase("bench")))
    cases.append(_perf_case(report, cell))
    mine, base = cell.frontier, baseline_frontier(report)
    if mine is not None and base is not None and mine.slo:
        cases += [_goodput_case(cell, mine), _largest_case(report, cell, mine, base)]
    return cases


def _phase_case(p: PhaseSummary) -> _Case:
    detail = (p.code or "") + (f": {p.message}" if p.message else "")
    match p.status:
        case "ok":
            return (p.phase, "pass", "")
        case "failed" | "interrupted" | "unreadable":
            return (p.phase, "failure", f"{p.phase} {p.status} {detail}".strip())
        case _:
            return (p.phase, "skipped", f"{p.phase} {p.status} {detail}".strip())


def _compat_case(cell: CellReport) -> _Case:
    failing = [f"{f.code}: {f.message}" for f in cell.findings if f.severity.value == "fail"]
    if cell.compat == "incompatible":
        return ("compat", "failure", "; ".join(failing) or "incompatible")
    if cell.compat in ("compatible", "warnings"):
        warns = [f"{f.code}: {f.message}" for f in cell.findings if f.severity.value == "warn"]
        return ("compat", "pass", "\n".join(warns))
    return ("compat", "skipped", cell.compat)


def _target_case(target: str, state: str) -> _Case:
    name = f"coverage[{target}]"
    if state == "native":
        return (name, "pass", "")
    if state == "ptx":
        return (name, "pass", f"{target}: PTX only, JIT-compiled at first use")
    if state == "none":
        return (name, "failure", f"no kernels for {target}: neither SASS nor compatible PTX")
    return (name, "skipped", f"{target}: {state}")


def _perf_case(report: MatrixReport, cell: CellReport) -> _Case:
    name = f"perf[{report.headline}]"
    c = cell.comparison
    verdict = cell.verdict
    outcome = traits(verdict).junit
    if c is None:  # the baseline, a cell not measured
        return (name, outcome, verdict.value)
    return (name, outcome, f"{verdict.value}: {c.reason}" if outcome == "skipped" else c.reason)


def _goodput_case(cell: CellReport, mine: CellFrontier) -> _Case:
    """The goodput verdict at the headline load, failing as `--fail-on goodput-regression`."""
    name = "slo[goodput]"
    g = mine.goodput
    if cell.is_baseline:
        return (name, "pass", "baseline")
    if g is None:
        return (name, "skipped", "goodput at the headline load not measured")
    outcome = traits(g.verdict).junit
    if outcome == "pass":
        return (name, outcome, g.reason)
    said = f"{g.verdict.value} in goodput at the headline load" if outcome == "failure" else ""
    return (name, outcome, f"{said or g.verdict.value}: {g.reason}")


def _largest_case(
    report: MatrixReport, cell: CellReport, mine: CellFrontier, base: CellFrontier
) -> _Case:
    """The largest load within the SLO in every launch against the baseline's, failing
    as `--fail-on slo-load-regression`: the cell misses the SLO at a load the baseline
    meets."""
    name = "slo[largest_load]"
    if cell.is_baseline:
        return (name, "pass", mine.sentence)
    text = _frontier_text.largest_text(mine, base, report.baseline)
    if mine.versus == "open":
        return (name, "skipped", f"not judged ({_frontier_text.open_text(mine, base)}): {text}")
    return (name, "failure" if mine.versus == "lower" else "pass", text)
