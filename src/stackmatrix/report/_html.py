"""The HTML pieces matrix.html is made of: its style sheet, escaping, badges and tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from stackmatrix import _sanitize
from stackmatrix.verdict_registry import VERDICTS

TONE = {verdict: traits.tone for verdict, traits in VERDICTS.items()}
COMPAT_TONE = {"compatible": "faster", "warnings": "open", "incompatible": "slower"}
TARGET_TONE = {"native": "faster", "ptx": "open", "none": "slower"}

CSS = """
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
.plot .axis-note{font-size:11px;font-weight:600;fill:var(--amber)}
.plot .ytick{font-size:11px;fill:var(--muted);text-anchor:end}
.plot .legend{font-size:12px;fill:var(--fg)}.plot .trail{fill:none;stroke-width:1;opacity:.35}
.sev-fail{color:var(--red);font-weight:600}.sev-warn{color:var(--amber);font-weight:600}
.sev-info{color:var(--muted)}
.spark{vertical-align:middle;color:var(--blue)}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}
"""


def esc(value: object) -> str:
    """A value of one line as HTML text (escaped, and `_sanitize.line`: an id or a
    message from results may hold bidirectional overrides or controls)."""
    return escape(_sanitize.line(value))


def pre(value: object) -> str:
    """A text of several lines as the content of a <pre>."""
    return escape(_sanitize.text(value))


def badge(text: str, tone: str) -> str:
    return f'<span class="badge {tone}">{esc(text)}</span>'


def html_table(header: Sequence[str], rows: Iterable[Sequence[str]], *, cls: str = "") -> str:
    """`rows` hold ready HTML; a header ending in '#' marks a right-aligned number column."""
    nums = [len(h) > 1 and h.endswith("#") for h in header]
    head = "".join(f"<th>{esc(h[:-1] if n else h)}</th>" for h, n in zip(header, nums, strict=True))
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


def status_badge(status: str) -> str:
    tones = {"ok": "faster", "failed": "slower", "interrupted": "slower", "unreadable": "slower"}
    tone = tones.get(status, "open")
    return badge(status, tone)
