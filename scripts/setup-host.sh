#!/usr/bin/env bash
# Installs and starts what the test suite needs on a fresh Debian machine (as root):
# Docker (Debian's docker.io, dockerd with the vfs driver), debootstrap (the tests
# build their own base image: no registry is reachable), Chromium (the HTML report is
# looked at in a real browser), binutils (c++filt), and Slurm with munge, slurmdbd and
# MariaDB (the Slurm executor's tests run a one-node cluster with job accounting:
# scripts/start-slurm.sh). Idempotent.
set -euo pipefail

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v c++filt >/dev/null 2>&1 || need+=(binutils)
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
command -v slurmdbd >/dev/null 2>&1 || need+=(slurmdbd)
command -v mariadbd >/dev/null 2>&1 || need+=(mariadb-server)
if ((${#need[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup-host: need root to install: ${need[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
bash "$(dirname "$0")/../.ci/start-dockerd.sh"
bash "$(dirname "$0")/start-slurm.sh"
