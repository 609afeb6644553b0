"""matrix.md: GitHub-flavoured, short enough for a job summary or a PR comment.

Ids and messages come from results directories: each value is text (`_md_text`), and
the whole document passes `_sanitize` (it is also shown in CI logs and terminals)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from stackmatrix import _sanitize
from stackmatrix.findings import Finding, Severity
from stackmatrix.report import _frontier_text
from stackmatrix.report import fmt as _fmt
from stackmatrix.report.config_drift import Difference
from stackmatrix.report.latency import LatencyRow
from stackmatrix.report.matrix import CellReport, MatrixReport
from stackmatrix.verdict_registry import traits

_BESIDE = 8  # unintended differences shown next to a verdict; the rest go to details
_MESSAGE_LINES = 12  # of a multi-line phase message (a server's last log lines)
# Emoji render in GitHub's markdown and stay readable as text.
_ICON = {Severity.FAIL: "❌", Severity.WARN: "⚠️", Severity.INFO: "ℹ️"}  # noqa: RUF001
_SPARK = "▁▂▃▄▅▆▇█"
# Findings are grouped by the phase that found them: each phase is one kind of check.
PHASE_KINDS = {
    "build": "build: resolver and lock",
    "check": "check: compatibility",
    "bench": "bench: serving benchmark",
}


def render(report: MatrixReport, *, details: bool = True) -> str:
    """The whole report; `details=False` gives the job-summary version."""
    parts = [
        _title(report),
        _compat_table(report),
        _perf_table(report),
        _points_md(report),
        _frontier_md(report),
    ]
    parts.append(_drift_sections(report))
    parts.append(_explanations(report))
    parts.append(_verdicts(report))
    if details:
        parts.append(_details(report))
    return _sanitize.text("\n\n".join(p for p in parts if p).rstrip() + "\n")


class _Code(str):
    """A table cell already written as a code span: markdown is literal inside it, so
    backslash escapes would show; only its pipes need escaping."""


def _code(value: object) -> _Code:
    return _Code("`" + _sanitize.line(value).replace("`", "'") + "`")


def _esc(text: object) -> str:
    """A table cell: values a server or a results file reported are text, never HTML
    or markdown (`</td><img ...>` and `![p](https://...)` rendered as such)."""
    if isinstance(text, _Code):
        return text.replace("|", "\\|")
    return _md_text(text).replace("|", "\\|")


def _row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(_esc(c) for c in cells) + " |"


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = [_row(header), "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + [_row(r) for r in rows])


def _title(report: MatrixReport) -> str:
    targets = ", ".join(report.targets) or "none"
    lines = [
        f"## stackmatrix: {_md_text(report.spec_name)} — {len(report.cells)} cells, "
        f"baseline {_code(report.baseline)}, targets {_md_text(targets)}"
    ]
    lines += [f"> {note}" for note in report.notes]
    return "\n\n".join(lines)


def _compat_table(report: MatrixReport) -> str:
    header = ["cell", "build", "compat", *report.targets, "bench", "verdict"]
    rows = [
        [
            _cell_name(c),
            c.phase("build").status,
            c.compat,
            *[c.targets.get(t, "unknown") for t in report.targets],
            _bench_status(c),
            _verdict_text(c),
        ]
        for c in report.cells
    ]
    return "### Compatibility\n\n" + _table(header, rows) + _why_lines(report)


def _why_lines(report: MatrixReport) -> str:
    """Below the table: the finding that makes each cell not compatible, and counts."""
    lines = []
    for c in report.cells:
        judged = f"; {_md_text(c.judged_on)}" if c.judged_on else ""
        if c.why is None:
            if c.judged_on and c.compat == "compatible":
                lines.append(f"- **{_md_text(c.id)}** compatible: no finding decides{judged}")
            continue
        f, counts = c.why.first, c.why.counts()
        subject = f" ({_md_text(f.subject)})" if f.subject else ""
        said = _md_text(counts) + judged if counts else judged.removeprefix("; ")
        lines.append(
            f"- **{_md_text(c.id)}** {c.compat}: {_ICON[f.severity]} `{f.code}`{subject}: "
            f"{_esc(_fmt.shorten(f.message, 240))}" + (f" ({said})" if said else "")
        )
    return "\n\nWhy:\n\n" + "\n".join(lines) if lines else ""


def _cell_name(c: CellReport) -> str:
    return f"{c.id} (baseline)" if c.is_baseline else c.id


def _bench_status(c: CellReport) -> str:
    bench = c.phase("bench")
    if not bench.ok:
        return f"{bench.status}" + (f": {bench.code}" if bench.code else "")
    measured = [launch for launch in c.launches if launch.value is not None]
    return f"ok ({_fmt.shape_text(measured, 'x') if measured else '0x0'})"


def _verdict_text(c: CellReport) -> str:
    v = c.verdict
    return f"**{v.value}**" if traits(v).difference else v.value


def _perf_table(report: MatrixReport) -> str:
    label = _fmt.metric_label(report.headline)
    conf = f"{report.thresholds.confidence:.0%}"
    header = [
        "cell",
        f"{label} (median, {conf} CI)",
        "launches x rounds",
        f"vs {report.baseline} ({conf} CI)",
        "verdict",
        "vs last run",
    ]
    rows = [
        [
            c.id,
            _fmt.interval_text(c.headline),
            _shape(c),
            "—" if c.is_baseline else _fmt.ratio_text(c.comparison),
            _verdict_text(c),
            _history(c),
        ]
        for c in report.cells
    ]
    return "\n\n".join(
        [f"### Performance: {label}", _table(header, rows), _method_note(report)]
        + ([" ".join(report.protocol.sentences())] if report.protocol else [])
        + ([_calibration_line(report)] if report.calibration else [])
        + _latency_md(report.latency, "####")
    )


def _latency_md(rows: Sequence[LatencyRow], level: str) -> list[str]:
    """A load's TTFT/ITL/TPOT percentiles with their sample counts (none: [])."""
    if not rows:
        return []
    header, body, note = _fmt.latency_table(rows)
    return [f"{level} {_fmt.LATENCY_TITLE}", _table(header, body)] + ([note] if note else [])


def _points_md(report: MatrixReport) -> str:
    """`[[bench.points]]`: every cell at each further load, on the same servers."""
    if not report.points:
        return ""
    conf = f"{report.thresholds.confidence:.0%}"
    blocks = ["### Load points", _fmt.POINTS_NOTE]
    for pt in report.points:
        label = _fmt.metric_label(pt.metric)
        rows = [
            [
                r.cell,
                _fmt.interval_text(r.value),
                r.launches or "—",
                "—" if r.cell == report.baseline else _fmt.ratio_text(r.comparison),
                r.comparison.verdict.value if r.comparison else "—",
            ]
            for r in pt.rows
        ]
        header = [
            "cell",
            f"{label} ({conf} CI)",
            "launches",
            f"vs {report.baseline} ({conf} CI)",
            "verdict",
        ]
        blocks += [f"#### {_fmt.point_title(pt)}", _table(header, rows)]
        blocks += _latency_md(pt.latency, "#####")
    return "\n\n".join(blocks)


def _frontier_md(report: MatrixReport) -> str:
    """Every cell at every load: throughput, per-user speed, goodput, the SLO's verdicts."""
    frontiers = [c.frontier for c in report.cells if c.frontier is not None]
    if not report.loads or not frontiers:
        return ""
    conf = f"{report.thresholds.confidence:.0%}"
    order = _frontier_text.order_note(report.loads)
    blocks = [f"### {_frontier_text.TITLE}", _frontier_text.NOTE + (f" {order}" if order else "")]
    if report.slo:
        blocks.append(f"SLO: {_frontier_text.slo_text(report.slo)}. {_frontier_text.SLO_NOTE}")
    header = _frontier_text.header(report.slo, conf)
    blocks.append(_table(header, _frontier_text.rows(frontiers, report.slo)))
    blocks += ["\n".join(f"- {_md_text(f.sentence)}" for f in frontiers if f.sentence)]
    return "\n\n".join(b for b in blocks if b)


def _shape(c: CellReport) -> str:
    measured = [launch for launch in c.launches if launch.value is not None]
    if not measured:
        return "—"
    return _fmt.shape_text(measured)


def _history(c: CellReport) -> str:
    h = c.history
    if h is None or h.previous_value is None:
        return "first run" if h is not None else "—"
    spark = sparkline(h.trend) if len(h.trend) >= 3 else ""
    return f"{_fmt.pct(h.change)} {spark}".strip()


def sparkline(values: Iterable[float]) -> str:
    vals = list(values)
    low, high = min(vals), max(vals)
    span = high - low or 1.0
    return "".join(_SPARK[min(7, int((v - low) / span * 7 + 0.5))] for v in vals)


def _method_note(report: MatrixReport) -> str:
    text = _fmt.method_text(report.thresholds.min_effect, report.sample_unit)
    return ("⚠️ " if report.sample_unit != "launch" else "") + text


def _calibration_line(report: MatrixReport) -> str:
    assert report.calibration is not None
    cell, cal = report.calibration
    within = f", within a launch {cal.within_sd:.1%}" if cal.within_sd is not None else ""
    line = (
        f"Noise from {cal.launches} launches of `{cell}`: "
        f"launch to launch {cal.per_launch_sd:.1%}{within}."
    )
    found = _fmt.detectable_text(report)
    return f"{line} {found}" if found else line


def _explanations(report: MatrixReport) -> str:
    """What `stackmatrix explain` measured, in its own words, per explained cell."""
    blocks = []
    for ex in report.explanations:
        lines = [f"- {_md_text(x)}" for x in _fmt.items(ex.get("sentences"))]
        lines += [
            f"- cannot be isolated: {_md_text(_fmt.cannot_isolate_text(c))}"
            for c in _fmt.items(ex.get("cannot_isolate"))
        ]
        lines += [f"- {_md_text(n)}" for n in _fmt.items(ex.get("notes"))]
        cells, launches = ex.get("revert_cells", 0), ex.get("launches", 0)
        lines.append(f"- cost: {cells} revert cell(s), {launches} measured launch(es)")
        blocks.append(
            f"#### {_md_text(ex.get('cell'))}: {_md_text(ex.get('status'))}\n\n" + "\n".join(lines)
        )
    return "### Explanation\n\n" + "\n\n".join(blocks) if blocks else ""


# Link and image syntax from data (`[t](url)`, `![p](url)`, `[t][ref]`, `[ref]: url`,
# `<url>`) must not render: a PR comment would load the image or offer the link. Every
# form needs a `]` right before `(`, `[` or `:`, or a `<`; escaping just those keeps
# ordinary brackets such as `[-8.1%, -5.4%]` readable.
_LINK_CLOSE = re.compile(r"(\\*)\](?=[(\[:])")


def _md_text(value: object) -> str:
    text = _sanitize.line(value).replace("&", "&amp;").replace("<", "&lt;")
    return _LINK_CLOSE.sub(lambda m: m[1] * 2 + "\\]", text)


def _drift_sections(report: MatrixReport) -> str:
    out = []
    for c in report.cells:
        if c.drift is None or not traits(c.verdict).difference:
            continue
        out.append(_drift_block(report, c))
    return "\n\n".join(out)


def _drift_block(report: MatrixReport, c: CellReport) -> str:
    assert c.drift is not None and c.comparison is not None
    head = (
        f"### {_md_text(c.id)} is {c.verdict.value} ({_fmt.ratio_text(c.comparison)}): "
        f"what else differs from {_md_text(report.baseline)}"
    )
    unintended = c.drift.unintended
    if not unintended:
        body = "Nothing recorded differs beyond what the cell asks for."
    else:
        body = "Not asked for by the cell, most consequential first:\n\n" + _diff_table(
            report.baseline, c.id, unintended[:_BESIDE], numbered=True
        )
        if len(unintended) > _BESIDE:
            body += f"\n\n…and {len(unintended) - _BESIDE} more in the details below."
    asked = ", ".join(
        _md_text(f"{_fmt.setting(d)} {_fmt.shorten(d.baseline, 30)} → {_fmt.shorten(d.value, 30)}")
        for d in c.drift.intended
        if not d.key.startswith("cell:")
    )
    if asked:
        body += f"\n\nAsked for (intended): {asked}."
    return f"{head}\n\n{body}"


def _diff_table(base: str, cell: str, diffs: Iterable[Difference], *, numbered: bool) -> str:
    rows = []
    for i, d in enumerate(diffs, 1):
        row: list[object] = [
            _code(_fmt.setting(d)),
            _fmt.shorten(d.baseline),
            _fmt.shorten(d.value),
            d.label,
            _fmt.origin(d),
        ]
        rows.append([i, *row] if numbered else row)
    header = ["setting", base, cell, "kind", "from"]
    return _table(["#", *header] if numbered else header, rows)


def _verdicts(report: MatrixReport) -> str:
    lines = ["### Verdicts", ""]
    for c in report.cells:
        if c.is_baseline:
            continue
        apart = f"; {_esc(c.set_apart)}" if c.set_apart else ""
        lines.append(f"- **{_md_text(c.id)}**: {c.verdict.value} — {_esc(c.reason)}{apart}")
    return "\n".join(lines) if len(lines) > 2 else ""


def _details(report: MatrixReport) -> str:
    return "### Details\n\n" + "\n\n".join(_cell_details(report, c) for c in report.cells)


def _cell_details(report: MatrixReport, c: CellReport) -> str:
    n_unintended = len(c.drift.unintended) if c.drift else 0
    summary = (
        f"{_md_text(c.id)}: {c.compat}, {c.verdict.value} — "
        f"{_fmt.count(len(c.findings), 'finding')}, "
        f"{_fmt.count(n_unintended, 'unintended difference')}"
    )
    parts = [_phases_line(c)]
    parts += [f"- problem: {_md_text(p)}" for p in c.problems]
    parts.append(_findings_md(c.findings_by_phase))
    if c.drift:
        parts += [f"- {note}" for note in c.drift.not_compared]
        if c.drift.volatile:
            keys = _md_text(", ".join(c.drift.volatile))
            parts.append(f"- volatile, drawn anew at each launch, not compared: {keys}")
        if c.drift.unintended:
            parts.append(
                "Unintended differences:\n\n"
                + _diff_table(report.baseline, c.id, c.drift.unintended, numbered=False)
            )
        if c.drift.intended:
            parts.append(
                "Intended differences:\n\n"
                + _diff_table(report.baseline, c.id, c.drift.intended, numbered=False)
            )
    if c.mapped is not None:
        parts.append(_md_text(c.mapped.sentence()))
    parts.append(_launches_md(c))
    body = "\n\n".join(p for p in parts if p)
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>"


def _phases_line(c: CellReport) -> str:
    items = []
    blocks = []
    for p in c.phases:
        text = _md_text(f"{p.phase} {p.status}")
        if p.code:
            text += f" ({_md_text(p.code)})"
        if p.message and not p.ok:
            first, _, rest = p.message.partition("\n")
            text += f": {_md_text(first)}"
            if rest.strip():
                tail = "\n".join(rest.strip("\n").splitlines()[-_MESSAGE_LINES:])
                blocks.append("```text\n" + _sanitize.text(tail).replace("`", "'") + "\n```")
        items.append(text)
    return "\n\n".join(["Phases: " + "; ".join(items), *blocks])


def _findings_md(by_phase: dict[str, tuple[Finding, ...]]) -> str:
    if not by_phase:
        return "No findings."
    blocks = []
    for phase, findings in by_phase.items():
        lines = [f"**{PHASE_KINDS.get(phase, phase)}**"]
        for f in findings:
            subject = f" ({_md_text(f.subject)})" if f.subject else ""
            lines.append(f"- {_ICON[f.severity]} `{f.code}`{subject}: {_esc(f.message)}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _launches_md(c: CellReport) -> str:
    if not c.launches and not c.warmup_launches:
        return ""
    rows = []
    launches = (*c.warmup_launches, *c.launches)
    ready = any(launch.ready_s is not None for launch in launches)
    for launch in launches:
        others = [o.env_facts for o in c.launches if o is not launch]
        facts = _fmt.distinct_facts(launch.env_facts, others) if launch.outlier else ""
        rows.append(
            [
                launch.label,
                launch.status,
                *([_fmt.seconds(launch.ready_s)] if ready else []),
                _fmt.number(launch.value),
                " ".join(_fmt.number(r) for r in launch.rounds),
                ("outlier: " + (facts or "no environment fact sets it apart from the others"))
                if launch.outlier
                else "",
            ]
        )
    head = ["launch", "status", *(["ready"] if ready else []), "median", "rounds", "note"]
    return "Launches:\n\n" + _table(head, rows)
