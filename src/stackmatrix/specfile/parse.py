"""A spec file read and checked whole: its top-level keys, its cells (cells.py), its
bench (bench.py) and report (report.py) tables, every problem collected and said at once."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from stackmatrix._cellid import ID_RE
from stackmatrix._validate import Problems, join
from stackmatrix.errors import SpecError
from stackmatrix.spec_model import ORDERS, Cell, Spec
from stackmatrix.specfile._values import (
    check_str,
    duplicates,
    get_choice,
    get_int,
    get_str,
    get_str_list,
    get_table,
)
from stackmatrix.specfile.bench import parse_bench
from stackmatrix.specfile.cells import CELL_KEYS, MAX_CELLS, CellIds, axis_cells, explicit_cells
from stackmatrix.specfile.executor import parse_executor
from stackmatrix.specfile.report import parse_report

_TARGET_RE = re.compile(r"^sm_\d{2,3}[af]?$")

TOP_KEYS = (
    "name",
    "description",
    "baseline",
    "targets",
    "driver",
    "order",
    "order_seed",
    "defaults",
    "cell",
    "axes",
    "include",
    "exclude",
    "bench",
    "report",
    "executor",
)

# Resource bounds: a spec is read whole and expanded whole, and
# its workload is generated up front; each bound is far above any real matrix.
MAX_SPEC_BYTES = 1 << 20


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
    until someone writes."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise SpecError(str(path), ["not a regular file (a FIFO, a device or a socket)"])
    with path.open("rb") as fh:
        data = fh.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(str(path), [f"larger than {MAX_SPEC_BYTES} bytes; not a matrix spec"])
    return data.decode("utf-8")


def _spec_name(raw: Mapping[str, Any], p: Problems) -> str:
    """The name becomes a directory under --reports-dir: one plain name, so that
    "../../x" or "/abs/x" cannot put results elsewhere."""
    if "name" not in raw:
        p.add("name", 'missing; add name = "..."')
        return "unnamed"
    what = "a plain name (it names the results directory)"
    return check_str(raw["name"], "name", p, ID_RE, what) or "unnamed"


def parse_spec(raw: Mapping[str, Any], *, path: str = "<spec>") -> Spec:
    problems = Problems()
    problems.unknown_keys("", raw, TOP_KEYS)
    name = _spec_name(raw, problems)
    defaults = get_table(raw, "defaults", "", problems)
    problems.unknown_keys("defaults", defaults, CELL_KEYS)
    if "id" in defaults:
        problems.add("defaults.id", "a default cell id makes no sense; give each cell its own id")
    ids: CellIds = []
    cells = explicit_cells(raw, defaults, problems, ids) + axis_cells(raw, defaults, problems, ids)
    if not cells and not problems:
        problems.add("cell", "the spec defines no cells; add [[cell]] tables or [axes]")
    _check_unique(ids, problems)
    baseline = _baseline(raw, cells, problems)
    targets = tuple(
        get_str_list(raw, "targets", "", problems, pattern=_TARGET_RE, what="sm_XY[a|f]")
    )
    bench = parse_bench(raw, problems)
    report = parse_report(raw, problems)
    _check_explain_cells(report.explain_cells, cells, baseline, problems)
    executor = parse_executor(raw, problems)
    order = get_choice(raw, "order", "", ORDERS, problems)
    order_seed = get_int(raw, "order_seed", "", problems, minimum=0)
    if problems:
        raise SpecError(path, problems.items)
    return Spec(
        name=name,
        path=path,
        baseline=baseline,
        cells=tuple(cells),
        targets=targets,
        driver=get_str(raw, "driver", "", problems),
        description=get_str(raw, "description", "", problems) or "",
        bench=bench,
        report=report,
        order=cast(Any, order or "balanced"),
        order_seed=order_seed,
        executor=executor,
    )


def _check_unique(ids: CellIds, p: Problems) -> None:
    """Over every id met, from [[cell]], the axes and standalone includes alike."""
    if len(ids) > MAX_CELLS:
        p.add(
            "cell",
            f"the spec defines {len(ids)} cells; at most {MAX_CELLS}: split the "
            "matrix into several specs",
        )
    dups = set(duplicates(cell_id for cell_id, _ in ids))
    origins: dict[str, list[str]] = {}
    for cell_id, origin in ids:
        if cell_id in dups:
            origins.setdefault(cell_id, []).append(origin)
    for dup, where in sorted(origins.items()):
        p.add(
            "cell",
            f"cell id {dup!r} is used by more than one cell ({', '.join(where)}); "
            "ids must be unique",
        )


def _check_explain_cells(
    named: tuple[str, ...], cells: list[Cell], baseline: str, p: Problems
) -> None:
    """`[report] explain_cells` names cells of this spec other than the baseline."""
    import difflib

    ids = [c.id for c in cells]
    for i, cell_id in enumerate(named):
        if cell_id == baseline:
            p.add(
                join("report.explain_cells", i),
                f"{cell_id!r} is the baseline; explain compares a cell with it",
            )
        elif ids and cell_id not in ids:
            close = difflib.get_close_matches(cell_id, ids, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; cells are: {', '.join(ids)}"
            p.add(join("report.explain_cells", i), f"{cell_id!r} is not a cell{hint}")


def _baseline(raw: Mapping[str, Any], cells: list[Cell], p: Problems) -> str:
    ids = [c.id for c in cells]
    if "baseline" not in raw:
        if len(ids) > 1:
            p.add("baseline", f"missing; name the production cell, one of: {', '.join(ids)}")
        return ids[0] if ids else ""
    base = check_str(raw["baseline"], "baseline", p)
    if base is None:
        return ""
    if ids and base not in ids:
        import difflib

        close = difflib.get_close_matches(base, ids, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; cells are: {', '.join(ids)}"
        p.add("baseline", f"{base!r} is not a cell{hint}")
    return base
