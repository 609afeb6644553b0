"""The shapes of the phase data, checked once where they are read (run.json and
plan.json are checked against their records: records/_read.py `problem`).

Readers use `.get` and trust the types they find; a bench.json whose `launches` is a
number (a corrupt or hand-edited file) used to end the report with a traceback. Keys may be missing
or null; what is there must fit (a list holds no nulls).
"""

from __future__ import annotations

from typing import Any

# a dict: its listed keys have these shapes (key "*": every value has that shape); a
# one-item list: every item has that shape; a type or tuple of types: isinstance
Shape = Any
_NUMBER = (int, float)
_ROUND = {"metrics": {}, "requests_file": str, "index": int}
_POINT_LAUNCH = {"rounds": [_ROUND], "summary": {}}  # a load point in one launch
_LAUNCH = {
    "rounds": [_ROUND],
    "env_facts": {},
    "status": str,
    "index": int,
    "points": {"*": _POINT_LAUNCH},
}
_WARMUP = {**_LAUNCH, "index": (int, str)}  # "W1"
PHASE_DATA: dict[str, Shape] = {
    "build": {"environment": {"env": {}}, "lock": [{}], "python_version": str},
    "check": {
        "probe": {"env": {}},
        "driver": {},
        "target_summary": {},
        "inventory": list,
        "extensions": list,
        "coverage": {},
    },
    "bench": {
        "launches": [_LAUNCH],
        "warmup_launches": [_WARMUP],
        "effective_config": {},
        "server_info": {},
        "launch_argv": list,
        "summary": {},
        "engine": str,
        "engine_version": str,
        "points": {"*": {"summary": {}, "metric": str}},
    },
}


def problem(value: Any, shape: Shape, where: str = "") -> str | None:
    """Where `value` first departs from `shape`, said for a person; None if it fits."""
    if value is None:
        return None
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{where} is {type(value).__name__}, not an object"
        every = shape.get("*")
        pairs = [(k, s) for k, s in shape.items() if k != "*"]
        if every is not None:
            pairs += [(k, every) for k in value]
        found = (problem(value.get(k), s, f"{where}.{k}".lstrip(".")) for k, s in pairs)
        return next((p for p in found if p), None)
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where} is {type(value).__name__}, not a list"
        found = (
            problem(v, shape[0], f"{where}[{i}]") if v is not None else f"{where}[{i}] is null"
            for i, v in enumerate(value)
        )
        return next((p for p in found if p), None)
    if (shape is int and isinstance(value, bool)) or not isinstance(value, shape):
        return f"{where} is {type(value).__name__} {value!r:.40}, not {_name(shape)}"
    return None


def _name(shape: type | tuple[type, ...]) -> str:
    types = shape if isinstance(shape, tuple) else (shape,)
    return " or ".join(t.__name__ for t in types)
