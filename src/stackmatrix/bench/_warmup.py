"""Warm-up launches: discarded, before the first measured one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from stackmatrix.bench import workload
from stackmatrix.bench._cell import CellState
from stackmatrix.bench._launch import Points, run_launch
from stackmatrix.bench.engines import Engine
from stackmatrix.spec_model import Bench

Progress = Callable[[str, str], None]


def warm_up(
    bench: Bench,
    engine: Engine,
    states: Mapping[str, CellState],
    slots: Sequence[tuple[str, int]],
    model: str,
    wl: workload.WorkloadSet,
    say: Progress,
    points: Points = (),
) -> None:
    """`bench.warmup_launches` discarded launches of each cell that has launches to run
    (none set: one launch of the first cell, `bench.host_warmup`), in the schedule's
    order, before the first measured one: a machine's first server
    launch pays for cold caches (files, GPU clocks, compile caches) that later launches
    do not. Each runs one round of the headline and of each load point (what a JIT
    compiles for a point's batch sizes, it compiles here, not in a measured launch);
    it is recorded in bench.json under "warmup_launches"
    and left out of every statistic. A failure here is recorded, not fatal: the
    measured launches then fail (or not) on their own."""
    if not engine.launches_server or not slots:
        return
    cells = list(dict.fromkeys(cid for cid, _ in slots))
    count = bench.warmup_launches
    if not count and bench.host_warmup:
        # one launch on this host, not one per cell: the machine is what is cold
        cells, count = cells[:1], 1
    # one round: a minimum duration is for measured launches
    one_round = dataclasses.replace(bench, rounds=1, min_duration_s=0.0)
    for w in range(1, count + 1):
        for cid in cells:
            st = states[cid]
            if st.failed:
                continue
            say(cid, f"warm-up launch {w}/{count} (discarded)")
            try:
                run = run_launch(one_round, engine, st, f"W{w}", 0, model, wl, points)
            except Exception as exc:  # as for a measured launch
                st.crash(exc, f"warm-up launch {w}")
                say(cid, f"bench failed: {st.result.message}")
                continue
            launch = run.record(measured=False)
            warm = [x for x in st.data.warmup_launches if x.index != f"W{w}"]
            st.data = dataclasses.replace(st.data, warmup_launches=(*warm, launch))
            st.save()
            if launch.status != "ok":
                say(cid, f"warm-up launch failed: {launch.message or ''}")
