"""The spec's fixed vocabularies, as plain tuples.

Apart from spec_model (re-exported there) so the CLI's parser can offer them as
choices without building the spec's dataclasses: `stackmatrix inspect` starts
faster.
"""

from __future__ import annotations

from stackmatrix import backend_registry, executor_registry

# the backends a cell may name: their registry's names
BACKENDS: tuple[str, ...] = backend_registry.NAMES
# (the engines' names are their registry's, engine_registry.NAMES: spec_model.ENGINES)
# bench.workload.prompt_form: prompts sent as text (the server tokenizes them) or as the
# client tokenizer's ids, exactly input_len of them
PROMPT_FORMS: tuple[str, ...] = ("text", "token_ids")
ORDERS: tuple[str, ...] = ("balanced", "interleaved", "sequential", "random")
# where launches run: this host, Slurm jobs (their registry's names)
EXECUTORS: tuple[str, ...] = executor_registry.NAMES
# --fail-on, report.fail_on; the last two judge a cell at the SLO ([report] slo)
FAIL_ON: tuple[str, ...] = (
    "incompatible",
    "regression",
    "failed",
    "goodput-regression",
    "slo-load-regression",
)
SLO_FAIL_ON: tuple[str, ...] = ("goodput-regression", "slo-load-regression")
PIPELINE_PHASES: tuple[str, ...] = ("build", "check", "bench", "report")  # in their order
# the phases that run per cell and write cells/<id>/<phase>.json, in their order (the
# report runs once per run): every module reads the order here (results.PHASES)
CELL_PHASES: tuple[str, ...] = PIPELINE_PHASES[:-1]
# [report] slo: `<kind>_p<percentile>_ms = bound`, a latency's percentile in milliseconds
SLO_KINDS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2e")
SLO_PERCENTILES: tuple[int, ...] = (50, 90, 99)
SLO_KEYS: tuple[str, ...] = tuple(f"{k}_p{q}_ms" for k in SLO_KINDS for q in SLO_PERCENTILES)
