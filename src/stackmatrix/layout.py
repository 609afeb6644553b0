"""The results directory's layout: every file name stackmatrix writes there, defined
once. Writers and readers use these, and tests/unit/test_layout_names.py fails on a
results name spelled in any other module; docs/architecture.md shows the tree.

    RUN/run.json  plan.json  spec.toml  workload.json  workload.jsonl
        workload-<point>.jsonl  bench-schedule.json  .stackmatrix.lock
        matrix.md  matrix.html  matrix.json  junit.xml
        cells/<id>/{build,check,bench}.json  {build,check,bench}.log
                   server-L<k>.log  server-L<k>.live.json
                   requests-L<k>-R<r>[-<point>].jsonl  warmup-W<w>-R<r>[-<point>].jsonl
        explain/<cell>/explanation.json  explain/<cell>/round-<n>/ (a results directory)
                       explain/<cell>/round-<n>.toml (the spec it ran)
        slurm/jobs.json  slurm/block-<k>.json  slurm/<block>.sh  slurm/<block>.<job>.out
        calibration.json (`stackmatrix calibrate`)

A kept example may hold a phase result, a server log or a round's request records
compressed instead (`<name>.gz`, scripts/compact-example.py); readers take the file as
written when it is there, else its compressed copy.
"""

from __future__ import annotations

RUN_JSON = "run.json"
PLAN_JSON = "plan.json"
SPEC_TOML = "spec.toml"
WORKLOAD_JSON = "workload.json"
WORKLOAD_JSONL = "workload.jsonl"
BENCH_SCHEDULE = "bench-schedule.json"
LOCK_FILE = ".stackmatrix.lock"
# each report format's file (report/formats.py renders them, in this order)
REPORT_FILES = {
    "markdown": "matrix.md",
    "html": "matrix.html",
    "json": "matrix.json",
    "junit": "junit.xml",
}
REPORT_MD, REPORT_HTML, REPORT_JSON, REPORT_JUNIT = (
    REPORT_FILES["markdown"],
    REPORT_FILES["html"],
    REPORT_FILES["json"],
    REPORT_FILES["junit"],
)
HISTORY_DB = "history.sqlite"  # in the reports directory, next to the runs
CALIBRATION_JSON = "calibration.json"  # what `stackmatrix calibrate` measured
CELLS_DIR = "cells"
EXPLAIN_DIR = "explain"
EXPLANATION_JSON = "explanation.json"
# the Slurm executor's directory: the jobs, each block's record, scripts and job logs
SLURM_DIR = "slurm"
SLURM_JOBS = "jobs.json"
SERVER_LOG_GLOB = "server-L*.log"
REQUESTS_GLOB = "requests-L*-R*.jsonl"
# what a cell's launches write next to bench.json (each also as its compressed copy);
# a bench started afresh removes them first (results.CellDir.remove_launch_files)
LAUNCH_FILE_GLOBS = (SERVER_LOG_GLOB, REQUESTS_GLOB, "warmup-W*-R*.jsonl")
# a running server's record beside its log, server-L<k>.live.json (bench/leftovers.py)
LIVE_SUFFIX = ".live.json"
COMPRESSED_SUFFIX = ".gz"


def phase_result(phase: str) -> str:
    return f"{phase}.json"


def phase_log(phase: str) -> str:
    return f"{phase}.log"


def compressed(name: str) -> str:
    """The name of the compressed copy of the file named `name`."""
    return name + COMPRESSED_SUFFIX


def explain_round(k: int) -> str:
    """Round k of `stackmatrix explain`, a results directory under explain/<cell>/."""
    return f"round-{k}"


def explain_round_spec(k: int) -> str:
    """The spec round k ran, beside its directory."""
    return f"{explain_round(k)}.toml"


def point_workload(point: str) -> str:
    return f"workload-{point}.jsonl"


def server_log(launch: int | str) -> str:
    return f"server-L{launch}.log"


def live_record(log_stem: str) -> str:
    """The record kept while a server runs, by its log's stem: `server-L1` ->
    `server-L1.live.json`."""
    return log_stem + LIVE_SUFFIX


def live_record_log(record: str) -> str:
    """The log a live record belongs to: `server-L1.live.json` -> `server-L1.log`."""
    return record.removesuffix(LIVE_SUFFIX) + ".log"


def requests_file(launch: int | str, rnd: int, point: str | None = None) -> str:
    """A round's request records; warm-up launches ("W1") are named so that nothing
    reads them as measurements."""
    prefix = f"requests-L{launch}" if isinstance(launch, int) else f"warmup-{launch}"
    return f"{prefix}-R{rnd}{f'-{point}' if point else ''}.jsonl"


def slurm_block(block: int) -> str:
    """A Slurm block's own record, under SLURM_DIR."""
    return f"block-{block}.json"


def slurm_script(stem: str) -> str:
    return f"{stem}.sh"


def slurm_log(stem: str, job: str) -> str:
    """A block's job log: `job` is its job id, or sbatch's `%j` pattern for it."""
    return f"{stem}.{job}.out"
