#!/usr/bin/env bash
# Produces the GPU examples under reports/examples/ on an H200 host (no
# network there: the serving packages `transformers serve` needs, and aiohttp for the
# client benchmark's timing server, are carried as wheels in .devwheels/, made with
# `pip download --python-version 3.12 --only-binary=:all: --platform
# manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any -d .devwheels
# 'fastapi<0.118' 'pydantic<2.12' 'openai<2' uvicorn starlette aiohttp`).
# Usage there: bash scripts/gpu-examples.sh probe|aa|attention|timing ...  (writes to $OUT)
set -euo pipefail
out=${OUT:?set OUT}
[ $# -gt 0 ] || { echo "usage: $0 probe|aa|attention|timing ..." >&2; exit 2; }
export PYTHONPATH=$PWD/src STACKMATRIX_WORK_DIR=/tmp/smwork PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c 'import fastapi, uvicorn, openai, aiohttp' 2>/dev/null ||
    python3 -m pip install -q --no-index --find-links .devwheels \
        'fastapi<0.118' 'pydantic<2.12' 'openai<2' uvicorn starlette aiohttp
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
for what in "$@"; do
    case $what in
    probe)
        python3 -m stackmatrix probe >"$out/probe-h200.json"
        ;;
    aa | attention)
        spec=matrix/h200-$what.toml
        # SIGINT first: stackmatrix stops its servers and keeps what completed
        timeout -s INT -k 30 "${BUDGET_S:-500}" python3 -m stackmatrix run "$spec" \
            --output "/tmp/h200-$what" --reports-dir /tmp/smreports 2>&1 |
            tee "$out/h200-$what.log" || true
        tar -C /tmp -czf "$out/h200-$what.tgz" "h200-$what"
        ;;
    timing)
        python3 benchmarks/bench_client.py timing 2>&1 | tee "$out/bench-client-timing.txt"
        ;;
    *)
        echo "unknown example $what" >&2
        exit 2
        ;;
    esac
done
