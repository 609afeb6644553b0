"""The inline plots: any range of values gives a bounded axis, quickly."""

import math
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given
from hypothesis import strategies as st

from stackmatrix.report import _svg, build_report
from stackmatrix.report._svg import BoxRow, IntervalRow, box_plot, interval_plot, nice_ticks

from ._results import bench_data, phase, run_dir, write


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Turn a runaway loop into a failure instead of a hang that eats all memory."""

    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_one_cell_one_launch_one_round_writes_the_four_files(tmp_path):
    # 47.1: exp(log(47.1)) != 47.1, so the geometric mean and the median differ by one
    # rounding step; the axis once got a step of ~1e-14 and never ended
    defs = {"only": {"python": "3.11", "pins": ["torch==2.13.0"]}}
    rd = run_dir(tmp_path, cells=["only"], baseline="only", definitions=defs)
    write(rd / "cells" / "only" / "build.json", phase("only", "build"))
    bench = bench_data([[47.1]], config={})
    write(rd / "cells" / "only" / "bench.json", phase("only", "bench", data=bench))
    with deadline(5):
        outcome = build_report(rd)
    for path in (outcome.markdown, outcome.html, outcome.json, outcome.junit):
        assert path.is_file() and path.stat().st_size > 0
    assert "<svg" in outcome.html.read_text()


def test_a_range_of_one_rounding_step_gets_a_few_ticks():
    with deadline(2):
        ticks = nice_ticks(47.1, math.nextafter(47.1, 48.0))
    assert 2 <= len(ticks) <= _svg.MAX_TICKS
    assert ticks[0] <= 47.1 <= ticks[-1]


def test_non_finite_values_are_left_out_of_the_plots():
    with deadline(2):
        assert nice_ticks(math.nan, 1.0) == [] and nice_ticks(0.0, math.inf) == []
        row = IntervalRow(
            label="a", points=[1.0, math.nan], center=math.inf, low=None, high=None, tone="base"
        )
        svg = interval_plot(
            [row],
            reference=None,
            unit="tok/s",
            title="t",
        )
        box = box_plot(
            [BoxRow(label="b", quantiles={"p5": math.nan, "p25": 1, "p50": 2, "p75": 3, "p95": 4})],
            unit="ms",
            title="t",
        )
    assert "nan" not in svg and "inf" not in svg and box == ""


@given(st.floats(allow_nan=True), st.floats(allow_nan=True))
def test_ticks_are_bounded_for_any_range(low, high):
    with deadline(2):
        ticks = nice_ticks(low, high)
    assert len(ticks) <= _svg.MAX_TICKS
    assert all(math.isfinite(t) for t in ticks)
