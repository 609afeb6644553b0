from __future__ import annotations

import tomllib

from hypothesis import given
from hypothesis import strategies as st

from stackmatrix.explain._toml import dumps

scalars = st.one_of(
    st.booleans(), st.integers(-(2**60), 2**60), st.text(max_size=20),
    st.floats(allow_nan=False),
)  # fmt: skip
keys = st.text(min_size=1, max_size=10)


values = st.one_of(
    scalars, st.lists(scalars, max_size=4), st.dictionaries(keys, scalars, max_size=3)
)


@given(st.dictionaries(keys, values, max_size=6))
def test_round_trip(data: dict[str, object]) -> None:
    assert tomllib.loads(dumps(data)) == data


def test_a_spec_shape_round_trips() -> None:
    spec = {
        "name": "x-explain",
        "baseline": "a",
        "cell": [{"id": "a", "env": {"K": "v"}, "pins": ["t==1"]}, {"id": "b~x=1"}],
        "bench": {"engine": "sglang", "workload": {"input_len": 8, "request_rate": float("inf")}},
    }
    assert tomllib.loads(dumps(spec)) == spec


def test_a_key_ending_in_a_newline_is_quoted() -> None:
    # `$` matches before a final newline: a bare key must match the whole key
    cases: list[dict[str, object]] = [{"0\n": {}}, {"0\n": False}, {"a\n": [{"b": 1}]}]
    for data in cases:
        assert tomllib.loads(dumps(data)) == data
