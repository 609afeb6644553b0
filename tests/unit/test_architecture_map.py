"""docs/architecture.md is a current map: every path it names exists, and its figures
are what scripts/code-metrics.py prints for the tree as it is
(`python scripts/code-metrics.py --update-docs` rewrites them)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
SCRIPT = ROOT / "scripts" / "code-metrics.py"
SRC = ROOT / "src" / "stackmatrix"
BEGIN, END = "<!-- code-metrics:begin -->", "<!-- code-metrics:end -->"
# a file or package path in backticks: `bench/client.py`, `compat/*.toml`, `bench/`
_TICKED = re.compile(r"`([\w./*-]+)`")
_SUFFIXES = (".py", ".toml", ".md", ".sh")
# a path of the repository in running text, outside backticks
_BARE = re.compile(r"(?<![\w/`.-])((?:src|tests|docs|scripts|compat)/[\w./-]*[\w/])")


def _text_outside_figures() -> str:
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    return head + rest.partition(END)[2]


def named_paths(text: str) -> set[str]:
    ticked = {
        t
        for t in _TICKED.findall(text)
        if "/" in t or t.endswith(".py")
        if t.endswith(_SUFFIXES) or t.endswith("/")
    }
    bare = {t for t in _BARE.findall(text) if t.endswith(_SUFFIXES) or t.endswith("/")}
    return ticked | bare


def _exists(path: str) -> bool:
    for base in (ROOT, SRC):
        found = list(base.glob(path.rstrip("/"))) if "*" in path else [base / path]
        if any(p.exists() and (p.is_dir() or not path.endswith("/")) for p in found):
            return True
    return False


def test_every_path_the_map_names_exists() -> None:
    paths = named_paths(_text_outside_figures())
    assert len(paths) > 50, sorted(paths)  # the patterns still find the map's paths
    missing = sorted(p for p in paths if not _exists(p))
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_path_patterns_find_what_they_should() -> None:
    text = "`bench/client.py` `compat/*.toml` `bench/` `matrix.md` `RUN/run.json` src/a.py."
    assert named_paths(text) == {"bench/client.py", "compat/*.toml", "bench/", "src/a.py"}
    assert _exists("compat/*.toml") and _exists("bench/") and not _exists("bench/nothing.py")


def _block(text: str) -> str:
    _, begin, rest = text.partition(BEGIN)
    body, end, _ = rest.partition(END)
    assert begin and end, f"docs/architecture.md lacks its {BEGIN} ... {END} block"
    return body


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


def test_the_figures_are_the_ones_the_script_prints_now() -> None:
    printed = subprocess.run(
        [sys.executable, str(SCRIPT), "--markdown"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert printed.startswith("| figure | value |"), printed
    in_doc = _block(DOC.read_text(encoding="utf-8"))
    assert _lines(in_doc) == _lines(printed), (
        "docs/architecture.md's figures are not current: "
        "run `python scripts/code-metrics.py --update-docs`"
    )


def test_the_map_tells_no_history() -> None:
    words = re.compile(r"\b(was|were|before|issue|session|wave|formerly|used to)\b", re.I)
    found = [
        f"{n}: {line.strip()}"
        for n, line in enumerate(_text_outside_figures().splitlines(), 1)
        if words.search(line)
    ]
    assert found == [], found


# --- scripts/code-metrics.py on a tree made here ------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    package = root / "stackmatrix"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


def _figures(package: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(package), "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    figures: dict[str, object] = json.loads(out)
    return figures


def test_a_cycle_through_an_import_inside_a_function_counts(tmp_path: Path) -> None:
    package = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from stackmatrix import b\nfrom stackmatrix.c import C\n",
            "b.py": "def f():\n    from stackmatrix import a\n    return a\n",
            # never run: no edge back to a
            "c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from stackmatrix import a\nC = 1\n"
            ),
            "sub/__init__.py": "",
            "sub/d.py": "from . import e\n",
            "sub/e.py": "from .d import x\n",
        },
    )
    figures = _figures(package)
    assert figures["import_cycles"] == [["a.py", "b.py"], ["sub/d.py", "sub/e.py"]]
    assert figures["modules"] == 7


def test_names_loose_objects_and_long_functions_are_counted(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(60))
    package = _tree(
        tmp_path,
        {
            "backend_registry.py": 'R = (BackendEntry("box", "m:X"), BackendEntry("bag", "m:Y"))\n',
            "m.py": (
                "from typing import Any\n"
                "def pick(name: str, o: dict[str, Any]) -> dict[str, Any]:\n"
                '    """box and bag"""\n'
                '    return o if name == "box" else {}\n'
                f"def long() -> None:\n{body}"
            ),
        },
    )
    figures = _figures(package)
    assert figures["names"] == {
        "backends": {"bag": ["backend_registry.py"], "box": ["backend_registry.py", "m.py"]},
    }
    assert figures["dict_str_any"] == 2
    assert figures["functions_over_60"] == [{"function": "m.py:long", "lines": 61}]


def test_update_docs_rewrites_only_the_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = importlib.util.spec_from_file_location("code_metrics", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "code_metrics", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    doc = tmp_path / "map.md"
    doc.write_text(f"# Map\n\n{BEGIN}\nold\n{END}\n\nafter\n", encoding="utf-8")
    assert module.update_docs("| new |\n", doc) is True
    assert doc.read_text(encoding="utf-8") == f"# Map\n\n{BEGIN}\n| new |\n{END}\n\nafter\n"
    assert module.update_docs("| new |\n", doc) is False


def test_every_recipe_names_the_test_that_performs_it() -> None:
    """Each "a new thing" of the map is performed by a test it names, and that test
    copies the package to perform it (no recipe is a claim alone)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Where a new thing goes", 1)[1].split("\n## ", 1)[0]
    recipes = re.split(r"\n(?=- \*\*)", section)[1:]
    assert len(recipes) >= 8
    for recipe in recipes:
        named = re.search(r"performed by\s+`(tests/[^`]+\.py)`", recipe)
        assert named, recipe.splitlines()[0]
        test = (ROOT / named.group(1)).read_text(encoding="utf-8")
        assert "perform_in_copy(" in test, named.group(1)
