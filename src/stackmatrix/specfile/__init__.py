"""Read and validate a matrix spec (TOML) into `spec_model.Spec`.

Every problem is collected and reported at once (`SpecError`, exit code 2), each
with its key path, the offending value and, for unknown keys, a suggestion.
Values are never turned into shell text anywhere in stackmatrix; here we also
reject characters that have no business in a pin, URL or name.

    parse     load_spec, parse_spec: the file, its top-level keys, the baseline
    cells     [[cell]] and [axes] (include, exclude): every cell, merged and checked
    bench     [bench], its workload and load points
    report    [report], and parse_fail_on (the one parser of --fail-on)
    _values   the checks of one value and the accessors of a table's keys
"""

from __future__ import annotations

from stackmatrix.spec_model import MAX_LAUNCHES
from stackmatrix.specfile.bench import (
    BENCH_KEYS,
    GENERATED_MODELS,
    MAX_CLIENT_WORKERS,
    MAX_POINTS,
    MAX_PROMPTS,
    MAX_TOKENS,
    MAX_WORKLOAD_TOKENS,
    POINT_KEYS,
    WORKLOAD_KEYS,
)
from stackmatrix.specfile.cells import CELL_KEYS, LIST_FIELDS, MAX_CELLS
from stackmatrix.specfile.parse import MAX_SPEC_BYTES, TOP_KEYS, load_spec, parse_spec
from stackmatrix.specfile.report import REPORT_KEYS, parse_fail_on

__all__ = [
    "BENCH_KEYS",
    "CELL_KEYS",
    "GENERATED_MODELS",
    "LIST_FIELDS",
    "MAX_CELLS",
    "MAX_CLIENT_WORKERS",
    "MAX_LAUNCHES",
    "MAX_POINTS",
    "MAX_PROMPTS",
    "MAX_SPEC_BYTES",
    "MAX_TOKENS",
    "MAX_WORKLOAD_TOKENS",
    "POINT_KEYS",
    "REPORT_KEYS",
    "TOP_KEYS",
    "WORKLOAD_KEYS",
    "load_spec",
    "parse_fail_on",
    "parse_spec",
]
