#!/usr/bin/env bash
# Start a Docker engine for the docker-backend tests (run as root in CI).
#
# Installs Debian's docker.io and debootstrap when missing, then starts dockerd in
# the background with the options that work on these machines: vfs storage (no
# overlayfs inside the CI sandbox), and no iptables/bridge (the sandbox has no
# netfilter), which is why every build and container uses --network=host.
# Idempotent: when `docker info` already answers, it does nothing.
set -euo pipefail

LOG=${STACKMATRIX_DOCKERD_LOG:-/var/log/stackmatrix-dockerd.log}
WAIT_S=${STACKMATRIX_DOCKERD_WAIT_S:-60}

if docker info >/dev/null 2>&1; then
    echo "start-dockerd: docker already answers; nothing to do"
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    echo "start-dockerd: must run as root to install and start dockerd" >&2
    exit 1
fi

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    echo "start-dockerd: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

echo "start-dockerd: starting dockerd (log: $LOG)"
mkdir -p "$(dirname "$LOG")"
# its own session: stopping the caller (a CI step, a test run) must not stop the engine
setsid nohup dockerd --storage-driver=vfs --iptables=false --bridge=none >>"$LOG" 2>&1 &

for _ in $(seq 1 "$WAIT_S"); do
    if docker info >/dev/null 2>&1; then
        echo "start-dockerd: docker answers"
        exit 0
    fi
    sleep 1
done
echo "start-dockerd: dockerd did not answer within ${WAIT_S}s; last log lines:" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
