"""A stackmatrix bench of one cell against the fake engine, under the pipeline's
signal handling, for fault injection (`python bench_run.py RUN_DIR FAKE_ENGINE
[CLIENT_WORKERS]`).

Prints each progress line; exits 0, or 128 + the signal that stopped it, as the CLI.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from stackmatrix import _signals
from stackmatrix.bench.phase import run_bench_phase
from stackmatrix.built_environment import Environment
from stackmatrix.pipeline import children_stop_on_ctrl_c
from stackmatrix.results import RunDir
from stackmatrix.spec_model import Bench, Cell, Spec, Workload


def main(run_dir: Path, fake: Path, workers: int = 1) -> int:
    # as in a terminal session: a test run under nohup would pass SIGHUP on ignored
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    spec = Spec(
        name="signals",
        path=str(run_dir.parent / "spec.toml"),
        baseline="a",
        cells=(Cell(id="a"),),
        bench=Bench(
            engine="transformers",
            model="fake-model",
            launches=1,
            rounds=2,
            ready_timeout_s=20.0,
            client_workers=workers,
            workload=Workload(
                input_len=8,
                output_len=8,
                num_prompts=6,
                max_concurrency=2,
                warmup=1,
                request_timeout_s=20.0,
            ),
        ),
    )
    env = Environment(backend="venv", python=(sys.executable, str(fake)), env={"FAKE_GAP_S": "0.1"})

    def say(cell: str, msg: str) -> None:
        print(f"{cell}: {msg}", flush=True)

    try:
        with children_stop_on_ctrl_c():
            envs = {"a": env}
            results = run_bench_phase(
                spec, RunDir(run_dir), ["a"], environments=envs, order="sequential", progress=say
            )
    except KeyboardInterrupt as exc:
        return _signals.exit_code(exc)
    print(f"status {results['a'].status.value}", flush=True)
    return 0


if __name__ == "__main__":
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2]), workers))
