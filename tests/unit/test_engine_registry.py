"""The engine registry (engine_registry.py): the spec's vocabulary, the bench's adapters
and the registry name the same engines, and no module outside the two files where an
engine goes decides by an engine's name."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from stackmatrix import engine_registry, spec_model, spec_names
from stackmatrix.bench.engines import ENGINES as ADAPTERS
from stackmatrix.bench.engines import get_engine

SRC = Path(__file__).resolve().parents[2] / "src" / "stackmatrix"
# where an engine goes (docs/architecture.md, "Where a new thing goes")
ENGINE_FILES = {"engine_registry.py", "bench/engines.py"}
# tests of the external engine by name that are still to become `engine.launches_server`
# (bench/phase.py `_skip_reason`); remove the entry once they are
STILL_BY_NAME: set[str] = set()


def test_the_spec_vocabulary_is_the_registrys_names() -> None:
    assert spec_model.ENGINES is engine_registry.NAMES  # derived, not respelled
    assert not hasattr(spec_names, "ENGINES")


def test_every_engine_has_an_adapter_of_the_same_name() -> None:
    assert sorted(ADAPTERS) == sorted(engine_registry.NAMES)
    for name in engine_registry.NAMES:
        engine = get_engine(name)
        assert engine.traits is engine_registry.traits(name)
        assert engine.package == engine.traits.package


def test_the_default_engine_is_the_spec_models() -> None:
    default = {f.name: f.default for f in fields(spec_model.Bench)}["engine"]
    assert default == engine_registry.DEFAULT_ENGINE


def test_properties_in_place_of_names() -> None:
    external = engine_registry.traits("external")
    assert not external.launches_server and external.package is None
    assert not get_engine("external").launches_server
    assert all(get_engine(n).launches_server for n in ("sglang", "vllm", "transformers"))
    assert engine_registry.traits("sglang").package == "sglang"
    assert [e.name for e in engine_registry.ENGINES if e.setting_flags] == [
        "sglang",
        "vllm",
        "transformers",
    ]
    assert engine_registry.find(None) is None and engine_registry.find("tgi") is None
    with pytest.raises(ValueError, match="known engines: external, sglang"):
        engine_registry.traits("tgi")


def test_the_unions_keep_the_registrys_order_each_name_once() -> None:
    assert engine_registry.extension_modules() == (
        "sgl_kernel",
        "flashinfer",
        "sglang",
        "vllm",
        "flash_attn",
        "deep_gemm",
        "triton",
        "xformers",
        "transformers",
    )
    assert engine_registry.report_distributions() == (
        "sglang",
        "sgl-kernel",
        "sglang-kernel",
        "flashinfer-python",
        "vllm",
        "transformers",
    )
    assert engine_registry.jit_packages() == ("flashinfer-python", "sglang")


def _compares_an_engine_name(tree: ast.AST) -> list[int]:
    names = set(engine_registry.NAMES)

    def spelled(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(spelled(e) for e in node.elts)
        return False

    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        if any(spelled(side) for side in (node.left, *node.comparators))
    ]


def test_no_module_outside_the_engine_files_decides_by_an_engines_name() -> None:
    offenders: dict[str, list[int]] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        lines = _compares_an_engine_name(ast.parse(path.read_text(encoding="utf-8")))
        if lines and rel not in ENGINE_FILES:
            offenders[rel] = lines
    assert set(offenders) == STILL_BY_NAME, offenders


def test_the_name_test_finds_comparisons() -> None:
    tree = ast.parse('a == "vllm"\nb in ("x", "sglang")\nc != "other"\nd = "vllm"\n')
    assert _compares_an_engine_name(tree) == [1, 2]
