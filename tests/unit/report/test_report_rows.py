"""Rows of the report that read badly: the engine's version twice,
and an outlier's note as raw JSON."""

from __future__ import annotations

from pathlib import Path

from stackmatrix.jsontypes import JSONObject, JSONValue
from stackmatrix.report import build_report
from stackmatrix.report.fmt import distinct_facts, facts_text

from ._results import bench_data, phase, run_dir, write


def test_the_engine_version_is_one_row(tmp_path: Path) -> None:
    defs = {c: {"python": "3.11", "pins": ["x==1"]} for c in "ab"}
    rd = run_dir(tmp_path, cells=["a", "b"], baseline="a", definitions=defs)
    for c, version in (("a", "4.57.1"), ("b", "4.58.0")):
        write(rd / "cells" / c / "build.json", phase(c, "build"))
        config = {"attention_backend": "sdpa", "engine_version": version}
        bench = bench_data([[47.1, 47.3], [46.0, 46.5]], config=config, engine_version=version)
        write(rd / "cells" / c / "bench.json", phase(c, "bench", data=bench))
    drift = build_report(rd).report.cell("b").drift
    assert drift is not None
    keys = [d.key for d in (*drift.unintended, *drift.intended) if "version" in d.key]
    assert keys == ["engine:version"]


def test_an_outlier_note_is_facts_not_json() -> None:
    facts: JSONObject = {
        "before": {
            "time": "2026-12-01T03:00:00+00:00",
            "loadavg": [3.2, 4.1, 4.8],
            "cpu_count": 2,
            "gpus": [{"sm_clock_mhz": 1980, "temp_c": 41}],
        },
        "after": {"gpus": None, "loadavg": []},
    }
    assert facts_text(facts) == (
        "before.loadavg=3.2/4.1/4.8, before.cpu_count=2, before.gpus[0].sm_clock_mhz=1980, "
        "before.gpus[0].temp_c=41"
    )
    deep: JSONObject = {}
    node = deep
    for _ in range(50):
        child: JSONObject = {}
        node["x"] = child
        node = child
    node["y"] = 1
    assert facts_text(deep).endswith("=…")


def test_an_outlier_note_names_what_sets_it_apart() -> None:
    """On the H200 the note of an outlier launch listed every fact (GPU name, CPU count);
    it names those outside the other launches' values, or says that none is."""

    def launch(sm: int, load: float, procs: list[str]) -> JSONObject:
        gpu: JSONObject = {"name": "NVIDIA H200", "clocks.sm": str(sm)}
        return {
            "before": {
                "loadavg": [load, 1.0, 0.5],
                "cpu_count": 16,
                "gpus": [gpu],
                "gpu_processes": list[JSONValue](procs),
            }
        }

    others = [launch(1980, 1.2, []), launch(1980, 2.0, []), launch(1965, 1.5, [])]
    assert distinct_facts(launch(1970, 1.4, []), others) == ""
    # a clock read on an idle GPU before the launch explains nothing of its speed
    assert distinct_facts(launch(1410, 1.4, []), others) == ""
    assert distinct_facts(launch(1980, 7.5, ["python"]), others) == (
        "before.loadavg=7.5/1.0/0.5, before.gpu_processes=python"
    )
    assert distinct_facts(launch(1410, 1.4, []), []) == ""  # nothing to compare with
