#!/usr/bin/env bash
# Produces the GPU examples under reports/examples/ on the lent H200 machine (no
# network there: the serving packages `transformers serve` needs are carried as
# wheels in .devwheels/, made with `pip download --python-version 3.12
# --only-binary=:all: 'fastapi<0.118' 'pydantic<2.12' 'openai<2' uvicorn starlette`).
# Usage there: bash scripts/gpu-examples.sh probe|aa|attention   (writes to $OUT)
set -euo pipefail
what=${1:?probe, aa or attention}
out=${OUT:?set OUT}
export PYTHONPATH=$PWD/src STACKMATRIX_WORK_DIR=/tmp/smwork PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c 'import fastapi, uvicorn, openai' 2>/dev/null ||
    python3 -m pip install -q --no-index --find-links .devwheels \
        'fastapi<0.118' 'pydantic<2.12' 'openai<2' uvicorn starlette
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
case $what in
probe)
    python3 -m stackmatrix probe >"$out/probe-h200.json"
    ;;
aa | attention)
    spec=matrix/h200-$what.toml
    # SIGINT first: stackmatrix stops its servers and keeps what completed
    timeout -s INT -k 30 "${BUDGET_S:-500}" python3 -m stackmatrix run "$spec" \
        --output "/tmp/h200-$what" --reports-dir /tmp/smreports 2>&1 | tee "$out/h200-$what.log" || true
    tar -C /tmp -czf "$out/h200-$what.tgz" "h200-$what"
    ;;
esac
