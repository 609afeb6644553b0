"""The cells of a spec: its [[cell]] tables and the expansion of its [axes] (with
include and exclude, as GitHub Actions does), each cell's layers merged and checked."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from stackmatrix import backend_registry
from stackmatrix._cellid import ID_RE
from stackmatrix._validate import Problems, join, type_name
from stackmatrix.backend_registry import DEFAULT_BACKEND
from stackmatrix.spec_model import BACKENDS, Cell
from stackmatrix.specfile._values import (
    check_bool,
    check_choice,
    check_env,
    check_int,
    check_list,
    check_opt,
    check_pins,
    check_str,
    check_url,
    check_urls,
    duplicates,
    get_table,
    get_table_list,
)

_PY_RE = re.compile(r"^3\.\d{1,2}(\.\d{1,2})?$")
_CUDA_RE = re.compile(r"^\d{2}\.\d$")
_TORCH_BACKEND_RE = re.compile(r"^(auto|cpu|cu\d{2,3}|rocm[\d.]+|xpu)$")

LIST_FIELDS = ("pins", "extra_index_urls", "find_links", "server_args", "runs_on", "ca_certs")
CELL_KEYS = tuple(f.name for f in fields(Cell) if f.name != "axes")

MAX_CELLS = 1000  # the spec is expanded whole

# Every cell id met while expanding, valid cell or not, with where it comes from, so
# that a duplicate is reported with both places, whichever table produced it.
CellIds = list[tuple[str, str]]

# A table of cell fields as the TOML file has it (its values not yet checked), and
# where it comes from: the layers a cell is merged from.
Layer = tuple[str, Mapping[str, object]]


def explicit_cells(
    raw: Mapping[str, Any], defaults: Mapping[str, object], p: Problems, ids: CellIds
) -> list[Cell]:
    tables = raw.get("cell", [])
    if not isinstance(tables, list):
        p.add("cell", f"expected an array of tables ([[cell]]), got {type_name(tables)}")
        return []
    cells = []
    for i, table in enumerate(tables):
        path = join("cell", i)
        if not isinstance(table, dict):
            p.add(path, f"expected a table, got {type_name(table)}")
            continue
        p.unknown_keys(path, table, CELL_KEYS)
        if "id" not in table:
            p.add(join(path, "id"), 'every [[cell]] needs an id, e.g. id = "cu128"')
            continue
        cell = _make_cell([("defaults", defaults), (path, table)], (), p, ids)
        if cell is not None:
            cells.append(cell)
    return cells


def axis_cells(
    raw: Mapping[str, Any], defaults: Mapping[str, object], p: Problems, ids: CellIds
) -> list[Cell]:
    axes = get_table(raw, "axes", "", p)
    include = get_table_list(raw, "include", p)
    exclude = get_table_list(raw, "exclude", p)
    if not axes:
        if include or exclude:
            p.add("include" if include else "exclude", "include/exclude need an [axes] table")
        return []
    bad = [name for name in axes if not ID_RE.match(name)]
    for name in bad:  # "__include__" once broke the expansion with a traceback
        p.add(join("axes", name), f"axis name {name!r} must match {ID_RE.pattern}")
    if bad:
        return []
    values = {name: _axis_values(name, vals, p) for name, vals in axes.items()}
    if any(not v for v in values.values()):
        return []
    size = math.prod(len(v) for v in values.values())
    if size > MAX_CELLS:  # before expanding: 1000 x 1000 axes once hung here
        sizes = " x ".join(str(len(v)) for v in values.values())
        p.add(
            "axes",
            f"the axes expand to {size} combinations ({sizes}); at most "
            f"{MAX_CELLS} cells: split the matrix into several specs",
        )
        return []
    product = itertools.product(*values.values())
    combos = [_Combo(dict(zip(values, combo, strict=True))) for combo in product]
    combos = _without_excluded(combos, exclude)
    _check_excludes(values, exclude, p)
    extra_cells = _apply_includes(combos, values, include, defaults, p, ids)
    if not combos and not extra_cells:
        p.add("axes", "the axes expand to no cell at all (exclude removed every combination)")
    cells = []
    for combo in combos:
        cell = _combo_cell(combo, values, defaults, p, ids)
        if cell is not None:
            cells.append(cell)
    return cells + extra_cells


AxisEntry = tuple[str, Mapping[str, object]]  # (label, cell fields)


@dataclass
class _Combo:
    """One combination of the axes: each axis's entry, and the includes that extend it."""

    entries: dict[str, AxisEntry]
    includes: list[Layer] = field(default_factory=list)


def _axis_values(name: str, vals: object, p: Problems) -> list[AxisEntry]:
    path = join("axes", name)
    if not isinstance(vals, list):
        p.add(path, f"an axis is an array of values, got {type_name(vals)}")
        return []
    if not vals:
        p.add(path, "this axis has no values, so the matrix would be empty")
        return []
    entries = []
    for i, val in enumerate(vals):
        entry = _axis_entry(name, i, val, p)
        if entry is not None:
            entries.append(entry)
    labels = [label for label, _ in entries]
    for dup in duplicates(labels):
        p.add(path, f"label {dup!r} appears twice; labels of an axis must be unique")
    return entries


def _axis_entry(axis: str, i: int, val: object, p: Problems) -> AxisEntry | None:
    path = join(join("axes", axis), i)
    if isinstance(val, dict):
        body = {k: v for k, v in val.items() if k != "label"}
        p.unknown_keys(path, body, [k for k in CELL_KEYS if k != "id"] + ["label"])
        label = val.get("label", f"{axis}{i}")
        if not isinstance(label, str) or not ID_RE.match(label):
            p.add(join(path, "label"), f"label {label!r} must match {ID_RE.pattern}")
            return None
        return label, body
    if axis not in CELL_KEYS or axis == "id":
        p.add(
            path,
            f"axis {axis!r} is not a cell field, so its values must be tables of cell "
            f'fields (e.g. {{label = "a", pins = [...]}}); got {val!r}',
        )
        return None
    label = str(val).replace(" ", "_")
    if not ID_RE.match(label):
        p.add(path, f"value {val!r} cannot be part of a cell id; use a table with a label")
        return None
    return label, {axis: val}


def _key(selector: Mapping[str, object]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    axes = tuple(sorted(selector))
    return axes, tuple(str(selector[a]) for a in axes)


def _labels(combo: Mapping[str, AxisEntry], axes: tuple[str, ...]) -> tuple[str, ...] | None:
    if not all(a in combo for a in axes):
        return None
    return tuple(combo[a][0] for a in axes)


def _without_excluded(
    combos: list[_Combo], exclude: Sequence[Mapping[str, object]]
) -> list[_Combo]:
    """Excludes indexed by the axes they name: one set lookup per combination and axis
    set, not one comparison per exclude (40,000 excludes took minutes)."""
    index: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
    for ex in exclude:
        axes, labels = _key(ex)
        index.setdefault(axes, set()).add(labels)
    return [
        c
        for c in combos
        if not any(_labels(c.entries, axes) in wanted for axes, wanted in index.items())
    ]


def _by_labels(combos: list[_Combo], axes: tuple[str, ...]) -> dict[tuple[str, ...], list[_Combo]]:
    out: dict[tuple[str, ...], list[_Combo]] = {}
    for c in combos:
        labels = _labels(c.entries, axes)
        if labels is not None:
            out.setdefault(labels, []).append(c)
    return out


def _check_excludes(
    values: Mapping[str, list[AxisEntry]], exclude: Sequence[Mapping[str, object]], p: Problems
) -> None:
    labels = {axis: {label for label, _ in entries} for axis, entries in values.items()}
    for i, ex in enumerate(exclude):
        for key, val in ex.items():
            if key not in values:
                p.unknown_keys(join("exclude", i), {key: val}, list(values))
            elif str(val) not in labels[key]:
                p.add(join(join("exclude", i), key), f"{val!r} is not a label of axis {key!r}")


def _apply_includes(
    combos: list[_Combo],
    values: Mapping[str, list[AxisEntry]],
    include: Sequence[Mapping[str, object]],
    defaults: Mapping[str, object],
    p: Problems,
    ids: CellIds,
) -> list[Cell]:
    """GitHub-Actions semantics: an include that matches combinations extends them;
    one that matches none is a cell of its own (it then needs an id), with the
    [defaults] like a [[cell]] table."""
    extra: list[Cell] = []
    index: dict[tuple[str, ...], dict[tuple[str, ...], list[_Combo]]] = {}
    for i, inc in enumerate(include):
        path = join("include", i)
        selector = {k: v for k, v in inc.items() if k in values}
        body = {k: v for k, v in inc.items() if k not in values}
        p.unknown_keys(path, body, CELL_KEYS)
        hits: list[_Combo] = []
        if selector:
            axes, labels = _key(selector)
            if axes not in index:
                index[axes] = _by_labels(combos, axes)
            hits = index[axes].get(labels, [])
        for combo in hits:
            combo.includes.append((path, body))
        if hits:
            continue
        if "id" not in body:
            p.add(
                path,
                "this include matches no combination of the axes, so it adds a cell "
                "and needs an id",
            )
            continue
        cell = _make_cell([("defaults", defaults), (path, body)], (), p, ids)
        if cell is not None:
            extra.append(cell)
    return extra


def _combo_cell(
    combo: _Combo,
    values: Mapping[str, list[AxisEntry]],
    defaults: Mapping[str, object],
    p: Problems,
    ids: CellIds,
) -> Cell | None:
    layers: list[Layer] = [("defaults", defaults)]
    labels = []
    for axis in values:
        label, body = combo.entries[axis]
        labels.append((axis, label))
        layers.append((join("axes", axis), body))
    layers += combo.includes
    cell_id = "-".join(label for _, label in labels)
    if not any("id" in body for _, body in layers):
        layers.append(("axes", {"id": cell_id}))
        ids.append((cell_id, f"the axes ({', '.join(f'{a}={v}' for a, v in labels)})"))
        return _make_cell(layers, tuple(labels), p, None)
    return _make_cell(layers, tuple(labels), p, ids)


# ---------------------------------------------------------------- one cell


def _merge(layers: Sequence[Layer]) -> tuple[dict[str, object], dict[str, str]]:
    """Later layers override scalars, extend lists (a later pin of the same package
    replaces the earlier one) and merge env tables. Returns values and their paths."""
    merged: dict[str, object] = {}
    where: dict[str, str] = {}
    for path, body in layers:
        for key, val in body.items():
            where[key] = join(path, key)
            old = merged.get(key)
            if key == "pins" and isinstance(val, list) and isinstance(old, list):
                merged[key] = _merge_pins(old, val)
            elif key in LIST_FIELDS and isinstance(val, list) and isinstance(old, list):
                merged[key] = [*old, *val]
            elif key == "env" and isinstance(val, dict) and isinstance(old, dict):
                merged[key] = {**old, **val}
            else:
                merged[key] = val
    return merged, where


def _merge_pins(old: list[object], new: list[object]) -> list[object]:
    names = {_pin_name(x) for x in new} - {None}
    return [x for x in old if _pin_name(x) not in names] + new


def _pin_name(pin: object) -> str | None:
    try:
        return canonicalize_name(Requirement(pin).name) if isinstance(pin, str) else None
    except InvalidRequirement:
        return None


def _make_cell(
    layers: Sequence[Layer], axes: tuple[tuple[str, str], ...], p: Problems, ids: CellIds | None
) -> Cell | None:
    v, where = _merge(layers)
    before = len(p.items)
    if ids is not None and isinstance(given := v.get("id"), str):
        ids.append((given, where["id"]))

    def path(key: str) -> str:
        return where.get(key, key)

    # each value checked in the order of Cell's fields (the order of the problems)
    cell_id = check_str(v.get("id"), path("id"), p, pattern=ID_RE, what="a cell id")
    python = check_str(v.get("python", "3.11"), path("python"), p, _PY_RE, "3.X")
    cuda = check_opt(v, "cuda", path, p, _CUDA_RE, "major.minor, e.g. 12.8")
    backend = check_choice(v.get("backend", DEFAULT_BACKEND), path("backend"), BACKENDS, p)
    base_image = check_opt(v, "base_image", path, p)
    pins = tuple(check_pins(v.get("pins", []), path("pins"), p))
    index_url = check_url(v.get("index_url"), path("index_url"), p)
    extra_index_urls = tuple(check_urls(v, "extra_index_urls", path, p))
    find_links = tuple(check_urls(v, "find_links", path, p))
    torch_backend = check_opt(v, "torch_backend", path, p, _TORCH_BACKEND_RE, "cpu/cu128")
    env = check_env(v.get("env", {}), path("env"), p)
    server_args = tuple(check_list(v.get("server_args", []), path("server_args"), p))
    runs_on = tuple(check_list(v.get("runs_on", []), path("runs_on"), p))
    gpus = check_int(v.get("gpus", 0), path("gpus"), p, minimum=0)
    ca_certs = tuple(check_list(v.get("ca_certs", []), path("ca_certs"), p))
    inherit = check_opt(v, "inherit", path, p, _INHERIT_RE, '"current" or /abs/python')
    offline = check_bool(v.get("offline", False), path("offline"), p)
    no_deps = check_bool(v.get("no_deps", False), path("no_deps"), p)
    description = check_str(v.get("description", ""), path("description"), p) or ""
    layering = {
        "backend": backend,
        "inherit": inherit,
        "offline": offline,
        "no_deps": no_deps,
        "find_links": find_links,
        "pins": pins,
    }
    _check_layering(layering, path, p)
    if len(p.items) != before:
        return None
    # without a problem, only the fields a cell may leave out are None (the others have
    # a default); the backend is one of BACKENDS, its registry's names
    if cell_id is None or python is None or backend not in BACKENDS or gpus is None:
        return None
    return Cell(
        id=cell_id,
        python=python,
        cuda=cuda,
        backend=backend,
        base_image=base_image,
        pins=pins,
        index_url=index_url,
        extra_index_urls=extra_index_urls,
        find_links=find_links,
        torch_backend=torch_backend,
        env=env,
        server_args=server_args,
        runs_on=runs_on,
        gpus=gpus,
        ca_certs=ca_certs,
        inherit=inherit,
        offline=offline,
        no_deps=no_deps,
        description=description,
        axes=axes,
    )


_INHERIT_RE = re.compile(r"^(current|/[^\x00]*)$")


def _check_layering(kwargs: Mapping[str, object], path: Callable[[str], str], p: Problems) -> None:
    backend = kwargs.get("backend")
    for flag in (key for entry in backend_registry.BACKENDS for key in entry.cell_keys):
        owner = backend_registry.owner_of(flag)
        if kwargs.get(flag) and backend is not None and backend != owner:
            p.add(path(flag), f"applies to the {owner} backend only, not {backend!r}")
    if kwargs.get("offline") and not kwargs.get("find_links") and kwargs.get("pins"):
        p.add(
            path("offline"),
            "an offline cell installs only from find_links: add the wheel directory, "
            'e.g. find_links = ["/opt/wheels"]',
        )
