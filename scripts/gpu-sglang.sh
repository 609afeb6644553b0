#!/usr/bin/env bash
# Runs matrix/h200-sglang.toml on the lent H200 (no network there). Carried in .kit/:
#   k0514/sglang-kit-part1.tar.xz   the offline kit (../shared/gpu-kit/make-sglang-kit.sh)
#   make-tiny-kimi.py               the weight-less Kimi K2 slice maker (same folder)
# A device call lasts at most 10 minutes and a full run takes ~17, so the run goes on
# in the background (its own session) and later calls wait for it:
#   OUT=... bash scripts/gpu-sglang.sh start [SPEC]   prepare, start, wait up to WAIT_S
#   OUT=... bash scripts/gpu-sglang.sh wait [SPEC]    wait up to WAIT_S more
# Each call leaves $OUT/<name>.tgz (the results so far) and $OUT/<name>.log.
# Results live in /tmp/<name> on the machine; an interrupted run resumes with `start`.
# The device replaces the checkout between calls (a running server once lost its model
# directory that way), so `start` runs everything from a copy in /tmp/sm-gpu.
set -euo pipefail
out=${OUT:?set OUT}
mode=${1:?usage: gpu-sglang.sh start|wait [SPEC]}
spec=${2:-matrix/h200-sglang.toml}
name=$(basename "$spec" .toml)
results=/tmp/$name
export PYTHONPATH=$PWD/src STACKMATRIX_WORK_DIR=/tmp/smwork PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}  # flashinfer JIT
t0=$(date +%s)
if [ "$mode" = start ]; then
    mkdir -p /tmp/sm-gpu
    tar --exclude=./.kit --exclude=./.nox --exclude=./.git -cf - . | tar -C /tmp/sm-gpu -xf -
    mkdir -p /tmp/sm-gpu/.kit
    cp -r .kit/. /tmp/sm-gpu/.kit/
    cd /tmp/sm-gpu
    export PYTHONPATH=$PWD/src
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
    if [ ! -d .kit/wheels-0.5.14 ]; then
        mkdir -p /tmp/kit-site
        python3 -m tarfile -e .kit/k0514/sglang-kit-part1.tar.xz /tmp/kit-site 2>/dev/null
        python3 scripts/kit-wheels.py /tmp/kit-site .kit/wheels-0.5.14 >/dev/null
    fi
    [ -f .kit/tiny-kimi/config.json ] || python3 .kit/make-tiny-kimi.py .kit/tiny-kimi >/dev/null
    echo "gpu-sglang: kit and model ready in $(( $(date +%s) - t0 )) s"
    resume=()
    [ -f "$results/run.json" ] && resume=(--resume)
    setsid python3 -m stackmatrix run "$spec" --output "$results" "${resume[@]}" \
        --reports-dir /tmp/smreports >>"/tmp/$name.log" 2>&1 </dev/null &
    echo $! >"/tmp/$name.pid"
fi
pid=$(cat "/tmp/$name.pid")
deadline=$(( t0 + ${WAIT_S:-560} ))
while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 5; done
kill -0 "$pid" 2>/dev/null && echo "gpu-sglang: still running (pid $pid)" || echo "gpu-sglang: finished"
cp "/tmp/$name.log" "$out/$name.log"
tail -30 "/tmp/$name.log"
tar -C /tmp -czf "$out/$name.tgz" "$name"
echo "gpu-sglang: call done in $(( $(date +%s) - t0 )) s"
