"""The records' one reader: a record built from its fields' types, and where a value
does not fit said for a person."""

from __future__ import annotations

from dataclasses import dataclass, field

from stackmatrix.jsontypes import JSONObject
from stackmatrix.records.decode import decode, problem, written


@dataclass(frozen=True, kw_only=True)
class Inner:
    count: int | None = None
    label: str | None = None
    extra: JSONObject = field(default_factory=dict)

    def to_dict(self) -> JSONObject:
        return written(self)


@dataclass(frozen=True, kw_only=True)
class Outer:
    name: str = ""
    ratio: float | None = None
    flag: bool | None = None
    index: int | str | None = None
    tags: tuple[str, ...] = ()
    inner: Inner | None = None
    inners: list[Inner] = field(default_factory=list)
    by_name: dict[str, Inner] | None = None
    blob: JSONObject | None = None
    extra: JSONObject = field(default_factory=dict)


def test_a_record_is_built_from_its_fields() -> None:
    raw: JSONObject = {
        "name": "a",
        "ratio": 2,
        "flag": True,
        "index": "W1",
        "tags": ["x", "y"],
        "inner": {"count": 3, "label": "l", "more": 1},
        "inners": [{"count": 1}],
        "by_name": {"p": {"label": "q"}},
        "blob": {"any": [1, None]},
        "other": {"kept": True},
    }
    record = decode(Outer, raw)
    assert record.ratio == 2 and isinstance(record.ratio, int)  # as written
    assert record.index == "W1" and record.tags == ("x", "y")
    assert record.inner == Inner(count=3, label="l", extra={"more": 1})
    assert record.inners == [Inner(count=1)] and record.by_name == {"p": Inner(label="q")}
    assert record.blob == {"any": [1, None]} and record.extra == {"other": {"kept": True}}
    assert written(record)["inner"] == {"count": 3, "label": "l", "more": 1}
    assert problem(Outer, raw) is None


def test_missing_keys_and_nulls_are_the_defaults() -> None:
    assert decode(Outer, {"ratio": None, "inner": None}) == Outer()
    assert problem(Outer, {"ratio": None, "tags": None}) is None


def test_what_does_not_fit_is_left_out_and_said() -> None:
    raw: JSONObject = {"name": 3, "flag": 1, "index": 1.5, "inners": [{"count": True}, None, 4]}
    record = decode(Outer, raw, "data")
    assert record.name == "" and record.flag is None and record.index is None
    assert record.inners == [Inner()]  # a bool is not an int; the null and 4 left out
    assert problem(Outer, raw, "data") == "data.name is int 3, not str"
    assert problem(Outer, {"flag": 1}) == "flag is int 1, not bool"
    assert problem(Outer, {"inners": [{"count": True}]}) == (
        "inners[0].count is bool True, not int"
    )
    assert problem(Outer, {"tags": ["a", None]}) == "tags[1] is null"
    assert problem(Outer, {"inners": 3}, "data") == "data.inners is int 3, not a list"
    assert problem(Outer, {"inner": [1]}) == "inner is list, not an object"
    assert problem(Outer, {"index": 1.5}) == "index is float 1.5, not int or str"
    assert problem(Outer, {"by_name": {"p": 2}}) == "by_name.p is int 2, not an object"
    assert problem(Outer, [1], "data") == "data is list, not an object"
