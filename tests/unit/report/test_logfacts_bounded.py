"""Log facts from a huge (here sparse) server log: read at its start and its end only,
fast and in little memory."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

from stackmatrix.report.logfacts import load_patterns, read_facts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_a_sparse_gigabyte_log_is_read_bounded(tmp_path: Path) -> None:
    log = tmp_path / "server-L1.log"
    start = (FIXTURES / "sglang-0.5.12" / "server-flashinfer.log").read_bytes()
    with log.open("wb") as fh:
        fh.write(start)
        fh.truncate(1 << 30)  # the rest: 1 GiB of NULs on one line, taking no disk
    began = time.monotonic()
    tracemalloc.start()
    try:
        facts = read_facts([log], load_patterns(), engine="sglang")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert facts["kv_cache_dtype"].value == "torch.bfloat16"  # stated at the start
    assert peak < 256 << 20
    assert time.monotonic() - began < 20
