#!/usr/bin/env bash
# Runs matrix/h200-sglang.toml on the lent H200 (no network there). Carried in .kit/:
#   k0514/sglang-kit-part1.tar.xz   the offline kit (../shared/gpu-kit/make-sglang-kit.sh)
#   make-tiny-kimi.py               the weight-less Kimi K2 slice maker (same folder)
#   runs/<name>/                    an earlier, interrupted run to resume (optional)
# Usage there: OUT=... bash scripts/gpu-sglang.sh [SPEC] [BUDGET_S]
# Writes $OUT/<name>/ (the results) and $OUT/<name>.log (the console).
set -euo pipefail
out=${OUT:?set OUT}
spec=${1:-matrix/h200-sglang.toml}
budget=${2:-${BUDGET_S:-500}}
name=$(basename "$spec" .toml)
export PYTHONPATH=$PWD/src STACKMATRIX_WORK_DIR=/tmp/smwork PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}  # flashinfer JIT
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
if [ ! -d .kit/wheels-0.5.14 ]; then
    mkdir -p /tmp/kit-site
    python3 -m tarfile -e .kit/k0514/sglang-kit-part1.tar.xz /tmp/kit-site
    python3 scripts/kit-wheels.py /tmp/kit-site .kit/wheels-0.5.14 >/dev/null
fi
[ -f .kit/tiny-kimi/config.json ] || python3 .kit/make-tiny-kimi.py .kit/tiny-kimi >/dev/null
echo "gpu-sglang: kit and model ready in $(( $(date +%s) - t0 )) s"
resume=()
[ -f ".kit/runs/$name/run.json" ] && resume=(--resume)
# SIGINT first: stackmatrix stops its servers and keeps the launches done
timeout -s INT -k 30 "$budget" python3 -m stackmatrix run "$spec" \
    --output ".kit/runs/$name" "${resume[@]}" --reports-dir /tmp/smreports 2>&1 |
    tee "$out/$name.log" || true
cp -r ".kit/runs/$name" "$out/$name"
echo "gpu-sglang: done in $(( $(date +%s) - t0 )) s"
