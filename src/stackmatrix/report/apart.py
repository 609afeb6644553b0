"""What sets a cell apart from the baseline, in one sentence beside its verdict.

A verdict says how much faster or slower; the configuration comparison (config_drift.py)
says what differs. Read together on the first screen, they answer "why": a cell that
differs in one recorded setting and is decided slower is slower by that setting (as far
as the run recorded); a cell that differs in nothing is an A/A pair, whose verdict
measures the protocol; a cell that differs in several needs `stackmatrix explain` to
say which one moves it.
"""

from __future__ import annotations

from stackmatrix.report import fmt as _fmt
from stackmatrix.report.config_drift import Difference, Drift

_SHOWN = 60
_NAMED = 3
_EXPLAIN = "; `stackmatrix explain` measures which of them moves the headline"


def _one(d: Difference) -> str:
    who = f"asked for by the cell's {d.because}" if d.because else "not asked for by its definition"
    return f"{_brief(d)} ({who})"


def _brief(d: Difference) -> str:
    before, after = _fmt.shorten(d.baseline, _SHOWN), _fmt.shorten(d.value, _SHOWN)
    return f"{_fmt.setting(d)} {before} → {after}"


def set_apart(drift: Drift | None, baseline: str) -> str | None:
    """None where there is nothing to compare (the baseline, a cell without facts)."""
    if drift is None:
        return None
    diffs = (*drift.intended, *drift.unintended)
    unread = f"; not compared: {'; '.join(drift.not_compared)}" if drift.not_compared else ""
    if not diffs and not drift.not_compared:
        return f"no recorded setting differs from {baseline}: an A/A pair"
    if not diffs:
        return f"no compared setting differs from {baseline}{unread}"
    if len(diffs) == 1:
        return f"the one recorded setting that differs from {baseline}: {_one(diffs[0])}{unread}"
    if not drift.unintended:
        named = "; ".join(_brief(d) for d in drift.intended[:_NAMED])
        more = len(drift.intended) - _NAMED
        asks = {d.because for d in drift.intended}
        return (
            f"it differs from {baseline} only in what its definition asks for ({named}"
            + (f"; {more} more" if more > 0 else "")
            + ")"
            + (_EXPLAIN if len(asks) > 1 else "")
            + unread
        )
    return (
        f"{len(diffs)} recorded settings differ from {baseline} ({len(drift.intended)} asked "
        f"for by its definition, {len(drift.unintended)} not; the most consequential of those "
        f"not asked for: {_one(drift.unintended[0])})" + _EXPLAIN + unread
    )
