"""Read and validate a matrix spec (TOML) into `spec_model.Spec`.

Every problem is collected and reported at once (`SpecError`, exit code 2), each
with its key path, the offending value and, for unknown keys, a suggestion.
Values are never turned into shell text anywhere in stackmatrix; here we also
reject characters that have no business in a pin, URL or name.
"""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlparse

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from stackmatrix._validate import Problems, join, type_name
from stackmatrix.errors import SpecError, UsageError
from stackmatrix.spec_model import (
    BACKENDS,
    ENGINES,
    FAIL_ON,
    METRICS,
    ORDERS,
    Bench,
    Cell,
    LoadPoint,
    ReportPolicy,
    Spec,
    Workload,
)

# `~`, `=`, `+` and `,` let explain name derived cells (`cu130~attention_backend=flashinfer`)
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~=+,-]{0,127}$")
_PY_RE = re.compile(r"^3\.\d{1,2}(\.\d{1,2})?$")
_CUDA_RE = re.compile(r"^\d{2}\.\d$")
_TARGET_RE = re.compile(r"^sm_\d{2,3}[af]?$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TORCH_BACKEND_RE = re.compile(r"^(auto|cpu|cu\d{2,3}|rocm[\d.]+|xpu)$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_SHELLISH_RE = re.compile(r"[;&|`$<>\\]|\$\(")

TOP_KEYS = (
    "name", "description", "baseline", "targets", "driver", "order", "order_seed",
    "defaults", "cell", "axes", "include", "exclude", "bench", "report",
)  # fmt: skip
LIST_FIELDS = ("pins", "extra_index_urls", "find_links", "server_args", "runs_on", "ca_certs")
CELL_KEYS = tuple(f.name for f in fields(Cell) if f.name != "axes")
BENCH_KEYS = tuple(f.name for f in fields(Bench))
WORKLOAD_KEYS = tuple(f.name for f in fields(Workload))
REPORT_KEYS = tuple(f.name for f in fields(ReportPolicy))

# Resource bounds (issue 16, defect 10): a spec is read whole and expanded whole, and
# its workload is generated up front; each bound is far above any real matrix.
MAX_SPEC_BYTES = 1 << 20
MAX_CELLS = 1000
MAX_LAUNCHES = 1000  # launches, rounds (per cell)
MAX_TOKENS = 1 << 20  # input_len, output_len (one request)
MAX_PROMPTS = 1_000_000  # num_prompts, warmup, max_concurrency
MAX_WORKLOAD_TOKENS = 100_000_000  # num_prompts x input_len, generated before the bench


def load_spec(path: Path) -> Spec:
    """Read `path`; raise SpecError listing every problem."""
    try:
        raw = tomllib.loads(_read_spec(path))
    except FileNotFoundError as exc:
        raise SpecError(str(path), [f"file not found: {path}"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(str(path), [f"not valid TOML: {exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), [f"not UTF-8 text (TOML must be): {exc}"]) from exc
    except RecursionError as exc:
        raise SpecError(str(path), ["values nested too deeply to read"]) from exc
    except OSError as exc:
        raise SpecError(str(path), [f"cannot read the spec: {exc.strerror}"]) from exc
    return parse_spec(raw, path=str(path))


def _read_spec(path: Path) -> str:
    """At most MAX_SPEC_BYTES of a regular file: /dev/zero never ends and a FIFO blocks
    until someone writes (issue 16, defect 10)."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise SpecError(str(path), ["not a regular file (a FIFO, a device or a socket)"])
    with path.open("rb") as fh:
        data = fh.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(str(path), [f"larger than {MAX_SPEC_BYTES} bytes; not a matrix spec"])
    return data.decode("utf-8")


def _spec_name(raw: Mapping[str, Any], p: Problems) -> str:
    """The name becomes a directory under --reports-dir: one plain name, so that
    "../../x" or "/abs/x" cannot put results elsewhere (issue 16, defect 6)."""
    if "name" not in raw:
        p.add("name", 'missing; add name = "..."')
        return "unnamed"
    what = "a plain name (it names the results directory)"
    return _check_str(raw["name"], "name", p, _ID_RE, what) or "unnamed"


def parse_spec(raw: Mapping[str, Any], *, path: str = "<spec>") -> Spec:
    problems = Problems()
    problems.unknown_keys("", raw, TOP_KEYS)
    name = _spec_name(raw, problems)
    defaults = _table(raw, "defaults", "", problems)
    problems.unknown_keys("defaults", defaults, CELL_KEYS)
    if "id" in defaults:
        problems.add("defaults.id", "a default cell id makes no sense; give each cell its own id")
    cells = _explicit_cells(raw, defaults, problems) + _axis_cells(raw, defaults, problems)
    if not cells and not problems:
        problems.add("cell", "the spec defines no cells; add [[cell]] tables or [axes]")
    _check_unique(_raw_ids(raw) + [c.id for c in cells if c.axes], problems)
    baseline = _baseline(raw, cells, problems)
    targets = tuple(_str_list(raw, "targets", "", problems, pattern=_TARGET_RE, what="sm_XY[a|f]"))
    bench = _bench(raw, problems)
    report = _report(raw, problems)
    order = _choice(raw, "order", "", ORDERS, problems)
    order_seed = _int(raw, "order_seed", "", problems, minimum=0)
    if problems:
        raise SpecError(path, problems.items)
    return Spec(
        name=name,
        path=path,
        baseline=baseline,
        cells=tuple(cells),
        targets=targets,
        driver=_str(raw, "driver", "", problems),
        description=_str(raw, "description", "", problems) or "",
        bench=bench,
        report=report,
        order=cast(Any, order or "interleaved"),
        order_seed=order_seed if order_seed is not None else 0,
    )


# ---------------------------------------------------------------- cells


def _explicit_cells(raw: Mapping[str, Any], defaults: dict[str, Any], p: Problems) -> list[Cell]:
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
        cell = _make_cell([("defaults", defaults), (path, table)], (), p)
        if cell is not None:
            cells.append(cell)
    return cells


def _axis_cells(raw: Mapping[str, Any], defaults: dict[str, Any], p: Problems) -> list[Cell]:
    axes = _table(raw, "axes", "", p)
    include = _table_list(raw, "include", p)
    exclude = _table_list(raw, "exclude", p)
    if not axes:
        if include or exclude:
            p.add("include" if include else "exclude", "include/exclude need an [axes] table")
        return []
    bad = [name for name in axes if not _ID_RE.match(name)]
    for name in bad:  # "__include__" once broke the expansion with a traceback
        p.add(join("axes", name), f"axis name {name!r} must match {_ID_RE.pattern}")
    if bad:
        return []
    values = {name: _axis_values(name, vals, p) for name, vals in axes.items()}
    if any(not v for v in values.values()):
        return []
    size = math.prod(len(v) for v in values.values())
    if size > MAX_CELLS:  # before expanding: 1000 x 1000 axes once hung here
        sizes = " x ".join(str(len(v)) for v in values.values())
        p.add("axes", f"the axes expand to {size} combinations ({sizes}); at most "
              f"{MAX_CELLS} cells: split the matrix into several specs")  # fmt: skip
        return []
    product = itertools.product(*values.values())
    combos = [dict(zip(values, combo, strict=True)) for combo in product]
    combos = [c for c in combos if not any(_matches(c, ex) for ex in exclude)]
    _check_excludes(values, exclude, p)
    extra_cells = _apply_includes(combos, values, include, p)
    if not combos and not extra_cells:
        p.add("axes", "the axes expand to no cell at all (exclude removed every combination)")
    cells = []
    for combo in combos:
        cell = _combo_cell(combo, values, defaults, p)
        if cell is not None:
            cells.append(cell)
    return cells + extra_cells


AxisEntry = tuple[str, dict[str, Any]]  # (label, cell fields)


def _axis_values(name: str, vals: Any, p: Problems) -> list[AxisEntry]:
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
    for dup in _duplicates(labels):
        p.add(path, f"label {dup!r} appears twice; labels of an axis must be unique")
    return entries


def _axis_entry(axis: str, i: int, val: Any, p: Problems) -> AxisEntry | None:
    path = join(join("axes", axis), i)
    if isinstance(val, dict):
        body = {k: v for k, v in val.items() if k != "label"}
        p.unknown_keys(path, body, [k for k in CELL_KEYS if k != "id"] + ["label"])
        label = val.get("label", f"{axis}{i}")
        if not isinstance(label, str) or not _ID_RE.match(label):
            p.add(join(path, "label"), f"label {label!r} must match {_ID_RE.pattern}")
            return None
        return label, body
    if axis not in CELL_KEYS or axis == "id":
        p.add(path, f"axis {axis!r} is not a cell field, so its values must be tables of cell "
              f"fields (e.g. {{label = \"a\", pins = [...]}}); got {val!r}")  # fmt: skip
        return None
    label = str(val).replace(" ", "_")
    if not _ID_RE.match(label):
        p.add(path, f"value {val!r} cannot be part of a cell id; use a table with a label")
        return None
    return label, {axis: val}


def _matches(combo: Mapping[str, AxisEntry], selector: Mapping[str, Any]) -> bool:
    return all(k in combo and combo[k][0] == str(v) for k, v in selector.items())


def _check_excludes(values: Mapping[str, list[AxisEntry]], exclude: list[dict[str, Any]],
                    p: Problems) -> None:  # fmt: skip
    for i, ex in enumerate(exclude):
        for key, val in ex.items():
            if key not in values:
                p.unknown_keys(join("exclude", i), {key: val}, list(values))
            elif str(val) not in [label for label, _ in values[key]]:
                p.add(join(join("exclude", i), key), f"{val!r} is not a label of axis {key!r}")


def _apply_includes(combos: list[dict[str, Any]], values: Mapping[str, list[AxisEntry]],
                    include: list[dict[str, Any]], p: Problems) -> list[Cell]:  # fmt: skip
    """GitHub-Actions semantics: an include that matches combinations extends them;
    one that matches none is a cell of its own (it then needs an id)."""
    extra: list[Cell] = []
    for i, inc in enumerate(include):
        path = join("include", i)
        selector = {k: v for k, v in inc.items() if k in values}
        body = {k: v for k, v in inc.items() if k not in values}
        p.unknown_keys(path, body, CELL_KEYS)
        hits = [c for c in combos if selector and _matches(c, selector)]
        for combo in hits:
            combo.setdefault("__include__", []).append((path, body))
        if hits:
            continue
        if "id" not in body:
            p.add(path, "this include matches no combination of the axes, so it adds a cell "
                  "and needs an id")  # fmt: skip
            continue
        cell = _make_cell([(path, body)], (), p)
        if cell is not None:
            extra.append(cell)
    return extra


def _combo_cell(combo: dict[str, Any], values: Mapping[str, list[AxisEntry]],
                defaults: dict[str, Any], p: Problems) -> Cell | None:  # fmt: skip
    layers: list[tuple[str, dict[str, Any]]] = [("defaults", defaults)]
    labels = []
    for axis in values:
        label, body = combo[axis]
        labels.append((axis, label))
        layers.append((join("axes", axis), body))
    layers += combo.get("__include__", [])
    cell_id = "-".join(label for _, label in labels)
    if not any("id" in body for _, body in layers):
        layers.append(("axes", {"id": cell_id}))
    return _make_cell(layers, tuple(labels), p)


# ---------------------------------------------------------------- one cell


def _merge(layers: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Later layers override scalars, extend lists (a later pin of the same package
    replaces the earlier one) and merge env tables. Returns values and their paths."""
    merged: dict[str, Any] = {}
    where: dict[str, str] = {}
    for path, body in layers:
        for key, val in body.items():
            where[key] = join(path, key)
            if key == "pins" and isinstance(val, list) and isinstance(merged.get(key), list):
                merged[key] = _merge_pins(merged[key], val)
            elif key in LIST_FIELDS and isinstance(val, list) and isinstance(merged.get(key), list):
                merged[key] = [*merged[key], *val]
            elif key == "env" and isinstance(val, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **val}
            else:
                merged[key] = val
    return merged, where


def _merge_pins(old: list[Any], new: list[Any]) -> list[Any]:
    names = {_pin_name(x) for x in new} - {None}
    return [x for x in old if _pin_name(x) not in names] + new


def _pin_name(pin: Any) -> str | None:
    try:
        return canonicalize_name(Requirement(pin).name) if isinstance(pin, str) else None
    except InvalidRequirement:
        return None


def _make_cell(layers: list[tuple[str, dict[str, Any]]], axes: tuple[tuple[str, str], ...],
               p: Problems) -> Cell | None:  # fmt: skip
    v, where = _merge(layers)
    before = len(p.items)

    def path(key: str) -> str:
        return where.get(key, key)

    cell_id = _check_str(v.get("id"), path("id"), p, pattern=_ID_RE, what="a cell id")
    kwargs: dict[str, Any] = {
        "id": cell_id,
        "python": _check_str(v.get("python", "3.11"), path("python"), p, _PY_RE, "3.X"),
        "cuda": _check_opt(v, "cuda", path, p, _CUDA_RE, "major.minor, e.g. 12.8"),
        "backend": _check_choice(v.get("backend", "venv"), path("backend"), BACKENDS, p),
        "base_image": _check_opt(v, "base_image", path, p),
        "pins": tuple(_check_pins(v.get("pins", []), path("pins"), p)),
        "index_url": _check_url(v.get("index_url"), path("index_url"), p),
        "extra_index_urls": tuple(_check_urls(v, "extra_index_urls", path, p)),
        "find_links": tuple(_check_urls(v, "find_links", path, p)),
        "torch_backend": _check_opt(v, "torch_backend", path, p, _TORCH_BACKEND_RE, "cpu/cu128"),
        "env": _check_env(v.get("env", {}), path("env"), p),
        "server_args": tuple(_check_list(v.get("server_args", []), path("server_args"), p)),
        "runs_on": tuple(_check_list(v.get("runs_on", []), path("runs_on"), p)),
        "gpus": _check_int(v.get("gpus", 0), path("gpus"), p, minimum=0),
        "ca_certs": tuple(_check_list(v.get("ca_certs", []), path("ca_certs"), p)),
        "inherit": _check_opt(v, "inherit", path, p, _INHERIT_RE, '"current" or /abs/python'),
        **{k: _check_bool(v.get(k, False), path(k), p) for k in _LAYER_FLAGS},
        "description": _check_str(v.get("description", ""), path("description"), p) or "",
        "axes": axes,
    }
    _check_layering(kwargs, path, p)
    if len(p.items) != before:
        return None
    return Cell(**kwargs)


_LAYER_FLAGS = ("offline", "no_deps")
_INHERIT_RE = re.compile(r"^(current|/[^\x00]*)$")


def _check_layering(kwargs: Mapping[str, Any], path: Callable[[str], str], p: Problems) -> None:
    backend = kwargs.get("backend")
    for flag in ("inherit", *_LAYER_FLAGS):
        if kwargs.get(flag) and backend not in (None, "venv"):
            p.add(path(flag), f"applies to the venv backend only, not {backend!r}")
    if kwargs.get("offline") and not kwargs.get("find_links") and kwargs.get("pins"):
        p.add(
            path("offline"),
            "an offline cell installs only from find_links: add the wheel directory, "
            'e.g. find_links = ["/opt/wheels"]',
        )


def _check_bool(val: Any, path: str, p: Problems) -> bool:
    if isinstance(val, bool):
        return val
    p.add(path, f"expected true or false, got {type_name(val)} {val!r}")
    return False


# ---------------------------------------------------------------- value checks


def _check_str(val: Any, path: str, p: Problems, pattern: re.Pattern[str] | None = None,
               what: str = "") -> str | None:  # fmt: skip
    if val is None:
        return None
    if not isinstance(val, str):
        p.add(path, f"expected a string, got {type_name(val)} {val!r}")
        return None
    if _CONTROL_RE.search(val):
        p.add(path, f"{val!r} contains control characters (newline, NUL...)")
        return None
    if pattern is not None and not pattern.match(val):
        p.add(path, f"{val!r} is not {what or 'valid'} (expected to match {pattern.pattern})")
        return None
    return val


def _check_opt(v: Mapping[str, Any], key: str, path: Callable[[str], str], p: Problems,
               pattern: re.Pattern[str] | None = None, what: str = "") -> str | None:  # fmt: skip
    return _check_str(v.get(key), path(key), p, pattern, what)


def _check_choice(val: Any, path: str, choices: tuple[str, ...], p: Problems) -> str | None:
    if isinstance(val, str) and val in choices:
        return val
    p.add(path, f"{val!r} is not one of {', '.join(choices)}")
    return None


def _check_int(val: Any, path: str, p: Problems, minimum: int | None = None,
               maximum: int | None = None) -> int | None:  # fmt: skip
    if isinstance(val, bool) or not isinstance(val, int):
        p.add(path, f"expected an integer, got {type_name(val)} {val!r}")
        return None
    if minimum is not None and val < minimum:
        p.add(path, f"{val!r} is below the minimum {minimum}")
        return None
    if maximum is not None and val > maximum:
        p.add(path, f"{val!r} is above the maximum {maximum}")
        return None
    return val


def _check_list(val: Any, path: str, p: Problems) -> list[str]:
    if not isinstance(val, list):
        p.add(path, f"expected an array of strings, got {type_name(val)} {val!r}")
        return []
    out = []
    for i, item in enumerate(val):
        s = _check_str(item, join(path, i), p)
        if s is not None:
            out.append(s)
    return out


def _check_pins(val: Any, path: str, p: Problems) -> list[str]:
    pins = []
    for i, pin in enumerate(_check_list(val, path, p)):
        try:
            req = Requirement(pin)
        except InvalidRequirement as exc:
            p.add(join(path, i), f"{pin!r} is not a PEP 508 requirement: {exc}")
            continue
        if req.url and _SHELLISH_RE.search(req.url):
            p.add(join(path, i), f"{pin!r} has shell syntax in its URL; remove it")
            continue
        pins.append(str(req))
    names = [canonicalize_name(Requirement(x).name) for x in pins]
    for dup in _duplicates(names):
        p.add(path, f"package {dup!r} is pinned more than once in this cell")
    return pins


def _check_url(val: Any, path: str, p: Problems) -> str | None:
    s = _check_str(val, path, p)
    if s is None:
        return None
    try:
        parsed = urlparse(s)
    except ValueError as exc:  # e.g. "https://[::1": an unclosed IPv6 address
        p.add(path, f"{s!r} is not a valid URL: {exc}")
        return None
    if parsed.scheme in ("http", "https", "file") and (parsed.netloc or parsed.scheme == "file"):
        if not _SHELLISH_RE.search(s):
            return s
    elif not parsed.scheme and s.startswith(("/", "./", "../")) and not _SHELLISH_RE.search(s):
        return s  # a local directory (find-links / flat index)
    p.add(path, f"{s!r} is not an http(s)/file URL or a local path")
    return None


def _check_urls(v: Mapping[str, Any], key: str, path: Callable[[str], str],
                p: Problems) -> list[str]:  # fmt: skip
    urls = []
    for i, item in enumerate(_check_list(v.get(key, []), path(key), p)):
        url = _check_url(item, join(path(key), i), p)
        if url is not None:
            urls.append(url)
    return urls


def _check_env(val: Any, path: str, p: Problems) -> tuple[tuple[str, str], ...]:
    if not isinstance(val, dict):
        p.add(path, f'expected a table of NAME = "value", got {type_name(val)}')
        return ()
    out = []
    for key, item in val.items():
        if not _ENV_NAME_RE.match(key):
            p.add(join(path, key), f"{key!r} is not a valid environment variable name")
        s = _check_str(item, join(path, key), p)
        if s is not None:
            out.append((key, s))
    return tuple(sorted(out))


# ---------------------------------------------------------------- top level


def _table(raw: Mapping[str, Any], key: str, path: str, p: Problems) -> dict[str, Any]:
    val = raw.get(key, {})
    if not isinstance(val, dict):
        p.add(join(path, key), f"expected a table, got {type_name(val)}")
        return {}
    return val


def _table_list(raw: Mapping[str, Any], key: str, p: Problems) -> list[dict[str, Any]]:
    val = raw.get(key, [])
    if not isinstance(val, list) or not all(isinstance(x, dict) for x in val):
        p.add(key, f"expected an array of tables ([[{key}]]), got {val!r}")
        return []
    return val


def _str(raw: Mapping[str, Any], key: str, path: str, p: Problems,
         required: bool = False) -> str | None:  # fmt: skip
    if key not in raw:
        if required:
            p.add(join(path, key), f'missing; add {key} = "..."')
        return None
    return _check_str(raw[key], join(path, key), p)


def _int(raw: Mapping[str, Any], key: str, path: str, p: Problems,
         minimum: int | None = None, maximum: int | None = None) -> int | None:  # fmt: skip
    if key not in raw:
        return None
    return _check_int(raw[key], join(path, key), p, minimum, maximum)


def _float(raw: Mapping[str, Any], key: str, path: str, p: Problems,
           lo: float, hi: float) -> float | None:  # fmt: skip
    if key not in raw:
        return None
    val = raw[key]
    if val == "inf":
        val = math.inf
    if isinstance(val, bool) or not isinstance(val, int | float):
        p.add(join(path, key), f"expected a number, got {type_name(val)} {val!r}")
        return None
    if not lo <= float(val) <= hi:
        p.add(join(path, key), f"{val!r} is outside [{lo}, {hi}]")
        return None
    return float(val)


def _choice(raw: Mapping[str, Any], key: str, path: str, choices: tuple[str, ...],
            p: Problems) -> str | None:  # fmt: skip
    if key not in raw:
        return None
    return _check_choice(raw[key], join(path, key), choices, p)


def _str_list(raw: Mapping[str, Any], key: str, path: str, p: Problems,
              pattern: re.Pattern[str] | None = None, what: str = "") -> list[str]:  # fmt: skip
    out = []
    for i, item in enumerate(_check_list(raw.get(key, []), join(path, key), p)):
        s = _check_str(item, join(join(path, key), i), p, pattern, what)
        if s is not None:
            out.append(s)
    return out


def _raw_ids(raw: Mapping[str, Any]) -> list[str]:
    tables = raw.get("cell", [])
    if not isinstance(tables, list):
        return []
    return [t["id"] for t in tables if isinstance(t, dict) and isinstance(t.get("id"), str)]


def _duplicates(items: Iterable[str]) -> list[str]:
    """Linear: `list.count` per item made 40k cells take 40 s (issue 16, defect 10)."""
    return sorted(k for k, n in Counter(items).items() if n > 1)


def _check_unique(ids: list[str], p: Problems) -> None:
    if len(ids) > MAX_CELLS:
        p.add("cell", f"the spec defines {len(ids)} cells; at most {MAX_CELLS}: split the "
              "matrix into several specs")  # fmt: skip
    for dup in _duplicates(ids):
        p.add("cell", f"cell id {dup!r} is used by more than one cell; ids must be unique")


def _baseline(raw: Mapping[str, Any], cells: list[Cell], p: Problems) -> str:
    ids = [c.id for c in cells]
    if "baseline" not in raw:
        if len(ids) > 1:
            p.add("baseline", f"missing; name the production cell, one of: {', '.join(ids)}")
        return ids[0] if ids else ""
    base = _check_str(raw["baseline"], "baseline", p)
    if base is None:
        return ""
    if ids and base not in ids:
        import difflib

        close = difflib.get_close_matches(base, ids, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; cells are: {', '.join(ids)}"
        p.add("baseline", f"{base!r} is not a cell{hint}")
    return base


def _bench(raw: Mapping[str, Any], p: Problems) -> Bench | None:
    if "bench" not in raw:
        return None
    b = _table(raw, "bench", "", p)
    p.unknown_keys("bench", b, BENCH_KEYS)
    engine = _choice(b, "engine", "bench", ENGINES, p) or "transformers"
    model = _str(b, "model", "bench", p, required=engine != "external") or ""
    _check_model(b, model, p)
    url = _check_url(b.get("url"), "bench.url", p)
    if engine == "external" and not url:
        p.add("bench.url", 'engine = "external" needs url = "http://host:port"')
    return Bench(
        engine=cast(Any, engine),
        model=model,
        url=url,
        server_args=tuple(_check_list(b.get("server_args", []), "bench.server_args", p)),
        launches=_int(b, "launches", "bench", p, 1, MAX_LAUNCHES) or 1,
        rounds=_int(b, "rounds", "bench", p, 1, MAX_LAUNCHES) or 3,
        warmup_launches=_int(b, "warmup_launches", "bench", p, 0, MAX_LAUNCHES) or 0,
        ready_timeout_s=_or(_float(b, "ready_timeout_s", "bench", p, 1, 86400), 600.0),
        tokenizer=_str(b, "tokenizer", "bench", p),
        workload=_workload(b, p),
        points=_points(b, p),
        client_workers=_client_workers(b, p),
    )


MAX_CLIENT_WORKERS = 256


def _client_workers(bench: Mapping[str, Any], p: Problems) -> int | Literal["auto"]:
    """`bench.client_workers`: the client's worker processes, or "auto" (issue 17)."""
    val = bench.get("client_workers", 1)
    if val == "auto":
        return "auto"
    if isinstance(val, str):
        p.add("bench.client_workers", f'{val!r}: expected a number of worker processes '
              f'(1 to {MAX_CLIENT_WORKERS}) or "auto"')  # fmt: skip
        return 1
    return _check_int(val, "bench.client_workers", p, 1, MAX_CLIENT_WORKERS) or 1


# the models stackmatrix generates itself (pipeline._with_tiny_model)
GENERATED_MODELS = ("stackmatrix:tiny-llama", "stackmatrix:tiny-llama-1b")


def _check_model(bench: Mapping[str, Any], model: str, p: Problems) -> None:
    """`model = ""` or a generated model that does not exist failed only at the bench,
    after the builds (issue 16, item 17)."""
    if "model" in bench and isinstance(bench["model"], str) and not model.strip():
        p.add(
            "bench.model", 'empty; name a model directory or hub name, or "stackmatrix:tiny-llama"'
        )
    elif model.startswith("stackmatrix:") and model not in GENERATED_MODELS:
        p.add("bench.model", f"{model!r} is not a model stackmatrix generates; choose one of: "
              f"{', '.join(GENERATED_MODELS)}")  # fmt: skip


def _workload(bench: Mapping[str, Any], p: Problems) -> Workload:
    w = _table(bench, "workload", "bench", p)
    path = "bench.workload"
    p.unknown_keys(path, w, WORKLOAD_KEYS)
    return _workload_from(w, path, p)


POINT_KEYS = ("name", "metric", *WORKLOAD_KEYS)
MAX_POINTS = 16
_POINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,31}")


def _points(bench: Mapping[str, Any], p: Problems) -> tuple[LoadPoint, ...]:
    """`[[bench.points]]`: the headline workload's keys, some overridden, and a name."""
    raw = bench.get("points", [])
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        p.add("bench.points", f"expected an array of tables ([[bench.points]]), got {raw!r}")
        return ()
    if len(raw) > MAX_POINTS:
        p.add("bench.points", f"{len(raw)} load points; at most {MAX_POINTS}")
        return ()
    base = _table(bench, "workload", "bench", p)
    out: list[LoadPoint] = []
    for i, point in enumerate(raw):
        path = join("bench.points", i)
        p.unknown_keys(path, point, POINT_KEYS)
        name = _str(point, "name", path, p, required=True) or f"point{i + 1}"
        if not _POINT_NAME.fullmatch(name):
            p.add(join(path, "name"), f"{name!r}: letters, digits, '.', '_' or '-', at most "
                  "32, starting with a letter or digit (it names files)")  # fmt: skip
        elif name in {x.name for x in out}:
            p.add(join(path, "name"), f"{name!r} names two load points")
        metric = _choice(point, "metric", path, METRICS, p) or "output_throughput"
        overrides = {k: v for k, v in point.items() if k not in ("name", "metric")}
        workload = _point_workload(base, overrides, path, p)
        out.append(LoadPoint(name=name, workload=workload, metric=metric))
    return tuple(out)


def _point_workload(
    base: Mapping[str, Any], overrides: Mapping[str, Any], path: str, p: Problems
) -> Workload:
    """The headline's keys with the point's overrides. A problem of a headline key is
    said once, under bench.workload, not again for every point: only the point's own
    keys and the workload as a whole are judged here."""
    mine = Problems()
    workload = _workload_from({**base, **overrides}, path, mine)
    own = tuple(join(path, key) + ":" for key in overrides)
    for item in mine.items:
        if item.startswith(own) or item.startswith(path + ":"):
            p.items.append(item)
    return workload


def _workload_from(w: Mapping[str, Any], path: str, p: Problems) -> Workload:
    d = Workload()
    kind = _choice(w, "kind", path, ("random", "file"), p) or d.kind
    file = _str(w, "path", path, p)
    if kind == "file" and not file:
        p.add(join(path, "path"), 'kind = "file" needs path = "prompts.jsonl"')
    ignore_eos = w.get("ignore_eos", d.ignore_eos)
    if not isinstance(ignore_eos, bool):
        p.add(join(path, "ignore_eos"), f"expected true or false, got {ignore_eos!r}")
        ignore_eos = d.ignore_eos
    rate = _float(w, "request_rate", path, p, 0.0001, math.inf)

    def num(key: str, default: int, minimum: int = 1, maximum: int | None = None) -> int:
        value = _int(w, key, path, p, minimum, maximum)
        return default if value is None else value

    workload = Workload(
        kind=cast(Any, kind),
        input_len=num("input_len", d.input_len, maximum=MAX_TOKENS),
        output_len=num("output_len", d.output_len, maximum=MAX_TOKENS),
        range_ratio=_or(_float(w, "range_ratio", path, p, 0.0, 1.0), d.range_ratio),
        num_prompts=num("num_prompts", d.num_prompts, maximum=MAX_PROMPTS),
        max_concurrency=num("max_concurrency", d.max_concurrency, maximum=MAX_PROMPTS),
        request_rate=rate if rate is not None else d.request_rate,
        seed=num("seed", d.seed, minimum=0),
        ignore_eos=ignore_eos,
        path=file,
        warmup=num("warmup", d.warmup, minimum=0, maximum=MAX_PROMPTS),
        request_timeout_s=_or(
            _float(w, "request_timeout_s", path, p, 0.1, 86400), d.request_timeout_s
        ),
    )
    tokens = workload.num_prompts * workload.input_len
    if tokens > MAX_WORKLOAD_TOKENS:
        p.add(path, f"num_prompts x input_len = {tokens} prompt tokens, generated before "
              f"the bench; at most {MAX_WORKLOAD_TOKENS}")  # fmt: skip
    return workload


def _report(raw: Mapping[str, Any], p: Problems) -> ReportPolicy:
    r = _table(raw, "report", "", p)
    p.unknown_keys("report", r, REPORT_KEYS)
    d = ReportPolicy()
    headline = _choice(r, "headline", "report", METRICS, p) or d.headline
    fail_on = _check_list(r.get("fail_on", []), "report.fail_on", p)
    for i, item in enumerate(fail_on):
        if item not in FAIL_ON:
            p.add(join("report.fail_on", i), f"{item!r} is not one of {', '.join(FAIL_ON)}")
    return ReportPolicy(
        headline=headline,
        confidence=_or(_float(r, "confidence", "report", p, 0.5, 0.999), d.confidence),
        min_effect=_or(_float(r, "min_effect", "report", p, 0.0, 0.99), d.min_effect),
        fail_on=tuple(fail_on),
        explain=_check_bool(r.get("explain", d.explain), "report.explain", p),
        explain_rounds=_check_int(
            r.get("explain_rounds", d.explain_rounds), "report.explain_rounds", p, minimum=1
        )
        or d.explain_rounds,
    )


def parse_fail_on(values: Sequence[str]) -> tuple[str, ...]:
    """`["incompatible,regression"]` -> ("incompatible", "regression"), checked: the one
    parser of --fail-on (run, report, merge)."""
    items = tuple(v.strip() for value in values for v in value.split(",") if v.strip())
    unknown = [v for v in items if v not in FAIL_ON]
    if unknown:
        raise UsageError(
            f"--fail-on: unknown value(s) {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(FAIL_ON)}"
        )
    return items


def _or(value: float | None, default: float) -> float:
    return default if value is None else value
