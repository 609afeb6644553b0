"""The verdicts a comparison can reach: one entry each, with what the bench, the report's
renderers, the policy and `explain` need to know of it, so none of them keeps a list of
verdicts.

Which verdict a comparison reaches is `stats/verdict.py` (`verdict_of`, `_decide`); its
meaning is documented in docs/report.md. A new verdict is its member of `Verdict` and
its `VerdictTraits` in `VERDICTS` here (`tests/unit/test_verdict_registry.py` fails on
a member without one), and its place in `stats/verdict.py`:
`tests/unit/report/test_verdict_recipe.py` performs it. This module imports nothing of
stackmatrix.
"""

from __future__ import annotations

import enum
from typing import Literal, NamedTuple

__all__ = ["DIFFERENCES", "VERDICTS", "JUnitOutcome", "Verdict", "VerdictTraits", "traits"]


class Verdict(enum.StrEnum):
    BASELINE = "baseline"
    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    INCONCLUSIVE = "inconclusive"
    NOT_MEASURED = "not measured"

    @property
    def decided(self) -> bool:
        """A verdict more launches would not be asked to change (`bench/adaptive.py`
        stops a cell's launches on one)."""
        return VERDICTS[self].decided


JUnitOutcome = Literal["pass", "failure", "skipped"]


class VerdictTraits(NamedTuple):
    # more launches would not be asked to change it
    decided: bool
    # a difference shown: in bold in matrix.md, explained beside the cell's unintended
    # differences (md and html), a change `explain` looks for the cause of
    difference: bool
    # its colour in matrix.html: a class of report/_html.py's CSS
    tone: str
    # the JUnit outcome of its perf[...] and slo[goodput] cases
    junit: JUnitOutcome
    # `--fail-on regression` fails the run on it (`goodput-regression` on the goodput's)
    regression: bool


VERDICTS: dict[Verdict, VerdictTraits] = {
    Verdict.BASELINE: VerdictTraits(
        decided=True, difference=False, tone="base", junit="pass", regression=False
    ),
    Verdict.FASTER: VerdictTraits(
        decided=True, difference=True, tone="faster", junit="pass", regression=False
    ),
    Verdict.SLOWER: VerdictTraits(
        decided=True, difference=True, tone="slower", junit="failure", regression=True
    ),
    Verdict.EQUIVALENT: VerdictTraits(
        decided=True, difference=False, tone="same", junit="pass", regression=False
    ),
    Verdict.INCONCLUSIVE: VerdictTraits(
        decided=False, difference=False, tone="open", junit="skipped", regression=False
    ),
    Verdict.NOT_MEASURED: VerdictTraits(
        decided=False, difference=False, tone="open", junit="skipped", regression=False
    ),
}

# the verdicts that show a difference, as matrix.json spells them
DIFFERENCES = tuple(v.value for v, t in VERDICTS.items() if t.difference)


def traits(verdict: Verdict) -> VerdictTraits:
    return VERDICTS[verdict]
