"""matrix.html: one self-contained page (inline CSS and SVG; no script, no network).

Values from results are escaped (`_html.esc`, `_html.pre`), and the whole page passes
`_sanitize`: the plots' labels too carry no bidirectional override or control."""

from __future__ import annotations

from collections.abc import Sequence

from stackmatrix import _sanitize, layout
from stackmatrix.findings import Finding, Severity
from stackmatrix.report import _svg
from stackmatrix.report import fmt as _fmt
from stackmatrix.report._html import (
    COMPAT_TONE,
    CSS,
    TARGET_TONE,
    TONE,
    badge,
    esc,
    html_table,
    pre,
    status_badge,
)
from stackmatrix.report._html_explain import explanations as _explanations
from stackmatrix.report._html_plots import frontier as _frontier
from stackmatrix.report._html_plots import latency as _latency
from stackmatrix.report._html_plots import points as _points
from stackmatrix.report._html_plots import time_order as _time_order
from stackmatrix.report.config_drift import Difference
from stackmatrix.report.matrix import CellReport, MatrixReport
from stackmatrix.report.render_md import PHASE_KINDS
from stackmatrix.verdict_registry import traits


def render(report: MatrixReport) -> str:
    body = [
        _header(report),
        _compat(report),
        _performance(report),
        _points(report),
        _frontier(report),
        _drift_sections(report),
        _explanations(report),
        _verdicts(report),
        _distributions(report),
        _details(report),
        _spec(report),
    ]
    return _sanitize.text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>stackmatrix: {esc(report.spec_name)}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{CSS}</style></head><body>\n"
        + "\n".join(b for b in body if b)
        + "\n</body></html>\n"
    )


def _header(report: MatrixReport) -> str:
    targets = ", ".join(report.targets) or "none"
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in report.notes)
    return (
        f"<h1>stackmatrix: {esc(report.spec_name)}</h1>"
        f'<p class="sub">{len(report.cells)} cells · baseline <code>{esc(report.baseline)}</code>'
        f" · targets {esc(targets)} · headline {esc(_fmt.metric_label(report.headline))}"
        f" · run {esc(report.created)} · order {esc(report.order or 'n/a')}"
        f" · stackmatrix {esc(report.stackmatrix_version)}</p>{notes}"
    )


def _verdict_badge(c: CellReport) -> str:
    return badge(c.verdict.value, TONE[c.verdict])


def _compat(report: MatrixReport) -> str:
    header = ["cell", "build", "compat", *report.targets, "bench", "verdict"]
    rows = []
    for c in report.cells:
        bench = c.phase("bench")
        rows.append(
            [
                f"<b>{esc(c.id)}</b>"
                + (' <span class="muted">(baseline)</span>' if c.is_baseline else ""),
                status_badge(c.phase("build").status),
                badge(
                    c.compat, COMPAT_TONE.get(c.compat, "slower" if "fail" in c.compat else "open")
                ),
                *[
                    badge(
                        c.targets.get(t, "unknown"), TARGET_TONE.get(c.targets.get(t, ""), "open")
                    )
                    for t in report.targets
                ],
                status_badge(bench.status)
                + (f" <code>{esc(bench.code)}</code>" if bench.code else ""),
                _verdict_badge(c),
            ]
        )
    return "<h2>Compatibility</h2>" + html_table(header, rows) + _why(report)


def _why(report: MatrixReport) -> str:
    """The finding that makes each cell not compatible, as matrix.md says it."""
    items = []
    for c in report.cells:
        judged = f"; {c.judged_on}" if c.judged_on else ""
        if c.why is None:
            if c.judged_on and c.compat == "compatible":
                items.append(
                    f"<li><b>{esc(c.id)}</b> compatible: no finding decides"
                    f'<span class="muted">{esc(judged)}</span></li>'
                )
            continue
        f, counts = c.why.first, c.why.counts()
        subject = f" ({esc(f.subject)})" if f.subject else ""
        said = counts + judged if counts else judged.removeprefix("; ")
        items.append(
            f"<li><b>{esc(c.id)}</b> {esc(c.compat)}: "
            f'<span class="sev-{f.severity.value}">{esc(f.severity.value)}</span> '
            f"<code>{esc(f.code)}</code>{subject}: {esc(f.message)}"
            + (f' <span class="muted">({esc(said)})</span>' if said else "")
            + "</li>"
        )
    return "<p>Why:</p><ul>" + "".join(items) + "</ul>" if items else ""


def _performance(report: MatrixReport) -> str:
    label = _fmt.metric_label(report.headline)
    conf = f"{report.thresholds.confidence:.0%}"
    header = [
        "cell",
        f"{label} [{conf} CI]#",
        "launches x rounds#",
        f"vs {report.baseline} [{conf} CI]#",
        "verdict",
        "vs last run",
    ]
    rows = [
        [
            esc(c.id),
            esc(_fmt.interval_text(c.headline)),
            esc(_shape(c)),
            "—" if c.is_baseline else esc(_fmt.ratio_text(c.comparison)),
            _verdict_badge(c),
            _history(c),
        ]
        for c in report.cells
    ]
    base = report.cell(report.baseline) if any(c.is_baseline for c in report.cells) else None
    plot = _svg.interval_plot(
        [
            _svg.IntervalRow(
                label=c.id,
                points=[launch.value for launch in c.launches if launch.value is not None],
                center=c.headline.center if c.headline else None,
                low=c.headline.low if c.headline else None,
                high=c.headline.high if c.headline else None,
                tone=TONE[c.verdict],
            )
            for c in report.cells
        ],
        reference=base.headline.center if base and base.headline else None,
        unit=f"{label}: dots are launches, bars the {conf} interval, dashed line the baseline",
        title=f"{label} per cell",
    )
    return (
        f"<h2>Performance: {esc(label)}</h2>"
        + html_table(header, rows)
        + plot
        + _time_order(report)
        + f'<p class="muted">{esc(_method(report))}</p>'
        + (
            f'<p class="muted">{esc(" ".join(report.protocol.sentences()))}</p>'
            if report.protocol
            else ""
        )
        + _calibration(report)
        + _latency(report.latency, "h3")
    )


def _shape(c: CellReport) -> str:
    measured = [launch for launch in c.launches if launch.value is not None]
    if not measured:
        return "—"
    return _fmt.shape_text(measured)


def _history(c: CellReport) -> str:
    h = c.history
    if h is None:
        return "—"
    if h.previous_value is None:
        return '<span class="muted">first run</span>'
    return f"{esc(_fmt.pct(h.change))} {_svg.sparkline(h.trend)}"


def _method(report: MatrixReport) -> str:
    return _fmt.method_text(report.thresholds.min_effect, report.sample_unit)


def _calibration(report: MatrixReport) -> str:
    if report.calibration is None:
        return ""
    cell, cal = report.calibration
    within = f"{cal.within_sd:.1%}" if cal.within_sd is not None else "n/a"
    found = _fmt.detectable_text(report)
    return (
        "<h3>Noise</h3>"
        f"<p>From {cal.launches} launches of <code>{esc(cell)}</code>: "
        f"launch-to-launch sd {cal.per_launch_sd:.1%} (launch component {cal.launch_sd:.1%}), "
        f"within a launch {within}.{' ' + esc(found) if found else ''}</p>"
    )


def _drift_sections(report: MatrixReport) -> str:
    out = []
    for c in report.cells:
        if c.drift is None or not traits(c.verdict).difference:
            continue
        tone = TONE[c.verdict]
        rows = _diff_rows(c.drift.unintended, numbered=True)
        table = (
            html_table(["#", "setting", report.baseline, c.id, "kind", "from"], rows)
            if rows
            else "<p>Nothing recorded differs beyond what the cell asks for.</p>"
        )
        out.append(
            f'<div class="drift {tone}"><h3>{esc(c.id)} is {badge(c.verdict.value, tone)} '
            f"({esc(_fmt.ratio_text(c.comparison))}): what else differs from "
            f"{esc(report.baseline)}, most consequential first</h3>{table}</div>"
        )
    return "".join(out)


def _diff_rows(diffs: Sequence[Difference], *, numbered: bool) -> list[list[str]]:
    rows = []
    for i, d in enumerate(diffs, 1):
        origin = esc(d.source)
        if d.evidence:
            origin += f"<br><code>{esc(_fmt.shorten(d.evidence, 110))}</code>"
        row = [
            f"<code>{esc(_fmt.setting(d))}</code>",
            esc(_fmt.shorten(d.baseline)),
            esc(_fmt.shorten(d.value)),
            esc(d.label),
            origin,
        ]
        rows.append([str(i), *row] if numbered else row)
    return rows


def _verdicts(report: MatrixReport) -> str:
    items = [
        f"<li><b>{esc(c.id)}</b>: {_verdict_badge(c)} {esc(c.reason)}"
        + (f"; {esc(c.set_apart)}" if c.set_apart else "")
        + "</li>"
        for c in report.cells
        if not c.is_baseline
    ]
    return "<h2>Verdicts</h2><ul>" + "".join(items) + "</ul>" if items else ""


_DISTRIBUTIONS = (
    ("ttft_ms", "time to first token"),
    ("itl_ms", "inter-token latency"),
    ("tpot_ms", "time per output token"),
)


def _distributions(report: MatrixReport) -> str:
    plots = []
    for metric, title in _DISTRIBUTIONS:
        plot = _svg.box_plot(
            [
                _svg.BoxRow(label=c.id, quantiles=c.distributions.get(metric, {}))
                for c in report.cells
            ],
            unit=f"{title} (ms): box p25 to p75, line median, whiskers p5 to p95",
            title=f"{title} per cell",
        )
        if plot:
            plots.append(f"<h3>{esc(title.capitalize())}</h3>{plot}")
    return "<h2>Latency distributions</h2>" + "".join(plots) if plots else ""


def _details(report: MatrixReport) -> str:
    return "<h2>Details per cell</h2>" + "".join(_cell_details(report, c) for c in report.cells)


def _cell_details(report: MatrixReport, c: CellReport) -> str:
    n_unintended = len(c.drift.unintended) if c.drift else 0
    parts = [_phases(c)]
    parts += [f'<p class="note">{esc(p)}</p>' for p in c.problems]
    parts.append(_findings(c.findings_by_phase))
    if c.drift:
        parts += [f'<p class="muted">{esc(n)}</p>' for n in c.drift.not_compared]
        header = ["setting", report.baseline, c.id, "kind", "from"]
        if c.drift.unintended:
            parts.append(
                "<h3>Unintended differences</h3>"
                + html_table(header, _diff_rows(c.drift.unintended, numbered=False))
            )
        if c.drift.intended:
            parts.append(
                "<h3>Intended differences</h3>"
                + html_table(header, _diff_rows(c.drift.intended, numbered=False))
            )
    parts.append(_launches(c))
    summary = (
        f"{esc(c.id)} — {esc(c.compat)}, {esc(c.verdict.value)}"
        f" · {_fmt.count(len(c.findings), 'finding')}"
        f" · {_fmt.count(n_unintended, 'unintended difference')}"
    )
    return f"<details><summary>{summary}</summary>{''.join(parts)}</details>"


def _phases(c: CellReport) -> str:
    rows = [
        [
            esc(p.phase),
            status_badge(p.status),
            esc(p.code or ""),
            _message(p.message),
            esc(f"{p.duration_s:.1f}"),
        ]
        for p in c.phases
    ]
    return html_table(["phase", "status", "code", "message", "seconds#"], rows)


def _findings(by_phase: dict[str, tuple[Finding, ...]]) -> str:
    if not by_phase:
        return '<p class="muted">No findings.</p>'
    out = []
    for phase, findings in by_phase.items():
        items = "".join(
            f'<li><span class="sev-{f.severity.value}">{esc(f.severity.value)}</span> '
            f"<code>{esc(f.code)}</code>{' (' + esc(f.subject) + ')' if f.subject else ''}: "
            f"{esc(f.message)}</li>"
            for f in findings
        )
        worst = min((f.severity for f in findings), key=_order)
        out.append(
            f"<details{' open' if worst is not Severity.INFO else ''}><summary>"
            f"{esc(PHASE_KINDS.get(phase, phase))} ({len(findings)})</summary>"
            f"<ul>{items}</ul></details>"
        )
    return "<h3>Findings</h3>" + "".join(out)


def _message(text: str) -> str:
    first, _, rest = text.partition("\n")
    if not rest.strip():
        return esc(first)
    return f"{esc(first)}<details><summary>more</summary><pre>{pre(rest.strip())}</pre></details>"


def _order(s: Severity) -> int:
    return {Severity.FAIL: 0, Severity.WARN: 1, Severity.INFO: 2}[s]


def _launches(c: CellReport) -> str:
    if not c.launches and not c.warmup_launches:
        return ""
    launches = (*c.warmup_launches, *c.launches)
    ready = any(launch.ready_s is not None for launch in launches)
    rows = [
        [
            esc(launch.label),
            esc(launch.status),
            *([esc(_fmt.seconds(launch.ready_s))] if ready else []),
            esc(_fmt.number(launch.value)),
            esc(" ".join(_fmt.number(r) for r in launch.rounds)),
            (badge("outlier", "open") + " " if launch.outlier else "")
            + esc(_fmt.facts_text(launch.env_facts)),
        ]
        for launch in launches
    ]
    head = ["launch", "status", *(["ready#"] if ready else []), "median#", "rounds", "environment"]
    return "<h3>Launches</h3>" + html_table(head, rows)


def _spec(report: MatrixReport) -> str:
    names = sorted({k for c in report.cells for k in c.versions})
    rows = [
        [f"<b>{esc(c.id)}</b>", *[esc(c.versions.get(n, "—")) for n in names]] for c in report.cells
    ]
    versions = html_table(["cell", *names], rows) if names else ""
    spec = (
        f"<details><summary>{layout.SPEC_TOML} (hash {esc(report.spec_hash)})</summary>"
        f"<pre>{pre(report.spec_text)}</pre></details>"
        if report.spec_text
        else f'<p class="muted">{layout.SPEC_TOML} was not kept with these results.</p>'
    )
    return "<h2>Spec and versions</h2>" + versions + spec
