"""The verdict registry is whole and is the one place that lists verdicts."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from stackmatrix.report import _html
from stackmatrix.verdict_registry import DIFFERENCES, VERDICTS, Verdict

SRC = Path(__file__).resolve().parents[2] / "src" / "stackmatrix"
# the registry, and stats/verdict.py, where a comparison reaches its verdict
OWNERS = {"verdict_registry.py", "stats/verdict.py"}


def test_every_verdict_has_its_traits_and_a_tone_the_css_styles() -> None:
    assert set(VERDICTS) == set(Verdict)
    styled = set(re.findall(r"\.badge\.([a-z]+)\{", _html.CSS))
    assert {t.tone for t in VERDICTS.values()} <= styled
    assert DIFFERENCES == ("faster", "slower")
    assert [v for v in Verdict if v.decided] == [
        Verdict.BASELINE,
        Verdict.FASTER,
        Verdict.SLOWER,
        Verdict.EQUIVALENT,
    ]


def _lists_verdicts(tree: ast.AST) -> list[int]:
    """Lines that test a verdict against a list of members, or match over members: the
    lists the registry's traits replace."""

    def member(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "Verdict"
        )

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for right in node.comparators:
                if isinstance(right, ast.Tuple | ast.List | ast.Set) and any(
                    member(e) for e in right.elts
                ):
                    lines.append(node.lineno)
        if isinstance(node, ast.match_case) and any(
            member(n) for n in ast.walk(node.pattern) if isinstance(n, ast.Attribute)
        ):
            lines.append(node.pattern.lineno)
    return lines


def test_no_module_keeps_a_list_of_verdicts() -> None:
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).as_posix() not in OWNERS
        for line in _lists_verdicts(ast.parse(path.read_text()))
    ]
    assert found == [], "ask verdict_registry.traits instead: " + ", ".join(found)


def test_the_scan_finds_a_list_and_a_match() -> None:
    tree = ast.parse(
        "x = v in (Verdict.FASTER, Verdict.SLOWER)\n"
        "match v:\n    case Verdict.BASELINE:\n        pass\n"
        "y = v is Verdict.EQUIVALENT\n"
    )
    assert _lists_verdicts(tree) == [1, 3]
