"""A round's derived spec: the baseline, the candidate and one cell per reverted group,
every cell fully defined (relative paths made absolute), with the round's launches."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stackmatrix.explain.context import Context
from stackmatrix.explain.derive import Change

_UNSAFE = re.compile(r"[^A-Za-z0-9._~=+,-]+")
_LOCAL_KEYS = ("find_links", "extra_index_urls", "ca_certs")


def group_id(cell: str, k: int, i: int, group: Sequence[Change]) -> str:
    if len(group) == 1:
        change = group[0]
        name = f"{cell}~{change.slug}={change.to_value}"
    else:
        name = f"{cell}~revert-r{k}{'abcdefgh'[i % 8]}-{len(group)}"
    return _UNSAFE.sub("_", name)[:128]


def derived_spec(
    ctx: Context, k: int, groups: Sequence[tuple[Change, ...]], ids: Sequence[str]
) -> dict[str, Any]:
    raw = ctx.raw_spec
    base, cand = ctx.definitions[ctx.baseline], ctx.definitions[ctx.cell]
    cells = [_cell_table(ctx, base), _cell_table(ctx, cand)]
    for cid, group in zip(ids, groups, strict=True):
        cells.append(_cell_table(ctx, _reverted(cand, group), cid))
    bench = _bench(ctx, dict(raw.get("bench") or {}))
    report = {k2: v for k2, v in (raw.get("report") or {}).items()
              if k2 in ("headline", "confidence", "min_effect")}  # fmt: skip
    spec: dict[str, Any] = {
        "name": f"{raw.get('name', 'run')}-explain",
        "description": f"stackmatrix explain {ctx.cell}: round {k}",
        "baseline": ctx.baseline,
        "targets": list(raw.get("targets") or []),
        "order": "interleaved",
        "cell": cells,
        "bench": bench,
        "report": report,
    }
    if raw.get("driver"):
        spec["driver"] = raw["driver"]
    return spec


def _reverted(cand: Mapping[str, Any], group: Sequence[Change]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(dict(cand)))  # a deep copy
    for change in group:
        if change.server_args is not None:
            out["server_args"] = list(change.server_args)
        out["server_args"] = [*out.get("server_args", []), *change.args]
        out["env"] = {**out.get("env", {}), **dict(change.env)}
        out["pins"] = _replace_pins(out.get("pins", []), change.pins)
    return out


def _replace_pins(pins: Sequence[str], new: Sequence[str]) -> list[str]:
    from stackmatrix.explain.derive import pin_names

    names = pin_names(new)
    return [p for p in pins if pin_names([p]) & names == set()] + list(new)


def _cell_table(
    ctx: Context, definition: Mapping[str, Any], cell_id: str | None = None
) -> dict[str, Any]:
    table = {k: v for k, v in definition.items()
             if k not in ("axes",) and v is not None and v != [] and v != {}}  # fmt: skip
    if cell_id is not None:
        table["id"] = cell_id
    for key in _LOCAL_KEYS:
        if key in table:
            table[key] = [_absolute(ctx, v) for v in table[key]]
    if table.get("index_url"):
        table["index_url"] = _absolute(ctx, table["index_url"])
    return table


def _absolute(ctx: Context, value: str) -> str:
    """A path relative to the original spec, made absolute for the derived spec."""
    if value.startswith(("./", "../")):
        return str((ctx.spec_dir / value).resolve())
    return value


def warmup_launches(ctx: Context, bench: Mapping[str, Any]) -> int:
    """The rounds' warm-up launches per cell: asked for, or the run's, at least one (on
    the H200, 3 of a round's 4 cells paid 30-66% for a cold first launch without one)."""
    if ctx.warmup_launches is not None:
        return ctx.warmup_launches
    return max(int(bench.get("warmup_launches") or 0), 1)


def _bench(ctx: Context, bench: dict[str, Any]) -> dict[str, Any]:
    if ctx.launches is not None:
        bench["launches"] = ctx.launches
    bench["warmup_launches"] = warmup_launches(ctx, bench)
    if ctx.warmup is not None:
        bench["workload"] = {**(bench.get("workload") or {}), "warmup": ctx.warmup}
    bench.pop("points", None)  # a round judges the headline metric only
    model = bench.get("model")
    if isinstance(model, str) and not Path(model).is_absolute():
        candidate = ctx.spec_dir / model
        if candidate.exists():
            bench["model"] = str(candidate.resolve())
    return bench
