"""matrix.html: one self-contained page (inline CSS and SVG; no script, no network)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from stackmatrix.findings import Finding, Severity
from stackmatrix.report import _fmt, _svg
from stackmatrix.report.drift import Difference
from stackmatrix.report.matrix import CellReport, MatrixReport
from stackmatrix.report.render_md import PHASE_KINDS
from stackmatrix.report.stats import Verdict

_TONE = {
    Verdict.BASELINE: "base",
    Verdict.SLOWER: "slower",
    Verdict.FASTER: "faster",
    Verdict.NO_CHANGE: "same",
    Verdict.INCONCLUSIVE: "open",
    Verdict.NOT_MEASURED: "open",
}
_COMPAT_TONE = {"compatible": "faster", "warnings": "open", "incompatible": "slower"}
_TARGET_TONE = {"native": "faster", "ptx": "open", "none": "slower"}

_CSS = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--soft:#f6f8fa;
--red:#cf222e;--redbg:#ffebe9;--green:#1a7f37;--greenbg:#dafbe1;--amber:#9a6700;
--amberbg:#fff8c5;--blue:#0969da;--bluebg:#ddf4ff}
*{box-sizing:border-box}
body{font:14px/1.5 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:var(--fg);
background:var(--bg);margin:0 auto;max-width:1180px;padding:24px 32px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;
border-bottom:1px solid var(--line);padding-bottom:4px}h3{font-size:15px;margin:18px 0 8px}
.sub{color:var(--muted);margin:0 0 12px}
.note{background:var(--amberbg);border:1px solid #d4a72c;border-radius:6px;padding:8px 12px;
margin:8px 0}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid var(--line);padding:5px 10px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;
white-space:nowrap}
.badge.slower{background:var(--redbg);color:var(--red)}
.badge.faster{background:var(--greenbg);color:var(--green)}
.badge.same{background:var(--soft);color:var(--muted)}
.badge.open{background:var(--amberbg);color:var(--amber)}
.badge.base{background:var(--bluebg);color:var(--blue)}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:var(--soft);
padding:1px 4px;border-radius:4px}
pre{background:var(--soft);padding:10px;border-radius:6px;overflow:auto;font-size:12px}
details{border:1px solid var(--line);border-radius:6px;padding:6px 12px;margin:8px 0}
summary{cursor:pointer;font-weight:600}
.drift{border-left:4px solid var(--red);padding-left:12px;margin:14px 0}
.drift.faster{border-left-color:var(--green)}
.muted{color:var(--muted)}
.plot{display:block;margin:6px 0 14px;max-width:100%;height:auto}
.plot .grid{stroke:#eaeef2}.plot .tick{font-size:11px;fill:var(--muted);text-anchor:middle}
.plot .unit{font-size:11px;fill:var(--muted)}
.plot .label{font-size:12px;fill:var(--fg);text-anchor:end}
.plot .ref{stroke:var(--blue);stroke-dasharray:4 3}
.plot .ci{fill:#d0d7de;opacity:.7}.plot .ci.slower{fill:#ffcecb}.plot .ci.faster{fill:#aceebb}
.plot .ci.base{fill:#b6e3ff}
.plot .pt{fill:#57606a;opacity:.8}
.plot .median{stroke:var(--fg);stroke-width:2.5}.plot .median.slower{stroke:var(--red)}
.plot .median.faster{stroke:var(--green)}.plot .median.base{stroke:var(--blue)}
.plot .whisker{stroke:#57606a;stroke-width:1.5}.plot .box{fill:#b6e3ff;stroke:#57606a}
.sev-fail{color:var(--red);font-weight:600}.sev-warn{color:var(--amber);font-weight:600}
.sev-info{color:var(--muted)}
.spark{vertical-align:middle;color:var(--blue)}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
"""


def render(report: MatrixReport) -> str:
    body = [
        _header(report),
        _compat(report),
        _performance(report),
        _points(report),
        _drift_sections(report),
        _explanations(report),
        _verdicts(report),
        _distributions(report),
        _details(report),
        _spec(report),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>stackmatrix: {escape(report.spec_name)}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{_CSS}</style></head><body>\n"
        + "\n".join(b for b in body if b)
        + "\n</body></html>\n"
    )


def _e(value: object) -> str:
    return escape(str(value))


def _badge(text: str, tone: str) -> str:
    return f'<span class="badge {tone}">{_e(text)}</span>'


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "") -> str:
    """`rows` hold ready HTML; a header ending in '#' marks a right-aligned number column."""
    nums = [len(h) > 1 and h.endswith("#") for h in header]
    head = "".join(f"<th>{_e(h[:-1] if n else h)}</th>" for h, n in zip(header, nums, strict=True))
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if n else f"<td>{c}</td>"
            for c, n in zip(r, nums, strict=True)
        )
        + "</tr>"
        for r in rows
    )
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _header(report: MatrixReport) -> str:
    targets = ", ".join(report.targets) or "none"
    notes = "".join(f'<p class="note">{_e(n)}</p>' for n in report.notes)
    return (
        f"<h1>stackmatrix: {_e(report.spec_name)}</h1>"
        f'<p class="sub">{len(report.cells)} cells · baseline <code>{_e(report.baseline)}</code>'
        f" · targets {_e(targets)} · headline {_e(_fmt.metric_label(report.headline))}"
        f" · run {_e(report.created)} · order {_e(report.order or 'n/a')}"
        f" · stackmatrix {_e(report.stackmatrix_version)}</p>{notes}"
    )


def _verdict_badge(c: CellReport) -> str:
    return _badge(c.verdict.value, _TONE[c.verdict])


def _compat(report: MatrixReport) -> str:
    header = ["cell", "build", "compat", *report.targets, "bench", "verdict"]
    rows = []
    for c in report.cells:
        bench = c.phase("bench")
        rows.append(
            [
                f"<b>{_e(c.id)}</b>"
                + (' <span class="muted">(baseline)</span>' if c.is_baseline else ""),
                _status_badge(c.phase("build").status),
                _badge(
                    c.compat, _COMPAT_TONE.get(c.compat, "slower" if "fail" in c.compat else "open")
                ),
                *[
                    _badge(
                        c.targets.get(t, "unknown"), _TARGET_TONE.get(c.targets.get(t, ""), "open")
                    )
                    for t in report.targets
                ],
                _status_badge(bench.status)
                + (f" <code>{_e(bench.code)}</code>" if bench.code else ""),
                _verdict_badge(c),
            ]
        )
    return "<h2>Compatibility</h2>" + _table(header, rows)


def _status_badge(status: str) -> str:
    tones = {"ok": "faster", "failed": "slower", "interrupted": "slower", "unreadable": "slower"}
    tone = tones.get(status, "open")
    return _badge(status, tone)


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
            _e(c.id),
            _e(_fmt.interval_text(c.headline)),
            _e(_shape(c)),
            "—" if c.is_baseline else _e(_fmt.ratio_text(c.comparison)),
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
                tone=_TONE[c.verdict],
            )
            for c in report.cells
        ],
        reference=base.headline.center if base and base.headline else None,
        unit=f"{label}: dots are launches, bars the {conf} interval, dashed line the baseline",
        title=f"{label} per cell",
    )
    return (
        f"<h2>Performance: {_e(label)}</h2>"
        + _table(header, rows)
        + plot
        + f'<p class="muted">{_e(_method(report))}</p>'
        + _calibration(report)
    )


def _points(report: MatrixReport) -> str:
    """`[[bench.points]]`: every cell at each further load, on the same servers."""
    if not report.points:
        return ""
    conf = f"{report.thresholds.confidence:.0%}"
    parts = ["<h2>Load points</h2>", f'<p class="muted">{_e(_fmt.POINTS_NOTE)}</p>']
    for pt in report.points:
        label = _fmt.metric_label(pt.metric)
        vs = f"vs {report.baseline} [{conf} CI]#"
        header = ["cell", f"{label} [{conf} CI]#", "launches#", vs, "verdict"]
        rows = [
            [
                _e(r.cell),
                _e(_fmt.interval_text(r.value)),
                _e(r.launches or "—"),
                "—" if r.cell == report.baseline else _e(_fmt.ratio_text(r.comparison)),
                _e(r.comparison.verdict.value if r.comparison else "—"),
            ]
            for r in pt.rows
        ]
        parts += [f"<h3>{_e(_fmt.point_title(pt))}</h3>", _table(header, rows)]
    return "".join(parts)


def _shape(c: CellReport) -> str:
    measured = [launch for launch in c.launches if launch.value is not None]
    if not measured:
        return "—"
    return f"{len(measured)} x {max(len(launch.rounds) for launch in measured)}"


def _history(c: CellReport) -> str:
    h = c.history
    if h is None:
        return "—"
    if h.previous_value is None:
        return '<span class="muted">first run</span>'
    return f"{_e(_fmt.pct(h.change))} {_svg.sparkline(h.trend)}"


def _method(report: MatrixReport) -> str:
    if report.sample_unit == "launch":
        unit = (
            "Each server launch is one independent sample (rounds inside a launch are "
            "summarized by their median first); values are geometric means of launches, "
            "intervals Welch t intervals on log values."
        )
    else:
        unit = (
            "Some cells had a single launch: their intervals come from rounds inside one "
            "launch and ignore launch-to-launch noise."
        )
    return f"{unit} Changes under {report.thresholds.min_effect:.0%} count as no change."


def _calibration(report: MatrixReport) -> str:
    if report.calibration is None:
        return ""
    cell, cal = report.calibration
    rows = [[str(k), f"{c:.1%}"] for k, c in cal.detectable]
    within = f"{cal.within_sd:.1%}" if cal.within_sd is not None else "n/a"
    return (
        "<h3>Noise calibration (launches of one cell as A/A)</h3>"
        f"<p>From {cal.launches} launches of <code>{_e(cell)}</code>: "
        f"launch-to-launch sd {cal.per_launch_sd:.1%} (launch component {cal.launch_sd:.1%}), "
        f"within a launch {within}. "
        f"Smallest change a verdict finds {cal.power:.0%} of the time:</p>"
        + _table(["launches per cell#", "smallest detectable change#"], rows)
    )


def _drift_sections(report: MatrixReport) -> str:
    out = []
    for c in report.cells:
        if c.drift is None or c.verdict not in (Verdict.SLOWER, Verdict.FASTER):
            continue
        tone = _TONE[c.verdict]
        rows = _diff_rows(c.drift.unintended, numbered=True)
        table = (
            _table(["#", "setting", report.baseline, c.id, "kind", "from"], rows)
            if rows
            else "<p>Nothing recorded differs beyond what the cell asks for.</p>"
        )
        out.append(
            f'<div class="drift {tone}"><h3>{_e(c.id)} is {_badge(c.verdict.value, tone)} '
            f"({_e(_fmt.ratio_text(c.comparison))}): what else differs from "
            f"{_e(report.baseline)}, most consequential first</h3>{table}</div>"
        )
    return "".join(out)


def _explanations(report: MatrixReport) -> str:
    blocks = []
    for ex in report.explanations:
        items = [*(ex.get("sentences") or []), *(ex.get("notes") or [])]
        items += [f"cannot be isolated: {c.get('why')}" for c in ex.get("cannot_isolate") or []]
        lis = "".join(f"<li>{_e(x)}</li>" for x in items)
        blocks.append(f"<h3>{_e(ex.get('cell'))}: {_e(ex.get('status'))}</h3><ul>{lis}</ul>")
    return "<h2>Explanation</h2>" + "".join(blocks) if blocks else ""


def _diff_rows(diffs: Sequence[Difference], *, numbered: bool) -> list[list[str]]:
    rows = []
    for i, d in enumerate(diffs, 1):
        origin = _e(d.source)
        if d.evidence:
            origin += f"<br><code>{_e(_fmt.shorten(d.evidence, 110))}</code>"
        row = [
            f"<code>{_e(_fmt.setting(d))}</code>",
            _e(_fmt.shorten(d.baseline)),
            _e(_fmt.shorten(d.value)),
            _e(d.label),
            origin,
        ]
        rows.append([str(i), *row] if numbered else row)
    return rows


def _verdicts(report: MatrixReport) -> str:
    items = [
        f"<li><b>{_e(c.id)}</b>: {_verdict_badge(c)} {_e(c.reason)}</li>"
        for c in report.cells
        if not c.is_baseline
    ]
    return "<h2>Verdicts</h2><ul>" + "".join(items) + "</ul>" if items else ""


def _distributions(report: MatrixReport) -> str:
    plots = []
    for metric, title in (("ttft_ms", "time to first token"), ("itl_ms", "inter-token latency")):
        plot = _svg.box_plot(
            [
                _svg.BoxRow(label=c.id, quantiles=c.distributions.get(metric, {}))
                for c in report.cells
            ],
            unit=f"{title} (ms): box p25 to p75, line median, whiskers p5 to p95",
            title=f"{title} per cell",
        )
        if plot:
            plots.append(f"<h3>{_e(title.capitalize())}</h3>{plot}")
    return "<h2>Latency distributions</h2>" + "".join(plots) if plots else ""


def _details(report: MatrixReport) -> str:
    return "<h2>Details per cell</h2>" + "".join(_cell_details(report, c) for c in report.cells)


def _cell_details(report: MatrixReport, c: CellReport) -> str:
    n_unintended = len(c.drift.unintended) if c.drift else 0
    parts = [_phases(c)]
    parts += [f'<p class="note">{_e(p)}</p>' for p in c.problems]
    parts.append(_findings(c.findings_by_phase))
    if c.drift:
        parts += [f'<p class="muted">{_e(n)}</p>' for n in c.drift.not_compared]
        header = ["setting", report.baseline, c.id, "kind", "from"]
        if c.drift.unintended:
            parts.append(
                "<h3>Unintended differences</h3>"
                + _table(header, _diff_rows(c.drift.unintended, numbered=False))
            )
        if c.drift.intended:
            parts.append(
                "<h3>Intended differences</h3>"
                + _table(header, _diff_rows(c.drift.intended, numbered=False))
            )
    parts.append(_launches(c))
    summary = (
        f"{_e(c.id)} — {_e(c.compat)}, {_e(c.verdict.value)}"
        f" · {_fmt.count(len(c.findings), 'finding')}"
        f" · {_fmt.count(n_unintended, 'unintended difference')}"
    )
    return f"<details><summary>{summary}</summary>{''.join(parts)}</details>"


def _phases(c: CellReport) -> str:
    rows = [
        [
            _e(p.phase),
            _status_badge(p.status),
            _e(p.code or ""),
            _message(p.message),
            _e(f"{p.duration_s:.1f}"),
        ]
        for p in c.phases
    ]
    return _table(["phase", "status", "code", "message", "seconds#"], rows)


def _findings(by_phase: dict[str, tuple[Finding, ...]]) -> str:
    if not by_phase:
        return '<p class="muted">No findings.</p>'
    out = []
    for phase, findings in by_phase.items():
        items = "".join(
            f'<li><span class="sev-{f.severity.value}">{_e(f.severity.value)}</span> '
            f"<code>{_e(f.code)}</code>{' (' + _e(f.subject) + ')' if f.subject else ''}: "
            f"{_e(f.message)}</li>"
            for f in findings
        )
        worst = min((f.severity for f in findings), key=_order)
        out.append(
            f"<details{' open' if worst is not Severity.INFO else ''}><summary>"
            f"{_e(PHASE_KINDS.get(phase, phase))} ({len(findings)})</summary>"
            f"<ul>{items}</ul></details>"
        )
    return "<h3>Findings</h3>" + "".join(out)


def _message(text: str) -> str:
    first, _, rest = text.partition("\n")
    if not rest.strip():
        return _e(first)
    return f"{_e(first)}<details><summary>more</summary><pre>{_e(rest.strip())}</pre></details>"


def _order(s: Severity) -> int:
    return {Severity.FAIL: 0, Severity.WARN: 1, Severity.INFO: 2}[s]


def _launches(c: CellReport) -> str:
    if not c.launches and not c.warmup_launches:
        return ""
    rows = [
        [
            _e(launch.label),
            _e(launch.status),
            _e(_fmt.number(launch.value)),
            _e(" ".join(_fmt.number(r) for r in launch.rounds)),
            (_badge("outlier", "open") + " " if launch.outlier else "")
            + _e(_fmt.facts_text(launch.env_facts)),
        ]
        for launch in (*c.warmup_launches, *c.launches)
    ]
    return "<h3>Launches</h3>" + _table(
        ["launch", "status", "median#", "rounds", "environment"], rows
    )


def _spec(report: MatrixReport) -> str:
    names = sorted({k for c in report.cells for k in c.versions})
    rows = [
        [f"<b>{_e(c.id)}</b>", *[_e(c.versions.get(n, "—")) for n in names]] for c in report.cells
    ]
    versions = _table(["cell", *names], rows) if names else ""
    spec = (
        f"<details><summary>spec.toml (hash {_e(report.spec_hash)})</summary>"
        f"<pre>{_e(report.spec_text)}</pre></details>"
        if report.spec_text
        else '<p class="muted">spec.toml was not kept with these results.</p>'
    )
    return "<h2>Spec and versions</h2>" + versions + spec
