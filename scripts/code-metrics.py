#!/usr/bin/env python3
"""The code measures issue 14 asks docs/architecture.md to report, for a source tree:
module sizes, function lengths, `dict[str, Any]` annotations, import cycles between
stackmatrix's modules (imports at module level; those inside functions are lazy by
intent and left out).

    python scripts/code-metrics.py [SRC]        (default: src/stackmatrix of this checkout)

Compare two commits with a worktree: `git worktree add /tmp/before REV` and run it on
/tmp/before/src/stackmatrix.
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def top_level_imports(tree: ast.Module, name: str, known: set[str]) -> set[str]:
    """stackmatrix modules imported at module level (not under `if TYPE_CHECKING`);
    `from package import submodule` depends on the submodule, not the package's
    __init__ (which every import of a submodule runs anyway)."""
    found: set[str] = set()
    package = name if name.count(".") == 0 else name.rsplit(".", 1)[0]
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("stackmatrix")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            if base.startswith("stackmatrix"):
                subs = {f"{base}.{a.name}" for a in node.names} & known
                found |= subs if len(subs) == len(node.names) else {base, *subs}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(src: Path) -> int:
    files = sorted(p for p in src.rglob("*.py") if "_compat_data" not in p.parts)
    sizes: dict[str, int] = {}
    lengths: list[int] = []
    any_dicts = 0
    graph: dict[str, set[str]] = {}
    known = {module_name(src, path) for path in files}
    for path in files:
        text = path.read_text(encoding="utf-8")
        name = module_name(src, path)
        sizes[name] = text.count("\n")
        any_dicts += text.count("dict[str, Any]")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno:
                lengths.append(node.end_lineno - node.lineno + 1)
        graph[name] = top_level_imports(tree, name, known)
    graph = {k: {v for v in vs if v in known and v != k} for k, vs in graph.items()}
    big = sorted(((n, s) for n, s in sizes.items() if s > 400), key=lambda x: -x[1])
    p90 = statistics.quantiles(lengths, n=10)[-1]
    print(f"{src}: {len(files)} modules, {sum(sizes.values())} lines")
    print(f"  largest module: {max(sizes.values())} lines; over 400 lines: {len(big)}")
    for name, size in big:
        print(f"    {name}: {size}")
    print(f"  functions: {len(lengths)}, length median {statistics.median(lengths):.0f}, "
          f"p90 {p90:.0f} lines")  # fmt: skip
    print(f"  `dict[str, Any]` annotations: {any_dicts}")
    found = cycles(graph)
    print(f"  import cycles (module level): {len(found)}")
    for group in found:
        print(f"    {' <-> '.join(group)}")
    return 0


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[1] / "src" / "stackmatrix"
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
