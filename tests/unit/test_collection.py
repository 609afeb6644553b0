"""Every test file is collected: a test directory whose name pytest skips by default
(`build`, `dist`, `venv`, ...: its `norecursedirs`) would drop its tests from every run
without a word (hence tests/integration/build_phase/, not `build/`)."""

from __future__ import annotations

from fnmatch import fnmatch
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_file_sits_where_pytest_does_not_look(pytestconfig: pytest.Config) -> None:
    skipped = pytestconfig.getini("norecursedirs")
    assert "build" in skipped  # the default this guards against

    def hidden(path: Path) -> bool:
        dirs = path.relative_to(TESTS).parts[:-1]
        return any(fnmatch(part, pattern) for part in dirs for pattern in skipped)

    assert [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py") if hidden(p)] == []
