"""A fake `transformers serve` whose decode speed depends on a server argument.

`python -m transformers.cli.transformers serve MODEL --host H --port P
[--token-gap-ms MS]` serves the error-path tests' fake engine (FAKE_MODE=ok) with MS
milliseconds between tokens (3 by default), so a cell that passes a larger gap is
truly slower and reverting that argument truly recovers the speed.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    gap_ms = 3.0
    for i, arg in enumerate(argv[:-1]):  # the last one counts, as with argparse
        if arg == "--token-gap-ms":
            gap_ms = float(argv[i + 1])
    os.environ["FAKE_MODE"] = "ok"
    os.environ["FAKE_GAP_S"] = str(gap_ms / 1000.0)
    os.environ.setdefault("FAKE_TOKENS", "16")
    bench_tests = Path(__file__).resolve().parents[4] / "bench"
    sys.path.insert(0, str(bench_tests))
    fake_engine = importlib.import_module("fake_engine")  # reads FAKE_* at import

    return int(fake_engine.main(argv))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
