"""A copy of the stackmatrix package to perform a recipe in, and what it changed."""

from __future__ import annotations

import filecmp
import shutil
from collections.abc import Callable
from pathlib import Path

import stackmatrix

PACKAGE = Path(stackmatrix.__file__).parent


def copy_package(site: Path) -> Path:
    """SITE/stackmatrix, a copy of the installed package (caches left out)."""
    copy = site / "stackmatrix"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def changed(after: Path, before: Path = PACKAGE) -> list[str]:
    """Python files of `after` that are new or differ from `before`, sorted."""
    out = []
    for path in sorted(after.rglob("*.py")):
        rel = path.relative_to(after)
        old = before / rel
        if not old.exists() or not filecmp.cmp(old, path, shallow=False):
            out.append(str(rel))
    return out


def insert_after(path: Path, anchor: str, text: str) -> None:
    """`text` written into `path` right after `anchor`, which must be there once."""
    old = path.read_text()
    assert old.count(anchor) == 1, f"{path}: {anchor!r}"
    path.write_text(old.replace(anchor, anchor + text))


def perform_in_copy(site: Path, perform: Callable[[Path], None], files: list[str]) -> Path:
    """SITE/stackmatrix, a copy of the package with a recipe performed in it, which
    changed exactly `files` (relative to the package, sorted)."""
    copy = copy_package(site)
    perform(copy)
    assert changed(copy) == files
    return copy
