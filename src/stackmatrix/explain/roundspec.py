"""A round's derived spec, typed: the baseline, the candidate and one cell per reverted
group, each made from the run's own cells with `dataclasses.replace` (relative paths made
absolute), with the round's launches; and the check that it is a spec the loader takes."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from stackmatrix.errors import SpecError
from stackmatrix.explain.context import ExplainContext
from stackmatrix.explain.derive import Change, pin_names
from stackmatrix.spec_model import Bench, Cell, ReportPolicy, Spec
from stackmatrix.specfile.write import dumps

_UNSAFE = re.compile(r"[^A-Za-z0-9._~=+,-]+")


def group_id(cell: str, k: int, i: int, group: Sequence[Change]) -> str:
    if len(group) == 1:
        change = group[0]
        name = f"{cell}~{change.slug}={change.to_value}"
    else:
        name = f"{cell}~revert-r{k}{'abcdefgh'[i % 8]}-{len(group)}"
    return _UNSAFE.sub("_", name)[:128]


def derived_spec(
    ctx: ExplainContext,
    k: int,
    groups: Sequence[tuple[Change, ...]],
    ids: Sequence[str],
    path: Path,
) -> Spec:
    """Round `k`'s spec, to be written at `path` (where the round's run reads it from)."""
    run = ctx.spec
    cand = ctx.candidate
    cells = [_round_cell(ctx, ctx.baseline_cell), _round_cell(ctx, cand)]
    for cid, group in zip(ids, groups, strict=True):
        cells.append(_round_cell(ctx, _reverted(cand, group), cid))
    policy = run.report
    # a round judges the headline metric only, and explains nothing itself; no SLO
    # either: this spec's text is what a kept round is resumed by, and a changed SLO
    # must not refuse rounds it did not change (the explanation says so: text.py)
    report = ReportPolicy(
        headline=policy.headline, confidence=policy.confidence, min_effect=policy.min_effect
    )
    return Spec(
        name=f"{run.name}-explain",
        path=str(path),
        description=f"stackmatrix explain {ctx.cell}: round {k}",
        baseline=ctx.baseline,
        targets=run.targets,
        driver=run.driver or None,
        order="interleaved",
        cells=tuple(cells),
        bench=_bench(ctx, run.bench or Bench()),
        report=report,
        executor=run.executor,  # the rounds run where the run ran (Slurm's settings too)
    )


def check(spec: Spec) -> str:
    """The spec's TOML text, once the loader has taken it and read back this very spec:
    what a derived spec asks for (an id, a pin, a path, a count) is held to every rule a
    spec file is, before anything is built. Raises SpecError as loading the file would."""
    from stackmatrix.specfile import parse_spec

    text = dumps(spec)
    loaded = parse_spec(tomllib.loads(text), path=spec.path)
    if loaded != spec:  # a value the loader would have read otherwise (a bug here)
        differ = [f.name for f in fields(Spec) if getattr(loaded, f.name) != getattr(spec, f.name)]
        raise SpecError(spec.path, [f"{', '.join(differ)}: not read back as derived"])
    return text


def _reverted(cand: Cell, group: Sequence[Change]) -> Cell:
    """The candidate with the group's differences taken back to the baseline's values."""
    server_args, env, pins = list(cand.server_args), dict(cand.env), list(cand.pins)
    for change in group:
        if change.server_args is not None:
            server_args = list(change.server_args)
        server_args += change.args
        env.update(change.env)
        pins = _replace_pins(pins, change.pins)
    return replace(
        cand, server_args=tuple(server_args), env=tuple(sorted(env.items())), pins=tuple(pins)
    )


def _replace_pins(pins: Sequence[str], new: Sequence[str]) -> list[str]:
    names = pin_names(new)
    return [p for p in pins if pin_names([p]) & names == set()] + [_normal(p) for p in new]


def _normal(pin: str) -> str:
    """A pin as the loader keeps it (`str(Requirement(pin))`); one it would refuse is
    left for `check` to say."""
    try:
        return str(Requirement(pin))
    except InvalidRequirement:
        return pin


def _round_cell(ctx: ExplainContext, cell: Cell, cell_id: str | None = None) -> Cell:
    """A cell of the round spec: fully defined where it lives (under explain/<cell>/), its
    local paths made absolute; its axis labels and description are not the round's."""
    return replace(
        cell,
        id=cell.id if cell_id is None else cell_id,
        index_url=_absolute(ctx, cell.index_url) if cell.index_url else cell.index_url,
        extra_index_urls=tuple(_absolute(ctx, v) for v in cell.extra_index_urls),
        find_links=tuple(_absolute(ctx, v) for v in cell.find_links),
        ca_certs=tuple(_absolute(ctx, v) for v in cell.ca_certs),
        description="",
        axes=(),
    )


def _absolute(ctx: ExplainContext, value: str) -> str:
    """A path relative to the original spec, made absolute for the derived spec."""
    if value.startswith(("./", "../")):
        return str((ctx.spec_dir / value).resolve())
    return value


def warmup_launches(ctx: ExplainContext, bench: Bench | None) -> int:
    """The rounds' warm-up launches per cell: asked for, or the run's, at least one (on
    the H200, 3 of a round's 4 cells paid 30-66% for a cold first launch without one)."""
    if ctx.warmup_launches is not None:
        return ctx.warmup_launches
    return max(bench.warmup_launches if bench is not None else 0, 1)


def _bench(ctx: ExplainContext, bench: Bench) -> Bench:
    if ctx.launches is not None:  # a fixed count, where the run's may have been adaptive
        bench = replace(bench, launches=ctx.launches, min_launches=None)
    workload = bench.workload if ctx.warmup is None else replace(bench.workload, warmup=ctx.warmup)
    model = bench.model
    if model and not Path(model).is_absolute():
        candidate = ctx.spec_dir / model
        if candidate.exists():
            model = str(candidate.resolve())
    # a round judges the headline metric only: no load points
    return replace(
        bench,
        warmup_launches=warmup_launches(ctx, bench),
        workload=workload,
        points=(),
        model=model,
    )
