#!/usr/bin/env bash
# Runs an SGLang spec (matrix/h200-sglang*.toml) on an H200 host (no network there).
# Carried in .kit/ (ignored by git):
#   k<v>/sglang-kit-part1.tar.xz   offline kits (scripts/make-kit.sh scripts/kits/sglang-<v>.pins)
#   make-tiny-kimi.py              the weight-less Kimi K2 slice maker (../shared/gpu-kit)
# A command on the GPU host lasts at most 10 minutes, carries at most 64 MiB (one kit,
# ~50 MB, with the working tree: move reports/examples/ aside for the calls that carry a
# kit) and a run takes longer, so the work lives in /tmp/sm-gpu on the machine, which persists
# between calls while the machine is held (the checkout itself is replaced at every call):
#   OUT=... bash scripts/gpu-sglang.sh stage           keep the carried kit parts for a later call
#   OUT=... bash scripts/gpu-sglang.sh prepare         unpack the carried kit(s) into wheels
#   [CELLS="ID ..."] OUT=... bash scripts/gpu-sglang.sh start [SPEC]
#                                       prepare, start the run (only CELLS if set), wait WAIT_S
#   OUT=... bash scripts/gpu-sglang.sh wait [SPEC]     wait up to WAIT_S more
#   CELL=ID [LAUNCHES=N] [WARMUP=N] [WARMUP_LAUNCHES=N] OUT=... bash scripts/gpu-sglang.sh explain [SPEC]
#                                       prepare, then `stackmatrix explain` the run of SPEC
#                                       (from .kit/runs/<name>/ or reports/examples/<name>/)
# Each call leaves $OUT/<name>.tgz (the results so far) and $OUT/<name>.log; an
# interrupted run resumes with `start`, on a fresh machine too when the results
# directory is carried as .kit/runs/<name>/.
# With reports/examples/ the tree is ~20 MB, so a whole kit (~50 MB) does not fit one
# call beside it; without it the tree is ~2 MB. Every mode works without
# reports/examples/ when what it reads is carried in .kit/: move reports/examples/ out
# of the checkout for the calls, and carry both kit parts, the kit's MANIFEST.txt,
# make-tiny-kimi.py and (for `explain`, or to resume a run begun on another machine)
# .kit/runs/<name>/ in the first call (~55 MB). Later `wait` calls carry nothing (the
# machine must still be held: call again within its idle release, 30 s). The older
# two-call way still works: a kit made in two parts (KIT_PART_LIMIT_MIB=30
# ../shared/gpu-kit/make-sglang-kit.sh .kit/k0514: 30 + 20 MB), part 1 to a `stage`
# call, the rest to the next.
set -euo pipefail
out=${OUT:?set OUT}
mode=${1:?usage: gpu-sglang.sh stage|prepare|start|wait|explain [SPEC]}
spec=${2:-matrix/h200-sglang.toml}
name=$(basename "$spec" .toml)
results=/tmp/$name
work=/tmp/sm-gpu
export STACKMATRIX_WORK_DIR=/tmp/smwork PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}  # flashinfer JIT
t0=$(date +%s)

prepare() {
    mkdir -p "$work/.kit"
    # kit parts an earlier call of this machine staged
    for part in "$work"/stage/k*/sglang-kit-part*.tar.xz; do
        [ -f "$part" ] || continue
        dir=.kit/$(basename "$(dirname "$part")")
        mkdir -p "$dir"
        [ -f "$dir/$(basename "$part")" ] || cp "$part" "$dir/"
    done
    for kit in .kit/k*/sglang-kit-part1.tar.xz; do
        [ -f "$kit" ] || continue
        version=$(awk '$1 == "sglang" && $2 ~ /^[0-9]/ {print $2; exit}' "$(dirname "$kit")/MANIFEST.txt")
        wheels=$work/.kit/wheels-$version
        [ -d "$wheels" ] && continue
        site=/tmp/kit-site-$version
        mkdir -p "$site"
        for part in "$(dirname "$kit")"/sglang-kit-part*.tar.xz; do
            python3 -m tarfile -e "$part" "$site" 2>/dev/null
        done
        python3 scripts/kit-wheels.py "$site" "$wheels" >/dev/null
        echo "gpu-sglang: wheels of sglang $version in $wheels"
    done
    if [ ! -f "$work/.kit/tiny-kimi/config.json" ]; then
        python3 .kit/make-tiny-kimi.py "$work/.kit/tiny-kimi" >/dev/null
    fi
}

case $mode in
stage)
    for part in .kit/k*/sglang-kit-part*.tar.xz; do
        [ -f "$part" ] || continue
        mkdir -p "$work/stage/$(basename "$(dirname "$part")")"
        cp "$part" "$work/stage/$(basename "$(dirname "$part")")/"
        echo "gpu-sglang: staged $part"
    done
    exit 0
    ;;
prepare)
    prepare
    exit 0
    ;;
start | explain)
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv
    prepare
    # this checkout, without the kits, next to the prepared wheels and model
    tar --exclude=./.kit --exclude=./.nox --exclude=./.git -cf - . | tar -C "$work" -xf -
    echo "gpu-sglang: ready in $(( $(date +%s) - t0 )) s"
    checkout=$PWD
    cd "$work"
    export PYTHONPATH=$PWD/src
    # results begun on another machine, carried in .kit/runs/<name>/, are resumed
    # (the copy in $work leaves .kit out: read them in the checkout)
    if [ ! -e "$results" ] && [ -f "$checkout/.kit/runs/$name/run.json" ]; then
        cp -a "$checkout/.kit/runs/$name" "$results"
    fi
    if [ "$mode" = explain ]; then
        if [ ! -e "$results" ] && [ -f "reports/examples/$name/run.json" ]; then
            cp -a "reports/examples/$name" "$results"
        fi
        [ -f "$results/run.json" ] || { echo "gpu-sglang: no results of $name to explain" >&2; exit 2; }
        extra=()
        [ -n "${LAUNCHES:-}" ] && extra+=(--launches "$LAUNCHES")
        [ -n "${WARMUP:-}" ] && extra+=(--warmup "$WARMUP")
        [ -n "${WARMUP_LAUNCHES:-}" ] && extra+=(--warmup-launches "$WARMUP_LAUNCHES")
        setsid python3 -m stackmatrix explain "$results" --cell "${CELL:?set CELL}" "${extra[@]}" \
            >>"/tmp/$name.log" 2>&1 </dev/null &
        echo $! >"/tmp/$name.pid"
    else
        resume=()
        [ -f "$results/run.json" ] && resume=(--resume)
        for cell in ${CELLS:-}; do resume+=(--cell "$cell"); done
        setsid python3 -m stackmatrix run "$spec" --output "$results" "${resume[@]}" \
            --reports-dir /tmp/smreports >>"/tmp/$name.log" 2>&1 </dev/null &
        echo $! >"/tmp/$name.pid"
    fi
    ;;
wait) ;;
*)
    echo "usage: gpu-sglang.sh stage|prepare|start|wait|explain [SPEC]" >&2
    exit 2
    ;;
esac
pid=$(cat "/tmp/$name.pid")
deadline=$(( t0 + ${WAIT_S:-560} ))
while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 5; done
kill -0 "$pid" 2>/dev/null && echo "gpu-sglang: still running (pid $pid)" || echo "gpu-sglang: finished"
cp "/tmp/$name.log" "$out/$name.log"
tail -30 "/tmp/$name.log"
tar -C /tmp -czf "$out/$name.tgz" "$name"
echo "gpu-sglang: call done in $(( $(date +%s) - t0 )) s"
