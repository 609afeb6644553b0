#!/usr/bin/env python3
"""The code figures of a source tree (default: src/stackmatrix of this checkout).

    python scripts/code-metrics.py [SRC] [--markdown | --json | --update-docs]

Figures: modules and their lines (the largest, those over 400 lines), functions (median
length, those over 60 lines), `dict[str, Any]` annotations, import cycles between
modules, and the files that spell each backend name as a string literal.
The import graph is built with `ast` from every import that runs, at module level or
inside a function; imports under `if TYPE_CHECKING:` never run and are left out, and
importing a submodule is not counted as importing its package's `__init__`. A cycle
is a strongly connected group of more than one module.

`--markdown` (the default) prints the block that docs/architecture.md holds between
its `code-metrics` markers; `--update-docs` rewrites that block in place; `--json`
prints the same figures as JSON. The output depends only on the files' contents.
Compare two commits with `git worktree add /tmp/other REV` and the path
/tmp/other/src/stackmatrix.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SRC = ROOT / "src" / "stackmatrix"
DOCS = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- code-metrics:begin -->"
END = "<!-- code-metrics:end -->"
MODULE_LIMIT = 400  # lines
FUNCTION_LIMIT = 60  # lines
# the vocabularies whose names are counted, as named in spec_names.py


@dataclass
class Module:
    path: str  # relative to the source tree, e.g. "bench/client.py"
    name: str  # dotted, e.g. "stackmatrix.bench.client"
    tree: ast.Module
    lines: int


@dataclass
class Figures:
    modules: int = 0
    lines: dict[str, int] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)  # "path:qualname" -> lines
    dict_str_any: int = 0
    cycles: list[list[str]] = field(default_factory=list)
    names: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def dotted(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_modules(src: Path) -> list[Module]:
    modules = []
    for path in sorted(src.rglob("*.py")):
        if "_compat_data" in path.parts:  # an installed package's data, not its code
            continue
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(src).as_posix()
        tree = ast.parse(text, filename=str(path))
        modules.append(Module(rel, dotted(src, path), tree, text.count("\n")))
    return modules


# --- functions -------------------------------------------------------------------


def function_lengths(module: Module) -> dict[str, int]:
    """Every function and method, nested ones included, by `path:qualified.name`."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef) and child.end_lineno:
                    found[f"{module.path}:{name}"] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(module.tree, "")
    return found


# --- loosely typed objects -------------------------------------------------------


def is_dict_str_any(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
        return False
    if node.value.id not in ("dict", "Dict") or not isinstance(node.slice, ast.Tuple):
        return False
    key, value = (*node.slice.elts, None)[:2]
    return (
        isinstance(key, ast.Name)
        and key.id == "str"
        and isinstance(value, ast.Name)
        and value.id == "Any"
    )


def loose_objects(module: Module) -> int:
    """`dict[str, Any]` expressions."""
    return sum(is_dict_str_any(node) for node in ast.walk(module.tree))


# --- the import graph ------------------------------------------------------------


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import that can run, at any depth; `if TYPE_CHECKING:` bodies left out."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif isinstance(child, ast.If) and is_type_checking(child):
            for other in child.orelse:
                yield from runtime_imports(ast.Module(body=[other], type_ignores=[]))
        else:
            yield from runtime_imports(child)


def imported(module: Module, node: ast.Import | ast.ImportFrom, known: set[str]) -> set[str]:
    """The modules of the tree that one import statement loads."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & known
    base = node.module or ""
    if node.level:
        parts = module.name.split(".")
        if not module.path.endswith("__init__.py"):
            parts = parts[:-1]  # a module's level 1 is its package
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, base] if base else parts)
    found = set()
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        found.add(sub if sub in known else base)
    return found & known


def import_graph(modules: list[Module]) -> dict[str, set[str]]:
    known = {m.name for m in modules}
    graph: dict[str, set[str]] = {}
    for module in modules:
        targets: set[str] = set()
        for node in runtime_imports(module.tree):
            targets |= imported(module, node, known)
        graph[module.name] = targets - {module.name}
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of more than one module that reach each other (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next((w for w in edges if w not in index or w in on_stack), None)
            if nxt is not None:
                if nxt in index:
                    low[node] = min(low[node], index[nxt])
                else:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


# --- vocabulary names ------------------------------------------------------------


def vocabularies(modules: list[Module]) -> dict[str, tuple[str, ...]]:
    """The backends' names, as backend_registry.py's entries give them (the first
    argument of each `BackendEntry`); the engines' are not counted (engine_registry.py
    and the adapters of bench/engines.py are where an engine's name belongs)."""
    found: dict[str, tuple[str, ...]] = {}
    for module in modules:
        if module.path != "backend_registry.py":
            continue
        found["BACKENDS"] = tuple(
            node.args[0].value
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "BackendEntry"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        )
    return found


def spelled_in(modules: list[Module], names: tuple[str, ...]) -> dict[str, list[str]]:
    """For each name, the files holding it as a whole string literal."""
    where: dict[str, list[str]] = {name: [] for name in names}
    for module in modules:
        literals = {
            node.value
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        for name in names:
            if name in literals:
                where[name].append(module.path)
    return where


# --- the figures and their forms ---------------------------------------------------


def measure(src: Path) -> Figures:
    modules = read_modules(src)
    figures = Figures(modules=len(modules))
    for module in modules:
        figures.lines[module.path] = module.lines
        figures.functions.update(function_lengths(module))
        figures.dict_str_any += loose_objects(module)
    by_name = {m.name: m.path for m in modules}
    groups = strongly_connected(import_graph(modules))
    figures.cycles = [sorted(by_name[name] for name in group) for group in groups]
    for vocabulary, names in sorted(vocabularies(modules).items()):
        figures.names[vocabulary.lower()] = spelled_in(modules, names)
    return figures


def over(sizes: dict[str, int], limit: int) -> list[tuple[str, int]]:
    return sorted(((k, v) for k, v in sizes.items() if v > limit), key=lambda kv: (-kv[1], kv[0]))


def as_json(figures: Figures) -> dict[str, Any]:
    lengths = list(figures.functions.values())
    largest = over(figures.lines, -1)[0]
    return {
        "schema_version": 2,
        "modules": figures.modules,
        "lines": sum(figures.lines.values()),
        "largest_module": {"path": largest[0], "lines": largest[1]},
        f"modules_over_{MODULE_LIMIT}": [
            {"path": p, "lines": n} for p, n in over(figures.lines, MODULE_LIMIT)
        ],
        "functions": len(lengths),
        "function_median_lines": statistics.median(lengths) if lengths else 0,
        f"functions_over_{FUNCTION_LIMIT}": [
            {"function": f, "lines": n} for f, n in over(figures.functions, FUNCTION_LIMIT)
        ],
        "dict_str_any": figures.dict_str_any,
        "import_cycles": figures.cycles,
        "names": figures.names,
    }


def as_markdown(figures: Figures) -> str:
    data = as_json(figures)
    big = [(b["path"], b["lines"]) for b in data[f"modules_over_{MODULE_LIMIT}"]]
    long = [(f["function"], f["lines"]) for f in data[f"functions_over_{FUNCTION_LIMIT}"]]
    largest = data["largest_module"]
    rows = [
        ("modules / lines", f"{data['modules']} / {data['lines']:,}"),
        ("largest module", f"`{largest['path']}`, {largest['lines']} lines"),
        (f"modules over {MODULE_LIMIT} lines", _listed(big)),
        ("functions / median length", f"{data['functions']} / {data['function_median_lines']:g}"),
        (f"functions over {FUNCTION_LIMIT} lines", _listed(long)),
        ("`dict[str, Any]`", str(data["dict_str_any"])),
        ("import cycles (module and function level)", _cycles(data["import_cycles"])),
    ]
    for vocabulary, where in data["names"].items():
        counts = ", ".join(f"{name} {len(files)}" for name, files in where.items())
        rows.append((f"files spelling each {vocabulary[:-1]} name", counts))
    table = ["| figure | value |", "|---|---|"]
    table += [f"| {label} | {value} |" for label, value in rows]
    return "\n".join(table) + "\n"


def _listed(items: list[tuple[str, int]]) -> str:
    if not items:
        return "0"
    return f"{len(items)}: " + ", ".join(f"`{name}` ({n})" for name, n in items)


def _cycles(groups: list[list[str]]) -> str:
    if not groups:
        return "0"
    return f"{len(groups)}: " + "; ".join(" <-> ".join(f"`{p}`" for p in g) for g in groups)


def update_docs(block: str, docs: Path = DOCS) -> bool:
    """Rewrites the block between the markers; True when the file changed."""
    text = docs.read_text(encoding="utf-8")
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise SystemExit(f"{docs}: no {BEGIN} ... {END} block to update")
    new = f"{head}{BEGIN}\n{block}{END}{tail}"
    if new != text:
        docs.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("src", nargs="?", type=Path, default=DEFAULT_SRC)
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="the docs block (default)")
    form.add_argument("--json", action="store_true", help="the figures as JSON")
    form.add_argument("--update-docs", action="store_true", help=f"rewrite {DOCS.name}'s block")
    args = parser.parse_args(argv)
    figures = measure(args.src.resolve())
    if args.json:
        print(json.dumps(as_json(figures), indent=2))
    elif args.update_docs:
        changed = update_docs(as_markdown(figures))
        print(f"{DOCS.relative_to(ROOT)}: {'updated' if changed else 'already current'}")
    else:
        sys.stdout.write(as_markdown(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
