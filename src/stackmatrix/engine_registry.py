"""The engines stackmatrix knows: one entry each, with the properties that every module
outside the bench's adapters asks about, so none of them compares an engine's name.

How an engine is launched, when it is ready and what it reports of its configuration
are its adapter in `bench/engines.py`. This module imports nothing of stackmatrix and
nothing heavy: the spec's parser, the check and the report read it, and
`check/_probe_script.py`, which runs inside a cell's interpreter and imports nothing of
ours, is handed its modules on the command line by `check/probe.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "NAMES",
    "EngineTraits",
    "extension_modules",
    "find",
    "jit_packages",
    "report_distributions",
    "traits",
]


@dataclass(frozen=True, kw_only=True)
class EngineTraits:
    """What an engine is, as the spec, the check, explain and the report need it."""

    name: str
    # False: it serves from outside the cell, at the spec's `bench.url`; nothing is
    # built for it, launched or warmed up
    launches_server: bool = True
    # the distributions of its stack whose versions the report shows; the first is the
    # one whose version is the engine's
    distributions: tuple[str, ...] = ()
    # its server's entry modules, in order: the first that imports is the serving path,
    # the others are fallbacks for versions without it (check/relevance.py)
    entry_modules: tuple[str, ...] = ()
    # what it imports when the model is loaded, which no entry module needs to import
    model_load_modules: tuple[str, ...] = ()
    # the modules whose import the runtime probe tries: its own and the compiled
    # extensions its server may load
    extension_modules: tuple[str, ...] = ()
    # its server flags are its setting names with dashes (`attention_backend` ->
    # `--attention-backend`), so `explain` can set a setting back with a flag
    setting_flags: bool = False
    # distributions of its stack that compile kernels with nvcc at first use
    jit_packages: tuple[str, ...] = ()
    # it keeps the prefixes it served in a cache between requests (the bench empties it
    # before every round: its adapter's `cache_flush_path`)
    prefix_cache: bool = False
    # its completions endpoint takes a prompt of token ids (a list of ints), so
    # `bench.workload.prompt_form = "token_ids"` may be sent to it
    token_id_prompts: bool = False

    @property
    def package(self) -> str | None:
        """The distribution whose version is the engine's."""
        return self.distributions[0] if self.distributions else None


# The order is the one the vocabularies list (spec_names.py); the unions below keep it,
# which makes the probe's import order and the report's version columns.
ENGINES: tuple[EngineTraits, ...] = (
    EngineTraits(
        name="sglang",
        distributions=("sglang", "sgl-kernel", "sglang-kernel", "flashinfer-python"),
        entry_modules=("sglang.srt.entrypoints.http_server", "sglang.srt.server_args", "sglang"),
        model_load_modules=("sgl_kernel", "flashinfer"),  # the scheduler's imports
        extension_modules=("sgl_kernel", "flashinfer", "sglang"),
        setting_flags=True,
        jit_packages=("flashinfer-python", "sglang"),
        prefix_cache=True,
        token_id_prompts=True,  # CompletionRequest.prompt: str | list[int] | ...
    ),
    # vLLM: the API server's module, then what its engine-core process imports and the
    # kernels that vllm/platforms imports for the model (`import_kernels`): `_C` and
    # `_moe_C`, and since the ops moved to csrc/libtorch_stable their `_stable_libtorch`
    # builds. A version without one of them fails with ModuleNotFoundError for that
    # very name, which check/relevance.py counts as absent, not as a failed import.
    EngineTraits(
        name="vllm",
        distributions=("vllm",),
        entry_modules=("vllm.entrypoints.openai.api_server", "vllm"),
        model_load_modules=(
            "vllm.v1.engine.core",
            "vllm._C",
            "vllm._moe_C",
            "vllm._C_stable_libtorch",
            "vllm._moe_C_stable_libtorch",
        ),
        extension_modules=("vllm", "flash_attn", "deep_gemm", "triton", "xformers"),
        setting_flags=True,
        prefix_cache=True,
        token_id_prompts=True,
    ),
    # `transformers serve` 5.x answers a prompt that is not a string with "prompt must
    # be a string." (transformers/cli/serving/completion.py)
    EngineTraits(
        name="transformers",
        distributions=("transformers",),
        entry_modules=("transformers",),
        extension_modules=("transformers",),
        setting_flags=True,
    ),
    # a server already running at `bench.url`: its stack is not the cell's
    # (what it accepts is its own: a prompt it refuses fails each request, recorded)
    EngineTraits(name="external", launches_server=False, token_id_prompts=True),
)
NAMES: tuple[str, ...] = tuple(e.name for e in ENGINES)
DEFAULT_ENGINE = "transformers"  # a spec's `bench.engine` when it names none
_BY_NAME = {e.name: e for e in ENGINES}


def find(name: str | None) -> EngineTraits | None:
    """The engine called `name`, None for a name no engine has (or none)."""
    return _BY_NAME.get(name or "")


def traits(name: str) -> EngineTraits:
    found = find(name)
    if found is None:
        raise ValueError(f"unknown engine {name!r}; known engines: {', '.join(sorted(NAMES))}")
    return found


def extension_modules() -> tuple[str, ...]:
    """What the runtime probe imports by default: every engine's extension modules."""
    return _union(e.extension_modules for e in ENGINES)


def report_distributions() -> tuple[str, ...]:
    """Every engine's distributions, each once, in the registry's order."""
    return _union(e.distributions for e in ENGINES)


def jit_packages() -> tuple[str, ...]:
    """Every distribution that compiles kernels with nvcc at first use, each once."""
    return _union(e.jit_packages for e in ENGINES)


def _union(groups: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for group in groups for name in group))
