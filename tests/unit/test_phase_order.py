"""The phases' order is spelled once, in spec_names.py: a module that writes out the
names of the per-cell phases in a row ("build", "check", "bench") would drift from it
when a phase is added, so none does."""

from __future__ import annotations

import ast
from pathlib import Path

import stackmatrix
from stackmatrix import results, spec_names

SOURCES = Path(stackmatrix.__file__).parent
ORDER = ("build", "check", "bench")


def _spelled(tree: ast.AST) -> list[int]:
    """Lines of tuples or lists whose string items hold the phase order in a row."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Tuple | ast.List):
            continue
        items = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        names = [v for v in items if isinstance(v, str)]
        if any(tuple(names[i : i + 3]) == ORDER for i in range(len(names))):
            out.append(node.lineno)
    return out


def test_only_spec_names_spells_the_phase_order() -> None:
    found = {
        str(path.relative_to(SOURCES)): lines
        for path in sorted(SOURCES.rglob("*.py"))
        if (lines := _spelled(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {"spec_names.py": [found.get("spec_names.py", [0])[0]]}
    assert results.PHASES == spec_names.CELL_PHASES == spec_names.PIPELINE_PHASES[:-1]
    assert spec_names.CELL_PHASES == ORDER


def test_the_scan_sees_a_spelled_order() -> None:
    assert _spelled(ast.parse('PHASES = ["build", "check", "bench"]\n')) == [1]
    assert _spelled(ast.parse('x = ("build", "bench")\n')) == []


def test_every_cell_phase_has_one_step_in_the_order() -> None:
    from stackmatrix.pipeline.steps import CELL_STEPS

    assert tuple(CELL_STEPS) == results.PHASES
