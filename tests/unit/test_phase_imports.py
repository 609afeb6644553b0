"""A ratchet on the imports between phase packages.

The phases (spec, build, check, bench, report, explain, executor and pipeline, the
order that runs them) are meant to talk through the results directory, decoded by
`records/`; where one imports another, the import is listed in phase_imports.txt.
An import not listed fails here, and so does a listed one that is gone, so the list
only shrinks unless a change adds a line on purpose. Imports are read with `ast` by
scripts/code-metrics.py's own reader: module level or inside a function, and those
made only under `if TYPE_CHECKING:` too (marked `type`). The top-level modules
(layout.py, results.py, findings.py, ...) are shared by every phase and not counted.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "stackmatrix"
SCRIPT = ROOT / "scripts" / "code-metrics.py"
LISTED = Path(__file__).with_name("phase_imports.txt")
PHASES = ("specfile", "builder", "check", "bench", "report", "explain", "executor", "pipeline")
# the typed records of the results files: what every phase reads them through
SHARED_PACKAGES = ("records", "stats")


def _metrics() -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_metrics", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["code_metrics"] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["code_metrics"]
    return module


def _package(name: str, src: Path) -> str | None:
    parts = name.split(".")  # "stackmatrix.bench.client"
    return parts[1] if len(parts) > 1 and (src / parts[1]).is_dir() else None


def phase_imports(src: Path = SRC) -> set[str]:
    """`importer -> imported` for every import from one phase package into another,
    with ` type` after one made only under TYPE_CHECKING."""
    metrics = _metrics()
    modules = metrics.read_modules(src)
    known = {m.name for m in modules}
    found = set()
    for module in modules:
        runtime = {
            target
            for node in metrics.runtime_imports(module.tree)
            for target in metrics.imported(module, node, known)
        }
        every = {
            target
            for node in ast.walk(module.tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for target in metrics.imported(module, node, known)
        }
        here = _package(module.name, src)
        for target in every:
            there = _package(target, src)
            if here in PHASES and there in PHASES and here != there:
                edge = f"{module.name.removeprefix('stackmatrix.')} -> "
                edge += target.removeprefix("stackmatrix.")
                found.add(edge if target in runtime else f"{edge} type")
    return found


def listed() -> set[str]:
    lines = LISTED.read_text(encoding="utf-8").splitlines()
    return {" ".join(line.split()) for line in lines if line.strip() and line[0] != "#"}


def test_every_package_is_a_phase_or_shared() -> None:
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    unsorted = [p for p in packages if p not in PHASES + SHARED_PACKAGES]
    assert unsorted == [], f"name each new package in PHASES or SHARED_PACKAGES: {unsorted}"


def test_no_import_between_phases_beyond_the_list() -> None:
    new = sorted(phase_imports() - listed())
    assert new == [], (
        "new imports between phase packages (read the results through records/ "
        f"instead, or add the line to {LISTED.name} on purpose):\n  " + "\n  ".join(new)
    )


def test_the_list_holds_no_import_that_is_gone() -> None:
    gone = sorted(listed() - phase_imports())
    assert gone == [], f"drop these lines from {LISTED.name}: " + "\n  ".join(["", *gone])


def test_the_reader_counts_function_level_and_type_only_imports(tmp_path: Path) -> None:
    package = tmp_path / "stackmatrix"
    files = {
        "__init__.py": "",
        "layout.py": "",
        "bench/__init__.py": "",
        "bench/a.py": (
            "from typing import TYPE_CHECKING\nfrom stackmatrix import layout\n"
            "from stackmatrix.records import r\n"
            "if TYPE_CHECKING:\n    from stackmatrix.report.stats import C\n"
        ),
        "bench/b.py": "def f():\n    from stackmatrix.report import stats\n    return stats\n",
        "report/__init__.py": "from . import stats\n",
        "report/stats.py": "from stackmatrix.bench import a\n",
        "records/__init__.py": "from stackmatrix.report import stats\n",
        "records/r.py": "",
    }
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert phase_imports(package) == {
        "bench.a -> report.stats type",
        "bench.b -> report.stats",
        "report.stats -> bench.a",
    }


def private_imports(src: Path = SRC) -> list[str]:
    """Imports from one phase package of a private module (`check._data`) or a private
    name (`from stackmatrix.pipeline.run import _helper`) of another: a coupling to what
    the other phase may change without notice."""
    found = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        here = rel.parts[0] if len(rel.parts) > 1 else None
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
                continue
            parts = node.module.split(".")
            there = parts[1] if len(parts) > 1 and parts[0] == "stackmatrix" else None
            if here not in PHASES or there not in PHASES or here == there:
                continue
            private = [p for p in parts[2:] if p.startswith("_")]
            private += [a.name for a in node.names if a.name.startswith("_")]
            if private:
                found.append(f"{rel}:{node.lineno} {node.module}: {', '.join(private)}")
    return found


def test_no_phase_imports_another_phase_s_private_parts() -> None:
    found = private_imports()
    assert found == [], "make it public where it is, or move it to the shared floor:\n  " + (
        "\n  ".join(found)
    )


def test_the_private_reader_finds_a_private_module_and_name(tmp_path: Path) -> None:
    package = tmp_path / "stackmatrix"
    files = {
        "__init__.py": "",
        "explain/__init__.py": "",
        "explain/a.py": (
            "from stackmatrix.check._data import rule\nfrom stackmatrix.report.fmt import _x\n"
            "from stackmatrix.report import fmt as _fmt\nfrom stackmatrix.explain._own import y\n"
        ),
    }
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert private_imports(package) == [
        "explain/a.py:1 stackmatrix.check._data: _data",
        "explain/a.py:2 stackmatrix.report.fmt: _x",
    ]
