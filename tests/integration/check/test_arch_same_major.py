"""pytorch#172629: on a GB10 (compute capability 12.1) torch warned that its build
supports "(8.0) - (12.0)" although plain sm_120 code runs there: a cubin runs on every
GPU of its major with a minor at least its own. An `a` cubin (sm_120a) runs on exactly
its arch, and PTX JITs forward. Judged on the same kernel built by nvcc for one arch
each, with cuobjdump saying what each file holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from stackmatrix.check.phase import inspect_path

pytestmark = pytest.mark.integration

PLAIN, SPECIFIC, PTX = (
    "arch=compute_120,code=sm_120",
    "arch=compute_120a,code=sm_120a",
    "arch=compute_120,code=compute_120",
)


def test_what_each_build_holds(
    one_arch_builds: dict[str, Path], cuobjdump_list: Callable[[Path], list[tuple[str, str]]]
) -> None:
    # a set: nvcc may write one entry twice (one per fatbin container)
    assert set(cuobjdump_list(one_arch_builds[PLAIN])) == {("cubin", "sm_120")}
    assert set(cuobjdump_list(one_arch_builds[SPECIFIC])) == {("cubin", "sm_120a")}
    assert set(cuobjdump_list(one_arch_builds[PTX])) == {("ptx", "sm_120")}


def test_plain_sm_120_code_runs_on_sm_121_without_a_finding(
    one_arch_builds: dict[str, Path],
) -> None:
    outcome = inspect_path(one_arch_builds[PLAIN], targets=["sm_120", "sm_121"])
    assert outcome.data["target_summary"] == {"sm_120": "native", "sm_121": "native"}
    assert (outcome.verdict, outcome.findings) == ("compatible", [])


def test_sm_120a_code_does_not_run_on_sm_121(one_arch_builds: dict[str, Path]) -> None:
    outcome = inspect_path(one_arch_builds[SPECIFIC], targets=["sm_120", "sm_121"])
    assert outcome.data["target_summary"] == {"sm_120": "native", "sm_121": "none"}
    assert outcome.verdict == "incompatible"
    (finding,) = outcome.findings
    assert (finding.code, finding.details.get("target")) == ("SM-ARCH-NONE", "sm_121")


def test_compute_120_ptx_jits_forward(one_arch_builds: dict[str, Path]) -> None:
    outcome = inspect_path(one_arch_builds[PTX], targets=["sm_121", "sm_90"])
    assert outcome.data["target_summary"] == {"sm_121": "ptx", "sm_90": "none"}
    assert {f.code for f in outcome.findings} == {"SM-ARCH-PTX-ONLY", "SM-ARCH-NONE"}
