"""Fatal errors are caught at the command boundary only; a file that cannot be read is
`Unreadable`, which its readers catch.

`errors.StackmatrixError` and its subclasses (those of errors.py and any defined in
src/stackmatrix) mean "the command cannot go on". A handler of one below `cli.main`
either ends by raising (it records or rewords, then lets it go on) or is one of the
boundaries listed in BOUNDARIES, each a unit of a command that stands on its own. An
`isinstance` test against one counts as a handler.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackmatrix import errors
from stackmatrix.errors import ResultsError, StackmatrixError, Unreadable

SRC = Path(__file__).resolve().parents[2] / "src" / "stackmatrix"

# module (relative to the package) : function -> why it may catch a fatal error
BOUNDARIES = {
    "cli.py:main": "the command boundary: the message and the exit code",
    "explain/command.py:explain_after_run": "each cell's explanation after a run is its own",
    "pipeline/bench.py:_phase_crashed": "the bench phase's run-level set-up: every cell's status",
    "explain/context.py:_original_spec": "a spec edited since the run is not the one run: the "
    "results' copy is read instead",
}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(), str(path))


def _fatal_names() -> set[str]:
    """StackmatrixError and every class of the package that derives from one."""
    names = {
        n
        for n, v in vars(errors).items()
        if isinstance(v, type) and issubclass(v, StackmatrixError)
    }
    classes = [
        node for _, tree in _modules() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
    ]
    grew = True
    while grew:
        grew = False
        for node in classes:
            bases = {_name(b) for b in node.bases}
            if node.name not in names and bases & names:
                names.add(node.name)
                grew = True
    return names


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _named(node: ast.expr | None) -> set[str]:
    """The class names an `except` clause or an isinstance's second argument names."""
    if node is None:
        return set()
    if isinstance(node, ast.Tuple):
        return set().union(*(_named(e) for e in node.elts))
    if isinstance(node, ast.BinOp):  # A | B
        return _named(node.left) | _named(node.right)
    return {_name(node)}


def _catches(tree: ast.Module, fatal: set[str]) -> Iterator[tuple[str, int, bool]]:
    """(enclosing function, line, ends by raising) of each catch of a fatal class."""

    def visit(node: ast.AST, func: str) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else func
            )
            if isinstance(child, ast.ExceptHandler) and _named(child.type) & fatal:
                yield inner, child.lineno, isinstance(child.body[-1], ast.Raise)
            if (
                isinstance(child, ast.Call)
                and _name(child.func) == "isinstance"
                and len(child.args) == 2
                and _named(child.args[1]) & fatal
            ):
                yield inner, child.lineno, False
            yield from visit(child, inner)

    yield from visit(tree, "<module>")


def _unbounded_catches() -> tuple[list[str], set[str]]:
    fatal = _fatal_names()
    found, seen = [], set()
    for rel, tree in _modules():
        for func, line, reraises in _catches(tree, fatal):
            where = f"{rel}:{func}"
            seen.add(where)
            if not reraises and where not in BOUNDARIES:
                found.append(f"{rel}:{line} ({func})")
    return found, seen


def test_fatal_errors_are_caught_only_at_boundaries() -> None:
    found, _ = _unbounded_catches()
    assert not found, (
        "a fatal error caught below the command boundary (catch Unreadable for a file, "
        "or return a value): " + ", ".join(found)
    )


def test_every_listed_boundary_still_catches() -> None:
    _, seen = _unbounded_catches()
    assert set(BOUNDARIES) <= seen, sorted(set(BOUNDARIES) - seen)


def test_the_finder_sees_a_catch(tmp_path: Path) -> None:
    """The scan is not vacuous: a handler of ResultsError that returns is found, one that
    re-raises is not, and an Unreadable handler is no catch of a fatal error."""
    tree = ast.parse(
        "def f():\n    try:\n        g()\n    except (OSError, ResultsError):\n"
        "        return None\n"
        "def h():\n    try:\n        g()\n    except SpecError as e:\n        raise X from e\n"
        "def k(e):\n    return isinstance(e, UsageError | KeyError)\n"
        "def m():\n    try:\n        g()\n    except Unreadable:\n        return 1\n"
    )
    assert list(_catches(tree, _fatal_names())) == [
        ("f", 4, False),
        ("h", 9, True),
        ("k", 12, False),
    ]


def test_unreadable_is_not_fatal_but_exits_as_results_error() -> None:
    assert not issubclass(Unreadable, StackmatrixError)
    assert Unreadable.exit_code == ResultsError.exit_code == 3


def test_an_unreadable_file_a_command_needs_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report` of a directory whose run.json is a link: the reader's Unreadable reaches
    cli.main, which says it and exits 3 (no traceback)."""
    from stackmatrix.cli import main

    (tmp_path / "elsewhere.json").write_text("{}")
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").symlink_to(tmp_path / "elsewhere.json")
    assert main(["report", str(run)]) == 3
    err = capsys.readouterr().err
    assert "symbolic link" in err and "Traceback" not in err
