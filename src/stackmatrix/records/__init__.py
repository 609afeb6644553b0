"""Typed records of the results directory's JSON: run.json and the phases' data (build,
check, and the bench's launches, their rounds and load points).

`from_dict` reads what stackmatrix writes today and what it wrote before (bench.json
files of earlier versions lack keys; warm-up launches are indexed "W1"): a missing key
or a null is the field's default, never an error, because the report must still load
old results. Most records read through `decode.decode`, by their fields' types, and
`decode.problem` says where a file's value does not fit them (run.json, plan.json, and
the phases' data through `phases.data_problem`); what does not fit stays out of the
fields. Keys no field names travel in `extra`, so `to_dict` gives back what was read.
The JSON types themselves (`JSONValue`, `JSONObject`) are `stackmatrix.jsontypes`.

The bench phase writes its launches and rounds as `LaunchRecord`/`RoundRecord`
(bench/_launch.py); the cell's `data` around them is still a dict.

    run       RunRecord, ReportPolicyRecord      bench   BenchData, LaunchRecord, RoundRecord,
    phases    BuildData, CheckData, check_verdict        PointRun, PointInfo
    plan      PlanCell, PlanRecord               decode  decode, problem: JSON into records
"""

from __future__ import annotations

from stackmatrix.records.bench import BenchData, LaunchRecord, PointInfo, PointRun, RoundRecord
from stackmatrix.records.phases import BuildData, CheckData, check_verdict
from stackmatrix.records.plan import PlanCell, PlanRecord
from stackmatrix.records.run import ReportPolicyRecord, RunRecord
from stackmatrix.results import SCHEMA_VERSION

__all__ = [
    "SCHEMA_VERSION",
    "BenchData",
    "BuildData",
    "CheckData",
    "LaunchRecord",
    "PlanCell",
    "PlanRecord",
    "PointInfo",
    "PointRun",
    "ReportPolicyRecord",
    "RoundRecord",
    "RunRecord",
    "check_verdict",
]
