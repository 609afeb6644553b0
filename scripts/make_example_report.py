#!/usr/bin/env python3
"""Regenerate reports/examples/story/: the report a user gets, on SYNTHETIC data.

The results directory is written by tests/support/synthetic.py (a seeded noise model,
not a measurement) in the shape the run phases write, then reported on like any run.
Only the four report files are kept under reports/examples/story/, to keep it small.

    python scripts/make_example_report.py [--out reports/examples/story]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

from stackmatrix import layout
from stackmatrix.findings import Finding, Severity
from stackmatrix.report import build_report
from stackmatrix.results import Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test suite's fixtures
from tests.support.synthetic import SyntheticCell, story_cells, write_run

OUTPUTS = tuple(layout.REPORT_FILES.values())


def cells() -> list[SyntheticCell]:
    cu128, cu130 = story_cells()
    # The fix a reader would try next: ask for flashinfer and DeepGEMM off explicitly.
    fixed = dataclasses.replace(
        cu130,
        id="cu130-flashinfer",
        definition={
            **cu130.definition,
            "server_args": ["--attention-backend", "flashinfer"],
            "env": {"SGL_ENABLE_JIT_DEEPGEMM": "0"},
        },
        throughput=89.3,
        effective_config={**cu130.effective_config, "attention_backend": "flashinfer"},
        log_lines=tuple(line for line in cu130.log_lines if "DeepGemm" not in line),
    )
    # A stack that cannot run on the target at all: the check stops it before the bench.
    no_sm120 = dataclasses.replace(
        cu130,
        id="cu130-pypi-kernel",
        definition={**cu130.definition, "find_links": []},
        lock=tuple(
            ("sgl-kernel", "0.3.21", "pypi") if name == "sgl-kernel" else (name, version, src)
            for name, version, src in cu130.lock
        ),
        verdict="incompatible",
        target_summary={"sm_120": "none"},
        bench_status=Status.SKIPPED,
        findings=(
            Finding(
                code="SM-ARCH-MISSING",
                severity=Severity.FAIL,
                cell="cu130-pypi-kernel",
                subject="sgl_kernel/common_ops.abi3.so",
                message=(
                    "sgl_kernel/common_ops.abi3.so has no SASS for sm_120 and no PTX a "
                    "driver could JIT: install the sgl-kernel build made for CUDA 13 "
                    "(the cu130 wheel index) instead of the PyPI one"
                ),
            ),
        ),
    )
    return [cu128, cu130, fixed, no_sm120]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/examples/story"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stackmatrix-story-") as tmp:
        run = write_run(
            Path(tmp) / "run",
            spec_name="kimi-k25-cuda13 (synthetic example)",
            baseline="cu128",
            cells=cells(),
            targets=["sm_120"],
            seed=7,
        )
        outcome = build_report(run, fail_on=("incompatible", "regression"))
        args.out.mkdir(parents=True, exist_ok=True)
        for name in OUTPUTS:
            text = (run / name).read_text(encoding="utf-8").replace(str(run), "RUN")
            (args.out / name).write_text(text, encoding="utf-8")
    for failure in outcome.policy_failures:
        print(f"policy (expected in this example): {failure}", file=sys.stderr)
    print(f"wrote {', '.join(OUTPUTS)} to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
