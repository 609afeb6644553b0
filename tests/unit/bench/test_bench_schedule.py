from __future__ import annotations

from collections import Counter

import pytest

from stackmatrix.bench.schedule import schedule

PENDING = {"A": [1, 2, 3], "B": [1, 2, 3], "C": [1, 2, 3]}


def test_interleaved():
    assert schedule(PENDING, ["A", "B", "C"], "interleaved")[:4] == [
        ("A", 1),
        ("B", 1),
        ("C", 1),
        ("A", 2),
    ]


def test_sequential():
    assert schedule(PENDING, ["A", "B", "C"], "sequential")[:4] == [
        ("A", 1),
        ("A", 2),
        ("A", 3),
        ("B", 1),
    ]


def test_random_is_balanced_blocks_and_reproducible():
    a = schedule(PENDING, ["A", "B", "C"], "random", seed=7)
    assert a == schedule(PENDING, ["A", "B", "C"], "random", seed=7)
    assert any(schedule(PENDING, ["A", "B", "C"], "random", seed=s) != a for s in range(1, 20))
    for block in range(3):
        cells = a[block * 3 : block * 3 + 3]
        assert sorted(c for c, _ in cells) == ["A", "B", "C"]
        assert {k for _, k in cells} == {block + 1}


def test_resume_schedules_only_what_is_missing():
    slots = schedule({"A": [3], "B": [2, 3], "C": []}, ["A", "B", "C"], "interleaved")
    # launch k of every cell belongs to cycle k: B's launch 2 runs before the cycle 3
    assert slots == [("B", 2), ("A", 3), ("B", 3)]
    assert Counter(c for c, _ in slots) == {"A": 1, "B": 2}


def test_unknown_order():
    with pytest.raises(ValueError, match="unknown order"):
        schedule(PENDING, ["A"], "backwards")
